"""Note proposals: knowledge an agent proposes for a project's durable
memory, waiting for a member's review. The memory service decides: viewers
of the project list and read its proposals, editors and owners accept or
refuse them (403 with the reason otherwise), a proposal of a project the
caller is not a member of is 404 like a missing one, and deciding one
already decided, or accepting one whose target note changed since, is 409.
Accepting writes the proposed note, or updates the note it targets."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request

from gateway import deps, responses
from gateway.deps import User, rpc
from gateway.enums import NOTE_PROPOSAL_STATES
from gateway.params import Id, PageSize, PageToken, ProjectId
from switchboard.memory.v1 import memory_service_pb2

router = responses.ApiRouter(prefix="/api/agent")

# A state to filter by; "" (the default) is every state.
StateFilter = Annotated[
    str,
    Query(
        pattern=f"^(|{'|'.join(NOTE_PROPOSAL_STATES.names)})$",
        description="pending, accepted or refused; omitted: every state",
    ),
]


@router.get("/note-proposals", tags=["note proposals"])
async def list_note_proposals(
    request: Request,
    user: User,
    project_id: ProjectId = "",
    state: StateFilter = "",
    page_size: PageSize = 50,
    page_token: PageToken = "",
) -> responses.NoteProposalList:
    """The project's note proposals, newest first; every member may read them."""
    response = await rpc(
        request,
        deps.memory(request).ListNoteProposals,
        memory_service_pb2.ListNoteProposalsRequest(
            project_id=project_id,
            state=NOTE_PROPOSAL_STATES.number(state),
            page_size=page_size,
            page_token=page_token,
        ),
        user,
    )
    return responses.NoteProposalList(
        proposals=[responses.NoteProposal.from_proto(p) for p in response.proposals],
        next_page_token=response.next_page_token,
    )


@router.get("/note-proposals/{proposal_id}", tags=["note proposals"])
async def get_note_proposal(proposal_id: Id, request: Request, user: User) -> responses.NoteProposal:
    """One proposal of a project the caller is a member of, with its diff."""
    response = await rpc(
        request,
        deps.memory(request).GetNoteProposal,
        memory_service_pb2.GetNoteProposalRequest(id=proposal_id),
        user,
    )
    return responses.NoteProposal.from_proto(response.proposal)


@router.post(
    "/note-proposals/{proposal_id}/accept",
    tags=["note proposals"],
)
async def accept_note_proposal(
    proposal_id: Id, request: Request, user: User
) -> responses.NoteProposalDecided:
    """Writes the proposed note, or the update of its target note (editors
    and owners). 409 when decided already or the target note changed since."""
    response = await rpc(
        request,
        deps.memory(request).AcceptNoteProposal,
        memory_service_pb2.AcceptNoteProposalRequest(id=proposal_id),
        user,
        # A retry after a lost answer would find it decided (409): not retried.
        idempotent=False,
    )
    return responses.NoteProposalDecided(
        proposal=responses.NoteProposal.from_proto(response.proposal),
        note=responses.Note.from_proto(response.note),
    )


@router.post(
    "/note-proposals/{proposal_id}/refuse",
    tags=["note proposals"],
)
async def refuse_note_proposal(
    proposal_id: Id, request: Request, user: User
) -> responses.NoteProposalDecided:
    """Nothing is written (editors and owners). 409 when decided already."""
    response = await rpc(
        request,
        deps.memory(request).RefuseNoteProposal,
        memory_service_pb2.RefuseNoteProposalRequest(id=proposal_id),
        user,
        idempotent=False,
    )
    return responses.NoteProposalDecided(proposal=responses.NoteProposal.from_proto(response.proposal))
