"""The grey-zone arbiter over a configured model, proven on the wire: a
recording OpenAI-compatible or Anthropic server receives one closed question
(the request and the grey candidates with their descriptions) and answers
with a name or "none"; the decision record keeps the raw answer. An error, a
timeout or an answer naming no candidate falls back; offline never asks."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from services.router.arbiter import SYSTEM, question
from services.router.server import build_server
from services.router.settings import RouterSettings
from switchboard.router.v1 import router_pb2, router_service_pb2_grpc
from switchboard.router.v1 import router_service_pb2 as pb
from tests.fakes.llm_server import FakeServer
from tests.service.harness import as_user, running

ALICE = as_user("alice")
# Everything with a score is grey: the arbiter decides.
GREY = {"high_threshold": 0.99, "low_threshold": 0.0001}
REQUESTS = {
    "en": "Write down the action items of this morning's meeting",
    "fr": "Rédige les actions à mener de la réunion de ce matin",
}
JUSTIFICATIONS = {
    "en": "The request asks for the action items of a meeting.",
    "fr": "La demande porte sur les actions à mener d'une réunion.",
}


# The arbiter's deadline: generous, so that a loaded machine never turns an
# answer into a fallback; the slow-arbiter test asks for a short one.
ARBITER_TIMEOUT = 10.0
SHORT_TIMEOUT = 0.5


@pytest.fixture
async def stub(
    db_url: str, fake: tuple[str, FakeServer], request: pytest.FixtureRequest
) -> AsyncIterator[Any]:
    kind, server = fake
    base = f"{server.url}/v1" if kind == "openai" else server.url
    model = {"kind": kind, "base_url": base, "model": "arbiter-x"}
    settings = RouterSettings(
        port=0, database_url=db_url, embedder="hashing", arbiter_model_json=json.dumps(model),  # type: ignore[arg-type]
        arbiter_timeout=getattr(request, "param", ARBITER_TIMEOUT), **GREY,
    )  # fmt: skip
    async with running(build_server, settings) as (_, channel):
        yield kind, router_service_pb2_grpc.RouterServiceStub(channel), server


def messages(kind: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    if kind == "anthropic":
        return [("system", body["system"])] + [(m["role"], m["content"]) for m in body["messages"]]
    return [(m["role"], m["content"]) for m in body["messages"]]


async def descriptions(stub: Any) -> dict[str, str]:
    listed = await stub.ListSkills(pb.ListSkillsRequest(page_size=100), **ALICE)
    return {skill.name: skill.description for skill in listed.skills}


@pytest.mark.parametrize("language", ["en", "fr"])
async def test_the_arbiter_gets_a_closed_question_and_its_choice_is_applied(stub: Any, language: str) -> None:
    kind, router, server = stub
    reason = JUSTIFICATIONS[language]
    server.script.steps = [f"say:meeting-notes-to-actions\n{reason}"]
    response = await router.RouteSkills(pb.RouteSkillsRequest(text=REQUESTS[language]), **ALICE)
    decision = response.decision
    grey = [c.name for c in decision.candidates][:3]
    known = await descriptions(router)
    received = messages(kind, server.script.requests[0])
    assert received == [
        ("system", SYSTEM),
        ("user", question(REQUESTS[language], [(name, known[name]) for name in grey])),
    ]
    # The record keeps what the model received, word for word, and its reason.
    assert [("system", decision.arbiter_instructions), ("user", decision.arbiter_question)] == received
    assert decision.arbiter_justification == reason
    assert server.script.requests[0]["model"] == "arbiter-x"
    assert "meeting-notes-to-actions" in grey
    assert decision.branch == router_pb2.ROUTE_BRANCH_GREY_LLM
    assert (
        decision.arbiter == f"model:{kind}/arbiter-x"
        and decision.arbiter_answer == f"meeting-notes-to-actions\n{reason}"
    )
    assert [s.name for s in response.skills] == ["meeting-notes-to-actions"]


@pytest.mark.parametrize(
    "answer", ["say:none", "say:I think the meeting one, probably.", "say:invoice-writer-that-does-not-exist"]
)
async def test_an_answer_naming_no_candidate_applies_no_skill_and_is_kept_raw(stub: Any, answer: str) -> None:
    _, router, server = stub
    server.script.steps = [answer]
    response = await router.RouteSkills(pb.RouteSkillsRequest(text=REQUESTS["fr"]), **ALICE)
    assert response.decision.branch == router_pb2.ROUTE_BRANCH_GREY_LLM and list(response.skills) == []
    assert response.decision.arbiter_answer == answer.removeprefix("say:")
    assert response.decision.arbiter_justification == ""  # one line: no reason given


@pytest.mark.parametrize("stub", [SHORT_TIMEOUT], indirect=True, ids=["short-deadline"])
@pytest.mark.parametrize("failure", ["status:500", "slow:2"])
async def test_a_failing_or_slow_arbiter_falls_back_to_the_deterministic_branch(
    stub: Any, failure: str
) -> None:
    kind, router, server = stub
    server.script.steps = [failure]
    response = await router.RouteSkills(pb.RouteSkillsRequest(text=REQUESTS["en"]), **ALICE)
    decision = response.decision
    assert decision.branch == router_pb2.ROUTE_BRANCH_GREY_DETERMINISTIC
    assert decision.arbiter_answer.startswith(f"arbiter model:{kind}/arbiter-x failed")
    assert decision.arbiter_error.startswith(f"arbiter model:{kind}/arbiter-x failed")
    assert "decided at the midpoint" in decision.explanation
    # The question was asked: the record keeps it, as the model received it.
    assert messages(kind, server.script.requests[0]) == [
        ("system", decision.arbiter_instructions),
        ("user", decision.arbiter_question),
    ]
    assert decision.arbiter_justification == ""


async def test_offline_requests_never_reach_the_arbiter(stub: Any) -> None:
    _, router, server = stub
    response = await router.RouteSkills(pb.RouteSkillsRequest(text=REQUESTS["fr"], offline=True), **ALICE)
    assert server.script.requests == [] and response.decision.arbiter == "deterministic"
    assert response.decision.arbiter_question == response.decision.arbiter_instructions == ""


def test_a_bad_arbiter_model_is_refused_at_start_up_naming_the_field() -> None:
    with pytest.raises(ValueError, match="arbiter_model_json") as raised:
        RouterSettings(arbiter_model_json='{"kind": "openai", "base_url": "http://x", "modle": "y"}')
    assert "model" in str(raised.value)
