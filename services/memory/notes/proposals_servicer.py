"""MemoryService's note proposal RPCs: proto <-> NoteProposalsDomain, nothing else."""

from __future__ import annotations

import json

import grpc

from services.memory.notes.domain import NewNote
from services.memory.notes.proposals import Decided, NoteProposalsDomain, ProposalView
from services.memory.notes.servicer import note_to_proto
from services.memory.pages.servicer import diff_to_proto
from services.memory.projects.servicer import actor_of
from services.shared.time import to_timestamp
from switchboard.memory.v1 import memory_pb2, memory_service_pb2

pb = memory_service_pb2


def proposal_to_proto(view: ProposalView) -> memory_pb2.NoteProposal:
    row = view.proposal
    proposal = memory_pb2.NoteProposal(
        id=row.id,
        project_id=row.project_id,
        note=memory_pb2.Note(
            project_id=row.project_id,
            kind=row.kind,  # type: ignore[arg-type]
            title=row.title,
            body=row.body,
            tags=json.loads(row.tags_json),
            author_agent_id=row.author_agent_id,
        ),
        reason=row.reason,
        proposer_user_id=row.proposer_user_id,
        run_id=row.run_id,
        match_reason=row.match_reason,
        diff=diff_to_proto(view.diff),
        state=row.state,  # type: ignore[arg-type]
        decided_by_user_id=row.decided_by_user_id,
        result_note_id="" if row.result_note_id.startswith("claim:") else row.result_note_id,
        create_time=to_timestamp(row.create_time),
        decide_time=to_timestamp(row.decide_time) if row.decide_time else None,
    )
    if row.target_note_id:
        proposal.target_note.CopyFrom(
            memory_pb2.Note(
                id=row.target_note_id,
                project_id=row.project_id,
                kind=row.target_kind,  # type: ignore[arg-type]
                title=row.target_title,
                body=row.target_body,
                tags=json.loads(row.target_tags_json),
                update_time=to_timestamp(row.target_update_time) if row.target_update_time else None,
            )
        )
    return proposal


def _decided(decided: Decided) -> tuple[memory_pb2.NoteProposal, memory_pb2.Note | None]:
    return proposal_to_proto(decided.view), note_to_proto(decided.note) if decided.note else None


class NoteProposalRpcs:
    """ProposeNote, GetNoteProposal, ListNoteProposals, AcceptNoteProposal, RefuseNoteProposal."""

    _proposals: NoteProposalsDomain

    async def ProposeNote(
        self, request: pb.ProposeNoteRequest, context: grpc.aio.ServicerContext
    ) -> pb.ProposeNoteResponse:
        n = request.note
        new = NewNote(n.project_id, n.kind, n.title, n.body, list(n.tags), n.author_agent_id)
        proposal, note = _decided(
            await self._proposals.propose(
                actor_of(context), request.request_id, new, request.reason, request.run_id
            )
        )
        return pb.ProposeNoteResponse(proposal=proposal, note=note)

    async def GetNoteProposal(
        self, request: pb.GetNoteProposalRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetNoteProposalResponse:
        view = await self._proposals.get(actor_of(context), request.id)
        return pb.GetNoteProposalResponse(proposal=proposal_to_proto(view))

    async def ListNoteProposals(
        self, request: pb.ListNoteProposalsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListNoteProposalsResponse:
        views, token = await self._proposals.list(
            actor_of(context), request.project_id, request.state, request.page_size, request.page_token
        )
        return pb.ListNoteProposalsResponse(
            proposals=[proposal_to_proto(v) for v in views], next_page_token=token
        )

    async def AcceptNoteProposal(
        self, request: pb.AcceptNoteProposalRequest, context: grpc.aio.ServicerContext
    ) -> pb.AcceptNoteProposalResponse:
        proposal, note = _decided(await self._proposals.accept(actor_of(context), request.id))
        return pb.AcceptNoteProposalResponse(proposal=proposal, note=note)

    async def RefuseNoteProposal(
        self, request: pb.RefuseNoteProposalRequest, context: grpc.aio.ServicerContext
    ) -> pb.RefuseNoteProposalResponse:
        view = await self._proposals.refuse(actor_of(context), request.id)
        return pb.RefuseNoteProposalResponse(proposal=proposal_to_proto(view))
