"""Note proposals through the memory service's real stub, on SQLite and
PostgreSQL: an agent's unrequested note waits for a member's review, is
matched against the project's notes (across languages, with the
multilingual embedder), updates the note it repeats or contradicts, and is
decided once; an AUTO project takes it at once."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import numpy as np
import pytest
from google.protobuf.field_mask_pb2 import FieldMask

from services.memory.notes.proposals import RELATED_COSINE
from services.memory.server import build_server
from services.memory.settings import MemorySettings
from services.shared.embeddings import EmbedderName, load_embedder
from switchboard.memory.v1 import memory_pb2, memory_service_pb2_grpc, projects_pb2, projects_service_pb2_grpc
from switchboard.memory.v1 import memory_service_pb2 as pb
from switchboard.memory.v1 import projects_service_pb2 as jpb
from tests.service.harness import as_user, create_projects, expect_error, running

Stub = memory_service_pb2_grpc.MemoryServiceStub
NOT_FOUND = (grpc.StatusCode.NOT_FOUND, "ERROR_REASON_NOT_FOUND")
DENIED = (grpc.StatusCode.PERMISSION_DENIED, "ERROR_REASON_PERMISSION_DENIED")
PRECONDITION = (grpc.StatusCode.FAILED_PRECONDITION, "ERROR_REASON_FAILED_PRECONDITION")
PENDING, ACCEPTED, REFUSED = (
    memory_pb2.NOTE_PROPOSAL_STATE_PENDING,
    memory_pb2.NOTE_PROPOSAL_STATE_ACCEPTED,
    memory_pb2.NOTE_PROPOSAL_STATE_REFUSED,
)


@pytest.fixture
def memory_options() -> dict[str, Any]:
    return {"max_pending_proposals": 3}


@pytest.fixture
async def stub(memory_channel: grpc.aio.Channel) -> Stub:
    await create_projects(memory_channel, "alice", "apollo", bob="editor", carol="viewer")
    return Stub(memory_channel)


def fact(title: str, body: str, project_id: str = "apollo") -> memory_pb2.Note:
    return memory_pb2.Note(
        project_id=project_id, kind=memory_pb2.NOTE_KIND_FACT, title=title, body=body, author_agent_id="qa"
    )


async def propose(
    stub: Stub, user: str, note: memory_pb2.Note, request_id: str = ""
) -> pb.ProposeNoteResponse:
    request = pb.ProposeNoteRequest(
        request_id=request_id, note=note, reason="the team decided it", run_id="r1"
    )
    response: pb.ProposeNoteResponse = await stub.ProposeNote(request, **as_user(user))
    return response


async def titles(stub: Stub, user: str = "alice") -> list[str]:
    listed = await stub.ListNotes(pb.ListNotesRequest(project_id="apollo"), **as_user(user))
    return [n.title for n in listed.notes]


async def test_a_proposal_waits_for_a_members_review(stub: Stub) -> None:
    proposed = (await propose(stub, "bob", fact("Deploy day", "We deploy on Tuesdays."), "k1")).proposal
    assert (proposed.state, proposed.proposer_user_id, proposed.run_id) == (PENDING, "bob", "r1")
    assert (proposed.note.author_agent_id, proposed.reason) == ("qa", "the team decided it")
    assert not proposed.HasField("target_note") and proposed.diff.added_lines == 3
    assert "+We deploy on Tuesdays." in proposed.diff.unified
    assert await titles(stub) == []  # nothing is written before a decision
    # A retry is the same proposal; a viewer proposes nothing.
    assert (
        await propose(stub, "bob", fact("Deploy day", "We deploy on Tuesdays."), "k1")
    ).proposal.id == proposed.id
    await expect_error(propose(stub, "carol", fact("Mine", "Carol's fact.")), *DENIED)
    # Every member lists it; a viewer may not decide; a stranger sees nothing.
    for user in ("alice", "bob", "carol"):
        listed = await stub.ListNoteProposals(
            pb.ListNoteProposalsRequest(project_id="apollo", state=PENDING), **as_user(user)
        )
        assert [p.id for p in listed.proposals] == [proposed.id]
    await expect_error(
        stub.AcceptNoteProposal(pb.AcceptNoteProposalRequest(id=proposed.id), **as_user("carol")), *DENIED
    )
    for call in (
        stub.GetNoteProposal(pb.GetNoteProposalRequest(id=proposed.id), **as_user("mallory")),
        stub.AcceptNoteProposal(pb.AcceptNoteProposalRequest(id=proposed.id), **as_user("mallory")),
        stub.RefuseNoteProposal(pb.RefuseNoteProposalRequest(id=proposed.id), **as_user("mallory")),
        stub.ListNoteProposals(pb.ListNoteProposalsRequest(project_id="apollo"), **as_user("mallory")),
    ):
        await expect_error(call, *NOT_FOUND)
    # Alice accepts: the note is written, authored by the proposing agent, and recalled.
    accepted = await stub.AcceptNoteProposal(pb.AcceptNoteProposalRequest(id=proposed.id), **as_user("alice"))
    assert (accepted.proposal.state, accepted.proposal.decided_by_user_id) == (ACCEPTED, "alice")
    assert accepted.proposal.result_note_id == accepted.note.id and accepted.note.author_agent_id == "qa"
    recalled = await stub.RecallNotes(
        pb.RecallNotesRequest(project_id="apollo", query="deploy tuesdays"), **as_user("bob")
    )
    assert [r.note.id for r in recalled.notes] == [accepted.note.id]
    # Decided once.
    await expect_error(
        stub.AcceptNoteProposal(pb.AcceptNoteProposalRequest(id=proposed.id), **as_user("bob")), *PRECONDITION
    )
    await expect_error(
        stub.RefuseNoteProposal(pb.RefuseNoteProposalRequest(id=proposed.id), **as_user("bob")), *PRECONDITION
    )
    # A refusal writes nothing.
    other = (await propose(stub, "bob", fact("Lunch", "Lunch is at noon."))).proposal
    refused = await stub.RefuseNoteProposal(pb.RefuseNoteProposalRequest(id=other.id), **as_user("bob"))
    assert (refused.proposal.state, refused.proposal.decided_by_user_id) == (REFUSED, "bob")
    assert await titles(stub) == ["Deploy day"]


async def test_two_members_accepting_at_once_write_one_note(stub: Stub) -> None:
    proposed = (await propose(stub, "bob", fact("Staging", "Staging is called Juniper."))).proposal
    results = await asyncio.gather(
        *(
            stub.AcceptNoteProposal(pb.AcceptNoteProposalRequest(id=proposed.id), **as_user(user))
            for user in ("alice", "bob", "alice", "bob")
        ),
        return_exceptions=True,
    )
    accepted = [r for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
    assert len(accepted) == 1 and len(refused) == 3
    assert {r.code() for r in refused} == {grpc.StatusCode.FAILED_PRECONDITION}
    assert await titles(stub) == ["Staging"]


async def test_a_proposal_repeating_a_note_updates_it_and_a_stale_one_is_refused(stub: Stub) -> None:
    kept = await stub.CreateNote(
        pb.CreateNoteRequest(note=fact("Deploy day", "We deploy on Tuesdays.")), **as_user("alice")
    )
    proposed = (await propose(stub, "bob", fact("deploy DAY", "we deploy on tuesdays!"))).proposal
    assert proposed.target_note.id == kept.note.id and "identical text" in proposed.match_reason
    accepted = await stub.AcceptNoteProposal(pb.AcceptNoteProposalRequest(id=proposed.id), **as_user("alice"))
    assert accepted.note.id == kept.note.id and accepted.note.title == "deploy DAY"
    assert await titles(stub) == ["deploy DAY"]
    # A proposal whose note changed before the decision is not applied over the change.
    stale = (await propose(stub, "bob", fact("Deploy day", "We deploy on Tuesdays."))).proposal
    assert stale.target_note.id == kept.note.id
    await stub.UpdateNote(
        pb.UpdateNoteRequest(
            note=memory_pb2.Note(id=kept.note.id, body="We deploy on Wednesdays."),
            update_mask=FieldMask(paths=["body"]),
        ),
        **as_user("alice"),
    )
    error = await expect_error(
        stub.AcceptNoteProposal(pb.AcceptNoteProposalRequest(id=stale.id), **as_user("alice")), *PRECONDITION
    )
    assert "changed" in (error.details() or "")
    current = await stub.GetNote(pb.GetNoteRequest(id=kept.note.id), **as_user("alice"))
    assert current.note.body == "We deploy on Wednesdays."
    pending = await stub.GetNoteProposal(pb.GetNoteProposalRequest(id=stale.id), **as_user("bob"))
    assert pending.proposal.state == PENDING  # still the members' to refuse


async def test_pending_proposals_are_bounded_per_project(stub: Stub) -> None:
    for n in range(3):
        await propose(stub, "bob", fact(f"Fact {n}", f"Distinct fact number {n} about topic{n}."))
    error = await expect_error(
        propose(stub, "bob", fact("One more", "A fourth fact.")),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "ERROR_REASON_QUOTA_EXCEEDED",
    )
    assert "accept or refuse" in (error.details() or "")


async def test_an_auto_project_takes_its_agents_notes_at_once(
    stub: Stub, memory_channel: grpc.aio.Channel
) -> None:
    projects = projects_service_pb2_grpc.ProjectsServiceStub(memory_channel)
    await projects.UpdateProject(
        jpb.UpdateProjectRequest(
            project=projects_pb2.Project(id="apollo", note_policy=projects_pb2.NOTE_POLICY_AUTO),
            update_mask=FieldMask(paths=["note_policy"]),
        ),
        **as_user("alice"),
    )
    proposed = await propose(stub, "bob", fact("Freeze", "The freeze starts on Monday."))
    assert proposed.proposal.state == ACCEPTED and proposed.proposal.decided_by_user_id == ""
    assert proposed.note.id == proposed.proposal.result_note_id and await titles(stub) == ["Freeze"]


# The related-note threshold, measured with the multilingual embedder on
# notes as they are embedded (title, then body).
PAIRS = {
    "translation": (
        "Production database\nProduction runs on PostgreSQL 16.",
        "Base de production\nLa base de données de production est PostgreSQL 16.",
    ),
    "another value": (
        "Production database\nProduction runs on PostgreSQL 16.",
        "Production database\nProduction runs on MySQL 8.",
    ),
    "another value, in French": (
        "Production database\nProduction runs on PostgreSQL 16.",
        "Base de production\nLa production tourne sur MySQL 8.",
    ),
    "another fact, same subject": (
        "Production database\nProduction runs on PostgreSQL 16.",
        "Backups\nThe production database is backed up every night.",
    ),
    "unrelated": (
        "Production database\nProduction runs on PostgreSQL 16.",
        "Deploy day\nWe deploy on Tuesdays.",
    ),
}


def test_the_related_threshold_separates_the_measured_pairs() -> None:
    embedder = load_embedder(EmbedderName.USE_MULTILINGUAL.value)
    threshold = RELATED_COSINE[EmbedderName.USE_MULTILINGUAL.value]
    related = {"translation", "another value", "another value, in French"}
    for name, (a, b) in PAIRS.items():
        vectors = embedder.embed([a, b])
        cosine = float(np.dot(vectors[0], vectors[1]))
        assert (cosine >= threshold) == (name in related), (name, cosine)


@pytest.mark.parametrize(
    ("kept", "proposed"),
    [
        (
            ("Production database", "Production runs on PostgreSQL 16."),
            ("Base de production", "La base de données de production est PostgreSQL 16."),
        ),
        (
            ("Base de production", "La base de données de production est PostgreSQL 16."),
            ("Production database", "Production runs on MySQL 8."),
        ),
    ],
    ids=["fr-over-en", "en-over-fr"],
)
async def test_a_proposal_in_another_language_updates_the_note_on_the_same_fact(
    db_url: str, kept: tuple[str, str], proposed: tuple[str, str]
) -> None:
    settings = MemorySettings(port=0, database_url=db_url, embedder=EmbedderName.USE_MULTILINGUAL)
    async with running(build_server, settings) as (_, channel):
        await create_projects(channel, "alice", "apollo", bob="editor")
        stub = Stub(channel)
        original = await stub.CreateNote(pb.CreateNoteRequest(note=fact(*kept)), **as_user("alice"))
        await stub.CreateNote(
            pb.CreateNoteRequest(note=fact("Deploy day", "We deploy on Tuesdays.")), **as_user("alice")
        )
        proposal = (await propose(stub, "bob", fact(*proposed))).proposal
        assert proposal.target_note.id == original.note.id, proposal.match_reason
        assert "embedding cosine" in proposal.match_reason
        assert f"-{kept[1]}" in proposal.diff.unified and f"+{proposed[1]}" in proposal.diff.unified
        await stub.AcceptNoteProposal(pb.AcceptNoteProposalRequest(id=proposal.id), **as_user("alice"))
        assert sorted(await titles(stub)) == sorted(["Deploy day", proposed[0]])  # updated, not added
