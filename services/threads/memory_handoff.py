"""The handoff seam's production summarizer: at each rotation, memory's
HandoffService folds the closed segment into the thread's handoff summary
(stable sections, bounded to 4,096 characters) and the summary is
stored as the segment's handoff.

The engine already records every ask and answer as they happen (so a swap
works even before a rotation); the closed segment's entries are recorded
again here, which memory ignores for sequences it knows (idempotent), so a
segment written by other clients is summarised too.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from services.shared.clients import call
from services.threads.models import Entry, Segment
from services.threads.rotation import ReadEntries
from switchboard.memory.v1 import handoff_pb2, handoff_service_pb2, handoff_service_pb2_grpc
from switchboard.threads.v1 import threads_pb2

# Entries per RecordHandoffEntries call (a segment holds up to 2,000 by default).
BATCH = 200
# The identity these calls carry: the threads service itself, for no user.
SERVICE_IDENTITY = "service:threads"

_KINDS = {
    threads_pb2.ROLE_USER: handoff_pb2.HANDOFF_ENTRY_KIND_REQUEST,
    threads_pb2.ROLE_ASSISTANT: handoff_pb2.HANDOFF_ENTRY_KIND_ANSWER,
}


def handoff_entries(entries: Sequence[Entry]) -> list[handoff_pb2.HandoffEntry]:
    return [
        handoff_pb2.HandoffEntry(
            sequence=entry.sequence,
            author_agent_id=entry.source.removeprefix("agent:")
            if entry.source.startswith("agent:")
            else entry.target,
            requester=entry.requester,
            correlation_id=entry.correlation_id,
            kind=_KINDS.get(entry.role, handoff_pb2.HANDOFF_ENTRY_KIND_NOTE),  # type: ignore[call-overload]
            text=entry.content,
        )
        for entry in entries
    ]


class MemoryHandoff:
    """A HandoffSummarizer over memory's HandoffService."""

    def __init__(self, channel: grpc.aio.Channel, timeout: float) -> None:
        """``channel``: the threads service's one channel to memory (its owner closes it)."""
        self._stub = handoff_service_pb2_grpc.HandoffServiceStub(channel)
        self._timeout = timeout

    async def summarize(self, segment: Segment, read_entries: ReadEntries) -> str | None:
        entries = handoff_entries(await read_entries())
        for start in range(0, len(entries), BATCH):
            request = handoff_service_pb2.RecordHandoffEntriesRequest(
                thread_id=segment.thread_id, entries=entries[start : start + BATCH]
            )
            await call(self._stub.RecordHandoffEntries, request, timeout=self._timeout, user=SERVICE_IDENTITY)
        checkpoint = handoff_service_pb2.CheckpointHandoffRequest(
            thread_id=segment.thread_id, reason=handoff_pb2.HANDOFF_CHECKPOINT_REASON_ROTATION
        )
        response = await call(
            self._stub.CheckpointHandoff, checkpoint, timeout=self._timeout, user=SERVICE_IDENTITY
        )
        return response.summary.text or None
