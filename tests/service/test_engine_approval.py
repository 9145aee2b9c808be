"""A run that ends waiting for approval is settled by the user's decision on
its proposal: done, with the decision recorded; a second decision is
refused, another user's run looks missing."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from switchboard.engine.v1 import engine_pb2, engine_service_pb2
from switchboard.memory.v1 import pages_service_pb2
from switchboard.threads.v1 import threads_service_pb2
from tests.conftest import DatabaseFactory
from tests.service.harness import as_user, expect_error
from tests.service.system import System, collect, system

ALICE = as_user("alice")


@pytest.fixture
async def sb(make_database: DatabaseFactory) -> AsyncIterator[System]:
    async with system(make_database) as running_system:
        yield running_system


async def remember(sb: System, text: str) -> tuple[str, str]:
    chat = await sb.threads.CreateConversation(threads_service_pb2.CreateConversationRequest(), **ALICE)
    request = engine_service_pb2.StartRunRequest(
        conversation_id=chat.conversation.id, message=text, surface=engine_pb2.SURFACE_CHAT
    )
    events = await collect(sb.engine.StartRun(request, metadata=ALICE["metadata"], timeout=30))
    (proposal,) = [e.proposal for e in events if e.WhichOneof("kind") == "proposal"]
    assert events[-1].final.status == engine_pb2.RUN_STATUS_WAITING_APPROVAL
    return events[0].run_id, proposal.proposal_id


async def decide(sb: System, run_id: str, decision: int, user: str = "alice") -> engine_pb2.Run:
    request = engine_service_pb2.RecordApprovalDecisionRequest(run_id=run_id, decision=decision)  # type: ignore[arg-type]
    return (await sb.engine.RecordApprovalDecision(request, **as_user(user))).run


@pytest.mark.parametrize(
    ("text", "decision"),
    [
        ("Remember that I sign my emails as Alice", engine_pb2.APPROVAL_DECISION_ACCEPTED),
        ("Souviens-toi que je signe mes courriels « Alice »", engine_pb2.APPROVAL_DECISION_REFUSED),
    ],
)
async def test_the_decision_settles_the_waiting_run(sb: System, text: str, decision: int) -> None:
    run_id, proposal_id = await remember(sb, text)
    proposal = await sb.pages.GetProposal(
        pages_service_pb2.GetProposalRequest(proposal_id=proposal_id), **ALICE
    )
    assert proposal.proposal.run_id == run_id  # the proposal names the run waiting on it
    run = await decide(sb, run_id, decision)
    assert run.status == engine_pb2.RUN_STATUS_DONE and run.approval == decision
    again = await decide(sb, run_id, decision)  # a retry changes nothing
    assert again.status == engine_pb2.RUN_STATUS_DONE and again.approval == decision
    other = (
        engine_pb2.APPROVAL_DECISION_REFUSED
        if decision == engine_pb2.APPROVAL_DECISION_ACCEPTED
        else engine_pb2.APPROVAL_DECISION_ACCEPTED
    )
    request = engine_service_pb2.RecordApprovalDecisionRequest(run_id=run_id, decision=other)  # type: ignore[arg-type]
    await expect_error(
        sb.engine.RecordApprovalDecision(request, **ALICE),
        grpc.StatusCode.FAILED_PRECONDITION,
        "ERROR_REASON_FAILED_PRECONDITION",
    )


async def test_bad_decisions_are_refused_and_foreign_runs_look_missing(sb: System) -> None:
    run_id, _ = await remember(sb, "Remember that my team is called Atlas")
    await expect_error(
        sb.engine.RecordApprovalDecision(
            engine_service_pb2.RecordApprovalDecisionRequest(run_id=run_id), **ALICE
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    request = engine_service_pb2.RecordApprovalDecisionRequest(
        run_id=run_id, decision=engine_pb2.APPROVAL_DECISION_ACCEPTED
    )
    await expect_error(
        sb.engine.RecordApprovalDecision(request, **as_user("bob")),
        grpc.StatusCode.NOT_FOUND,
        "ERROR_REASON_NOT_FOUND",
    )
    # A run that never waited cannot be approved.
    chat = await sb.threads.CreateConversation(threads_service_pb2.CreateConversationRequest(), **ALICE)
    events = await collect(
        sb.engine.StartRun(
            engine_service_pb2.StartRunRequest(conversation_id=chat.conversation.id, message="Hello"),
            metadata=ALICE["metadata"],
            timeout=30,
        )
    )
    done = engine_service_pb2.RecordApprovalDecisionRequest(
        run_id=events[0].run_id, decision=engine_pb2.APPROVAL_DECISION_ACCEPTED
    )
    await expect_error(
        sb.engine.RecordApprovalDecision(done, **ALICE),
        grpc.StatusCode.FAILED_PRECONDITION,
        "ERROR_REASON_FAILED_PRECONDITION",
    )
