"""Proposals through the real stub, on SQLite and PostgreSQL: refusing
writes nothing,
accepting writes a new page version through the ordinary edit path."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from google.protobuf.field_mask_pb2 import FieldMask

from services.shared.errors import error_info
from switchboard.memory.v1 import pages_pb2, pages_service_pb2_grpc
from switchboard.memory.v1 import pages_service_pb2 as pb
from tests.service.harness import as_user, expect_error

Stub = pages_service_pb2_grpc.PagesServiceStub
INVALID = (grpc.StatusCode.INVALID_ARGUMENT, "ERROR_REASON_INVALID_ARGUMENT")
NOT_FOUND = (grpc.StatusCode.NOT_FOUND, "ERROR_REASON_NOT_FOUND")
PRECONDITION = (grpc.StatusCode.FAILED_PRECONDITION, "ERROR_REASON_FAILED_PRECONDITION")
EXHAUSTED = (grpc.StatusCode.RESOURCE_EXHAUSTED, "ERROR_REASON_QUOTA_EXCEEDED")

BODY = "# My Switchboard AI\n\n## Desired tone\n\n- friendly\n\n## Habits\n\n- mornings\n"
PROPOSED = (
    "# My Switchboard AI\n\n## Desired tone\n\n- friendly\n- answer in French\n\n## Habits\n\n- mornings\n"
)


@pytest.fixture
def memory_options() -> dict[str, Any]:
    return {"max_pending_proposals": 3}


@pytest.fixture
def stub(memory_channel: grpc.aio.Channel) -> Stub:
    return Stub(memory_channel)


async def page_of(
    stub: Stub, user: str, body: str = BODY, readers: list[str] | None = None
) -> pages_pb2.Page:
    page = pages_pb2.Page(title="Instructions", body=body, reader_user_ids=readers or [])
    return (await stub.CreatePage(pb.CreatePageRequest(page=page), **as_user(user))).page


async def propose(
    stub: Stub, user: str, page_id: str, body: str = PROPOSED, request_id: str = ""
) -> pages_pb2.Proposal:
    request = pb.CreateProposalRequest(
        request_id=request_id,
        page_id=page_id,
        proposed_body=body,
        reason="you said: remember French",
        proposer_agent_id="personal",
    )
    return (await stub.CreateProposal(request, **as_user(user))).proposal


async def history(stub: Stub, user: str, page_id: str) -> list[pages_pb2.PageVersion]:
    return list(
        (await stub.ListPageVersions(pb.ListPageVersionsRequest(page_id=page_id), **as_user(user))).versions
    )


async def get_page(stub: Stub, user: str, page_id: str) -> pages_pb2.Page:
    return (await stub.GetPage(pb.GetPageRequest(page_id=page_id), **as_user(user))).page


async def test_create_returns_the_diff_against_the_current_version(stub: Stub) -> None:
    page = await page_of(stub, "alice")
    proposal = await propose(stub, "alice", page.id)
    assert proposal.state == pages_pb2.PROPOSAL_STATE_PENDING and proposal.base_version == 1
    assert (proposal.proposer_user_id, proposal.proposer_agent_id) == ("alice", "personal")
    diff = proposal.diff
    assert (diff.added_lines, diff.removed_lines) == (1, 0)
    assert f"--- {page.id}@v1\n+++ proposal {proposal.id}\n" in diff.unified
    assert "\n+- answer in French\n" in diff.unified
    (hunk,) = diff.hunks
    added = [line.text for line in hunk.lines if line.kind == pages_pb2.DIFF_LINE_KIND_ADDED]
    assert added == ["- answer in French"]
    assert (hunk.old_start, hunk.new_start, hunk.new_lines - hunk.old_lines) == (3, 3, 1)
    # Idempotent on request_id.
    first = await propose(stub, "alice", page.id, "other text", request_id="p-1")
    again = await propose(stub, "alice", page.id, "other text", request_id="p-1")
    assert first.id == again.id


async def test_t05_refuse_writes_nothing(stub: Stub) -> None:
    page = await page_of(stub, "alice")
    proposal = await propose(stub, "alice", page.id)
    refused = await stub.RefuseProposal(
        pb.RefuseProposalRequest(proposal_id=proposal.id, decision_reason="no"), **as_user("alice")
    )
    assert (
        refused.proposal.state == pages_pb2.PROPOSAL_STATE_REFUSED
        and refused.proposal.decision_reason == "no"
    )
    assert refused.proposal.accepted_version == 0 and refused.proposal.decide_time.seconds > 0
    after = await get_page(stub, "alice", page.id)
    assert (after.version, after.body, after.update_time) == (1, BODY, page.update_time)
    assert [v.version for v in await history(stub, "alice", page.id)] == [1]


async def test_t05_accept_writes_a_new_version_through_the_edit_path(stub: Stub) -> None:
    page = await page_of(stub, "alice")
    proposal = await propose(stub, "alice", page.id)
    accepted = await stub.AcceptProposal(
        pb.AcceptProposalRequest(proposal_id=proposal.id), **as_user("alice")
    )
    assert (
        accepted.page.version == 2
        and accepted.page.body == PROPOSED
        and accepted.page.title == "Instructions"
    )
    assert (
        accepted.proposal.state == pages_pb2.PROPOSAL_STATE_ACCEPTED
        and accepted.proposal.accepted_version == 2
    )
    latest, first = await history(stub, "alice", page.id)
    assert (latest.version, latest.body, latest.proposal_id, latest.author_user_id) == (
        2,
        PROPOSED,
        proposal.id,
        "alice",
    )
    assert (first.version, first.body) == (1, BODY)
    # A decided proposal cannot be decided again, either way.
    for call in (stub.AcceptProposal, stub.RefuseProposal):
        error = await expect_error(
            call(pb.AcceptProposalRequest(proposal_id=proposal.id), **as_user("alice")), *PRECONDITION
        )  # type: ignore[operator]
        assert "accepted already" in (error.details() or "")
    assert [v.version for v in await history(stub, "alice", page.id)] == [2, 1]


async def test_accept_after_the_page_changed_fails_with_both_diffs(stub: Stub) -> None:
    page = await page_of(stub, "alice")
    proposal = await propose(stub, "alice", page.id)
    edited = BODY.replace("- mornings", "- evenings")
    await stub.UpdatePage(
        pb.UpdatePageRequest(
            page=pages_pb2.Page(id=page.id, body=edited), update_mask=FieldMask(paths=["body"])
        ),
        **as_user("alice"),
    )
    error = await expect_error(
        stub.AcceptProposal(pb.AcceptProposalRequest(proposal_id=proposal.id), **as_user("alice")),
        *PRECONDITION,
    )
    info = error_info(error)
    assert info is not None
    assert (info.metadata["base_version"], info.metadata["current_version"]) == ("1", "2")
    assert "-- mornings\n+- evenings" in info.metadata["base_to_current"]
    assert "+- answer in French" in info.metadata["current_to_proposed"]
    assert (
        "-- evenings\n+- mornings" in info.metadata["current_to_proposed"]
    )  # accepting now would undo the edit
    assert "base_to_current" in (error.details() or "") and "current_to_proposed" in (error.details() or "")
    # Nothing written; the proposal stays pending, and GetProposal shows the drift whole.
    assert (await get_page(stub, "alice", page.id)).version == 2
    got = await stub.GetProposal(pb.GetProposalRequest(proposal_id=proposal.id), **as_user("alice"))
    assert got.proposal.state == pages_pb2.PROPOSAL_STATE_PENDING and got.current_version == 2
    assert got.base_to_current.unified == info.metadata["base_to_current"]
    assert got.current_to_proposed.new_label == f"proposal {proposal.id}"


async def test_only_the_owner_decides_and_others_see_not_found(stub: Stub) -> None:
    page = await page_of(stub, "alice", readers=["bob"])
    # A reader may propose (the agent acting for them); the owner decides.
    proposal = await propose(stub, "bob", page.id)
    seen = await stub.GetProposal(pb.GetProposalRequest(proposal_id=proposal.id), **as_user("bob"))
    assert seen.proposal.id == proposal.id
    for call in (stub.AcceptProposal, stub.RefuseProposal):
        error = await expect_error(
            call(pb.AcceptProposalRequest(proposal_id=proposal.id), **as_user("bob")), *PRECONDITION
        )  # type: ignore[operator]
        assert "only the owner" in (error.details() or "")
    # Someone who is neither owner nor proposer: NOT_FOUND, like a missing id.
    await expect_error(
        stub.GetProposal(pb.GetProposalRequest(proposal_id=proposal.id), **as_user("carol")), *NOT_FOUND
    )
    await expect_error(
        stub.AcceptProposal(pb.AcceptProposalRequest(proposal_id=proposal.id), **as_user("carol")), *NOT_FOUND
    )
    await expect_error(
        stub.GetProposal(pb.GetProposalRequest(proposal_id="missing"), **as_user("alice")), *NOT_FOUND
    )
    # A page the caller cannot read cannot get proposals.
    await expect_error(propose(stub, "carol", page.id), *NOT_FOUND)
    listed = await stub.ListProposals(pb.ListProposalsRequest(page_id=page.id), **as_user("alice"))
    assert [p.id for p in listed.proposals] == [proposal.id] and listed.proposals[0].diff.added_lines == 1
    assert not (await stub.ListProposals(pb.ListProposalsRequest(), **as_user("carol"))).proposals
    accepted = await stub.AcceptProposal(
        pb.AcceptProposalRequest(proposal_id=proposal.id), **as_user("alice")
    )
    assert accepted.page.version == 2


async def test_two_concurrent_accepts_write_one_version(stub: Stub) -> None:
    page = await page_of(stub, "alice")
    proposal = await propose(stub, "alice", page.id)
    request = pb.AcceptProposalRequest(proposal_id=proposal.id)
    results = await asyncio.gather(
        *(stub.AcceptProposal(request, **as_user("alice")) for _ in range(3)), return_exceptions=True
    )
    successes = [r for r in results if not isinstance(r, BaseException)]
    failures = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
    assert len(successes) == 1 and len(failures) == 2
    assert all(f.code() == grpc.StatusCode.FAILED_PRECONDITION for f in failures)
    assert all("accepted already" in (f.details() or "") for f in failures)
    assert [v.version for v in await history(stub, "alice", page.id)] == [2, 1]


async def test_list_filters_and_pages(stub: Stub) -> None:
    pages = [await page_of(stub, "alice") for _ in range(2)]
    made = [await propose(stub, "alice", pages[i % 2].id, f"text {i}") for i in range(4)]
    await stub.RefuseProposal(pb.RefuseProposalRequest(proposal_id=made[0].id), **as_user("alice"))
    ids: list[str] = []
    token = ""
    while True:
        response = await stub.ListProposals(
            pb.ListProposalsRequest(page_size=3, page_token=token), **as_user("alice")
        )
        ids.extend(p.id for p in response.proposals)
        token = response.next_page_token
        if not token:
            break
    assert ids == [p.id for p in reversed(made)]
    pending = await stub.ListProposals(
        pb.ListProposalsRequest(page_id=pages[0].id, state=pages_pb2.PROPOSAL_STATE_PENDING),
        **as_user("alice"),
    )
    assert [p.id for p in pending.proposals] == [made[2].id]


async def test_bad_input_and_limits(stub: Stub) -> None:
    page = await page_of(stub, "alice")
    error = await expect_error(propose(stub, "alice", page.id, BODY), *INVALID)
    assert "changes nothing" in (error.details() or "")
    await expect_error(
        stub.ListProposals(pb.ListProposalsRequest(state=9), **as_user("alice")),  # type: ignore[arg-type]
        *INVALID,
    )
    for i in range(3):
        await propose(stub, "alice", page.id, f"variant {i}")
    error = await expect_error(propose(stub, "alice", page.id, "one too many"), *EXHAUSTED)
    assert "pending proposals" in (error.details() or "")
