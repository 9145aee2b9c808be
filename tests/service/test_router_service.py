"""The router service in-process, called through its real stub."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import grpc
import pytest

from services.router.server import build_server
from services.router.settings import RouterSettings
from services.shared.errors import error_info
from switchboard.router.v1 import router_pb2, router_service_pb2_grpc
from switchboard.router.v1 import router_service_pb2 as pb
from tests.service.harness import expect_error, running

Stub = router_service_pb2_grpc.RouterServiceStub
AUTO_SKILLS = {"meeting-notes-to-actions", "weekly-status-report", "email-reply-draft"}
BUILTINS = {"translate", "summarize"}
T = {"timeout": 10}


@pytest.fixture
async def stub(db_url: str) -> AsyncIterator[Stub]:
    async with running(build_server, RouterSettings(port=0, database_url=db_url)) as (_, channel):
        yield Stub(channel)


async def test_list_skills_is_paginated_by_name(stub: Stub) -> None:
    first = await stub.ListSkills(pb.ListSkillsRequest(page_size=2), **T)
    assert len(first.skills) == 2 and first.next_page_token
    second = await stub.ListSkills(pb.ListSkillsRequest(page_size=2, page_token=first.next_page_token), **T)
    third = await stub.ListSkills(pb.ListSkillsRequest(page_size=2, page_token=second.next_page_token), **T)
    assert not third.next_page_token
    names = [s.name for page in (first, second, third) for s in page.skills]
    assert names == sorted(AUTO_SKILLS | BUILTINS)
    everything = await stub.ListSkills(pb.ListSkillsRequest(), **T)
    by_name = {s.name: s for s in everything.skills}
    assert [s.name for s in everything.skills] == names and not everything.next_page_token
    assert by_name["translate"].builtin and not by_name["email-reply-draft"].builtin
    assert all(s.id and s.description and s.body for s in everything.skills)
    await expect_error(
        stub.ListSkills(pb.ListSkillsRequest(page_token="%%%"), **T),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    await expect_error(
        stub.ListSkills(pb.ListSkillsRequest(page_size=-1), **T),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )


async def test_forced_skills_short_circuit_the_router(stub: Stub) -> None:
    # The text clearly matches another skill: forcing wins, nothing is scored.
    response = await stub.RouteSkills(
        pb.RouteSkillsRequest(
            text="Turn these meeting notes into action items with owners",
            forced_skills=["/translate", "weekly-status-report", "translate"],
        ),
        **T,
    )
    assert [(s.name, s.forced) for s in response.skills] == [
        ("translate", True),
        ("weekly-status-report", True),
    ]
    assert all(s.body and s.skill_id for s in response.skills)
    decision = response.decision
    assert decision.branch == router_pb2.ROUTE_BRANCH_FORCED
    assert list(decision.candidates) == [] and decision.arbiter == ""
    assert (decision.high_threshold, decision.low_threshold) == (0.6, 0.3)


async def test_unknown_forced_skill_is_not_found_with_its_name(stub: Stub) -> None:
    error = await expect_error(
        stub.RouteSkills(pb.RouteSkillsRequest(text="hi", forced_skills=["translate", "no-such-skill"]), **T),
        grpc.StatusCode.NOT_FOUND,
        "ERROR_REASON_NOT_FOUND",
    )
    info = error_info(error)
    assert info is not None and info.metadata["skill"] == "no-such-skill"
    assert "no-such-skill" in (error.details() or "")


async def test_clear_match_is_high_with_that_skill_and_a_complete_record(stub: Stub) -> None:
    response = await stub.RouteSkills(
        pb.RouteSkillsRequest(text="Transforme le compte rendu de la REUNION en actions", offline=True), **T
    )
    assert [(s.name, s.forced) for s in response.skills] == [("meeting-notes-to-actions", False)]
    assert "action item" in response.skills[0].body
    decision = response.decision
    assert decision.branch == router_pb2.ROUTE_BRANCH_HIGH
    assert (decision.high_threshold, decision.low_threshold) == (0.6, 0.3)
    # Every automatic candidate is recorded with its scores, best first.
    assert {c.name for c in decision.candidates} == AUTO_SKILLS
    top = decision.candidates[0]
    assert top.name == "meeting-notes-to-actions" and top.skill_id == response.skills[0].skill_id
    assert top.lexical_score >= 0.6 and top.fused_score == top.lexical_score and top.embedding_score == 0.0
    fused = [c.fused_score for c in decision.candidates]
    assert fused == sorted(fused, reverse=True) and fused[1] < 0.3


async def test_unrelated_request_routes_to_none(stub: Stub) -> None:
    response = await stub.RouteSkills(pb.RouteSkillsRequest(text="What is the capital of Australia?"), **T)
    assert list(response.skills) == []
    assert response.decision.branch == router_pb2.ROUTE_BRANCH_NONE
    assert {c.name for c in response.decision.candidates} == AUTO_SKILLS
    assert all(c.fused_score < 0.3 for c in response.decision.candidates)


async def test_empty_text_is_none_without_error(stub: Stub) -> None:
    response = await stub.RouteSkills(pb.RouteSkillsRequest(text=""), **T)
    assert list(response.skills) == [] and response.decision.branch == router_pb2.ROUTE_BRANCH_NONE
    assert response.decision.high_threshold == 0.6


async def test_grey_zone_is_decided_deterministically(stub: Stub) -> None:
    response = await stub.RouteSkills(pb.RouteSkillsRequest(text="Prepare action items for the project"), **T)
    decision = response.decision
    assert decision.branch == router_pb2.ROUTE_BRANCH_GREY_DETERMINISTIC
    assert decision.arbiter == "deterministic" and decision.arbiter_answer.startswith("none")
    assert list(response.skills) == []  # below the midpoint: nothing applied


async def test_builtins_are_never_chosen_automatically(stub: Stub) -> None:
    for text in ["Translate this text into another language", "Summarize this document into key points"]:
        response = await stub.RouteSkills(pb.RouteSkillsRequest(text=text), **T)
        assert not {s.name for s in response.skills} & BUILTINS
        assert not {c.name for c in response.decision.candidates} & BUILTINS
        assert response.decision.branch == router_pb2.ROUTE_BRANCH_NONE


async def test_at_most_max_auto_skills_are_applied(db_url: str) -> None:
    # Thresholds low enough that all three workspace skills clear the high one.
    settings = RouterSettings(port=0, database_url=db_url, high_threshold=0.05, low_threshold=0.01)
    text = "Draft a reply email with the weekly status report and the meeting action items"
    async with running(build_server, settings) as (_, channel):
        response = await Stub(channel).RouteSkills(pb.RouteSkillsRequest(text=text), **T)
    decision = response.decision
    assert decision.branch == router_pb2.ROUTE_BRANCH_HIGH
    assert all(c.fused_score >= 0.05 for c in decision.candidates) and len(decision.candidates) == 3
    assert [s.name for s in response.skills] == [c.name for c in decision.candidates[:2]]
    assert not any(s.forced for s in response.skills)


async def test_too_large_text_is_refused(stub: Stub) -> None:
    await expect_error(
        stub.RouteSkills(pb.RouteSkillsRequest(text="x" * 32_001), **T),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_TOO_LARGE",
    )
    await expect_error(
        stub.RouteModel(pb.RouteModelRequest(text="x" * 32_001), **T),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_TOO_LARGE",
    )


async def test_route_model_over_the_wire(stub: Stub) -> None:
    short = await stub.RouteModel(
        pb.RouteModelRequest(text="What time is it in Tokyo?", requested_model="auto"), **T
    )
    assert short.routed and short.model.id == "offline-fast"
    assert short.model.profile == router_pb2.MODEL_PROFILE_FAST and short.model.provider == "offline"
    assert short.model.model == "switchboard-offline-fast" and "short factual" in short.reason
    multi = await stub.RouteModel(
        pb.RouteModelRequest(
            text="Collect the figures, then compare them and write a memo.", requested_model="Auto"
        ),
        **T,
    )
    assert multi.routed and multi.model.id == "offline-strong" and "multi-step" in multi.reason
    manual = await stub.RouteModel(
        pb.RouteModelRequest(text="Collect the figures, then compare them.", requested_model="offline-fast"),
        **T,
    )
    assert not manual.routed and manual.model.id == "offline-fast" and "manual" in manual.reason
    by_default = await stub.RouteModel(pb.RouteModelRequest(text="hi", default_model="offline-balanced"), **T)
    assert not by_default.routed and by_default.model.profile == router_pb2.MODEL_PROFILE_BALANCED
    error = await expect_error(
        stub.RouteModel(pb.RouteModelRequest(text="hi", requested_model="gpt-9"), **T),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    info = error_info(error)
    assert info is not None and info.metadata["model"] == "gpt-9" and "gpt-9" in (error.details() or "")


async def test_route_model_uses_the_configured_models(db_url: str) -> None:
    models = [
        {"id": "big", "provider": "acme", "model": "acme-xl", "profile": "strong", "expensive": True},
        {"id": "web", "provider": "acme", "model": "acme-web", "profile": "fast", "web_only": True},
        {"id": "mid", "provider": "acme", "model": "acme-m", "profile": "balanced"},
    ]
    settings = RouterSettings(port=0, database_url=db_url, models_json=json.dumps(models))
    async with running(build_server, settings) as (_, channel):
        stub = Stub(channel)
        short = await stub.RouteModel(pb.RouteModelRequest(text="Capital of Peru?"), **T)
        strong = await stub.RouteModel(
            pb.RouteModelRequest(text="Step 1: gather data. Step 2: analyse it."), **T
        )
        chosen_web = await stub.RouteModel(pb.RouteModelRequest(text="news?", requested_model="web"), **T)
    assert short.model.id == "mid" and short.routed  # neither web_only nor expensive
    assert strong.model.id == "big" and strong.model.expensive
    assert chosen_web.model.id == "web" and chosen_web.model.web_only and not chosen_web.routed
