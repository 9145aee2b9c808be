"""Rotation of agent threads into segments, and the handoff seam. No gRPC here.

An agent thread's log is cut into numbered segments; sequence numbers stay
global per thread, so views and paging read across segments unchanged. The
append transaction (``services.threads.tables``) counts each append into the open segment and,
when :class:`RotationPolicy` says it is full, closes it and opens the next one.
Only the canonical agent thread rotates: views are filters over it, and
conversations do not rotate.

A closed segment's handoff summary is what a model receives in place of the
segment (the handoff + the recent tail of the thread); the raw entries of old
segments stay readable for people, never re-injected into a model.

The seam: once the append has committed, :class:`Rotation` hands each closed
segment to a :class:`HandoffSummarizer`, and what it returns is stored,
bounded to :data:`HANDOFF_SUMMARY_MAX_CHARS`. In production that is memory's
HandoffService (``memory_handoff.MemoryHandoff``, when ``memory_address`` is
set); without it, :class:`PendingHandoff` produces nothing and the segment
stays ``pending`` until a summary is stored with SetSegmentHandoff.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from services.shared.audit import Actor
from services.shared.errors import FailedPrecondition, InvalidArgument, NotFound, TooLarge
from services.shared.pagination import as_count, page_of, page_request
from services.threads.access import READ, AgentAccess
from services.threads.models import Entry, Segment, Thread
from services.threads.repository import ThreadsRepository
from services.threads.tables.segments import RotationPolicy

__all__ = [
    "HANDOFF_SUMMARY_MAX_CHARS",
    "HandoffSummarizer",
    "PendingHandoff",
    "ReadEntries",
    "Rotation",
    "RotationPolicy",
    "check_handoff",
]

log = logging.getLogger(__name__)

# The handoff is bounded; the stable rubrics of the summary (current
# objective, active requests per requester, recent decisions, blockers, last
# correlated answer) fit in it.
HANDOFF_SUMMARY_MAX_CHARS = 4096


ReadEntries = Callable[[], Awaitable[Sequence[Entry]]]


class HandoffSummarizer(Protocol):
    """Summarizes a just-closed segment for the next one.

    Called after the append that closed ``segment`` has committed, with a
    function that reads the segment's entries (only if the summarizer needs
    them). Returns the summary, or None when it has none now (the segment
    stays ``pending``; someone may call SetSegmentHandoff later). An error is
    logged and leaves the segment pending: the append has succeeded already.
    """

    async def summarize(self, segment: Segment, read_entries: ReadEntries) -> str | None: ...


class PendingHandoff:
    """No summarizer configured: no summary, the segment's handoff stays ``pending``."""

    async def summarize(self, segment: Segment, read_entries: ReadEntries) -> str | None:
        return None


def check_handoff(summary: str, field: str = "summary") -> str:
    if not summary.strip():
        raise InvalidArgument(f"{field} must not be blank", field=field)
    if len(summary) > HANDOFF_SUMMARY_MAX_CHARS:
        raise TooLarge(f"{field} is longer than {HANDOFF_SUMMARY_MAX_CHARS} characters", field=field)
    return summary


class Rotation:
    """Segments of agent threads: the policy the append applies, the handoff
    seam after it, and the segment RPCs' rules."""

    def __init__(
        self,
        repository: ThreadsRepository,
        access: AgentAccess,
        policy: RotationPolicy,
        summarizer: HandoffSummarizer | None = None,
    ) -> None:
        self._repo = repository
        self._access = access
        self.policy = policy
        self._summarizer: HandoffSummarizer = summarizer or PendingHandoff()

    async def segments_closed(self, closed: Sequence[Segment]) -> None:
        """The seam, after the append's commit: asks for each closed segment's
        handoff and stores it if one comes back."""
        for segment in closed:

            async def read_entries(segment: Segment = segment) -> Sequence[Entry]:
                return await self._repo.entries.entries_between(
                    segment.thread_id, segment.first_sequence, segment.last_sequence
                )

            try:
                summary = await self._summarizer.summarize(segment, read_entries)
                if summary is not None:
                    await self._repo.segments.set_segment_handoff(
                        segment.thread_id, segment.number, summary[:HANDOFF_SUMMARY_MAX_CHARS]
                    )
            except Exception:  # noqa: BLE001 - the append has committed; the handoff stays pending
                log.exception(
                    "handoff of segment %s of thread %s failed; it stays pending",
                    segment.number,
                    segment.thread_id,
                )

    async def _agent_thread(self, thread_id: str) -> Thread:
        thread = await self._repo.threads.get_thread(thread_id) if thread_id else None
        if thread is None or thread.kind != "agent":
            raise NotFound(f"agent thread {thread_id!r} not found", thread_id=thread_id)
        return thread

    async def list_segments(
        self, actor: Actor, thread_id: str, requested_size: int, token: str, descending: bool = False
    ) -> tuple[Sequence[Segment], str]:
        """For the members of the thread's agent or its project (viewers and
        up). Newest first when ``descending``: its tokens say "before"."""
        await self._access.require_thread_id_member(actor, thread_id, READ)
        await self._agent_thread(thread_id)
        side = "before" if descending else "after"
        size, bound = page_request(requested_size, token, lambda cursor: as_count(cursor[side]))
        rows = await self._repo.segments.list_segments(thread_id, bound or 0, size + 1, descending)
        return page_of(rows, size, lambda last: {side: last.number})

    async def set_handoff(self, actor: Actor, thread_id: str, number: int, summary: str) -> Segment:
        """For the members of the thread's agent or its project (editors and up)."""
        await self._access.require_thread_id_member(actor, thread_id)
        check_handoff(summary)
        if number <= 0:
            raise InvalidArgument("number must be a segment number (from 1)", field="number")
        await self._agent_thread(thread_id)
        segment = await self._repo.segments.set_segment_handoff(thread_id, number, summary)
        if segment is not None:
            return segment
        existing = await self._repo.segments.get_segment(thread_id, number)
        if existing is None:
            raise NotFound(f"segment {number} of thread {thread_id!r} not found", thread_id=thread_id)
        raise FailedPrecondition(
            f"segment {number} is still open: only a closed segment has a handoff", thread_id=thread_id
        )
