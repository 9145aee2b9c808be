"""HandoffService: proto <-> domain (services.memory.handoff), nothing else."""

from __future__ import annotations

import grpc

from services.memory.handoff.domain import CHECKPOINT_REQUEST, HandoffDomain, HandoffEntry, Summary
from services.shared.identity import caller_user
from services.shared.time import to_timestamp
from switchboard.memory.v1 import handoff_pb2, handoff_service_pb2, handoff_service_pb2_grpc

pb = handoff_service_pb2


def summary_to_proto(summary: Summary) -> handoff_pb2.HandoffSummary:
    return handoff_pb2.HandoffSummary(
        thread_id=summary.thread_id,
        sections=[
            handoff_pb2.HandoffSection(title=s.title, lines=list(s.lines), trimmed_lines=s.trimmed)
            for s in summary.rendered.sections
        ],
        text=summary.rendered.text,
        last_folded_sequence=summary.last_folded_sequence,
        pending_entries=summary.pending_entries,
        last_checkpoint_reason=summary.last_checkpoint_reason,  # type: ignore[arg-type]
        checkpoint_time=to_timestamp(summary.checkpoint_time),
        summariser=summary.summariser,
        fallback_reason=summary.fallback_reason,
    )


class HandoffServicer(handoff_service_pb2_grpc.HandoffServiceServicer):
    def __init__(self, domain: HandoffDomain) -> None:
        self._domain = domain

    async def RecordHandoffEntries(
        self, request: pb.RecordHandoffEntriesRequest, context: grpc.aio.ServicerContext
    ) -> pb.RecordHandoffEntriesResponse:
        caller = caller_user(context)
        entries = [
            HandoffEntry(e.sequence, e.author_agent_id, e.requester, e.correlation_id, e.kind, e.text)
            for e in request.entries
        ]
        recorded = await self._domain.record(request.thread_id, entries, caller, request.private)
        return pb.RecordHandoffEntriesResponse(
            recorded=recorded.recorded,
            checkpointed=recorded.checkpointed,
            summary=summary_to_proto(recorded.summary),
        )

    async def CheckpointHandoff(
        self, request: pb.CheckpointHandoffRequest, context: grpc.aio.ServicerContext
    ) -> pb.CheckpointHandoffResponse:
        summary = await self._domain.checkpoint(
            request.thread_id, request.reason or CHECKPOINT_REQUEST, caller_user(context)
        )
        return pb.CheckpointHandoffResponse(summary=summary_to_proto(summary))

    async def GetHandoffSummary(
        self, request: pb.GetHandoffSummaryRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetHandoffSummaryResponse:
        summary = await self._domain.summary(request.thread_id, caller_user(context))
        return pb.GetHandoffSummaryResponse(summary=summary_to_proto(summary))
