"""The router service in-process, called through its real stub (hashing
embedder, shipped thresholds), on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Sequence

import grpc
import pytest
from google.protobuf.field_mask_pb2 import FieldMask

from services.router.catalog import BUILTINS, PRESETS
from services.router.server import build_server
from services.router.settings import RouterSettings
from services.router.skill_router import ArbiterPrompt
from services.shared.errors import error_info
from switchboard.router.v1 import router_pb2, router_service_pb2_grpc
from switchboard.router.v1 import router_service_pb2 as pb
from tests.service.harness import as_admin, as_user, expect_error, running

Stub = router_service_pb2_grpc.RouterServiceStub
PRESET_NAMES = {s["name"] for s in PRESETS}
BUILTIN_NAMES = {s["name"] for s in BUILTINS}
ALICE, BOB = as_user("alice"), as_user("bob")
ADMIN = as_admin("alice")  # catalog writes are for admins
SHIPPED = RouterSettings()
HIGH, LOW = SHIPPED.high_threshold, SHIPPED.low_threshold
GREY_TEXT = "Write down the action items"  # grey with hashing: best meeting-notes, below the midpoint


def settings(db_url: str, **overrides: object) -> RouterSettings:
    return RouterSettings(port=0, database_url=db_url, embedder="hashing", **overrides)  # type: ignore[arg-type]


@pytest.fixture
def stub(router_channel: grpc.aio.Channel) -> Stub:
    return Stub(router_channel)


class ScriptedArbiter:
    name = "test-arbiter"

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked: list[list[str]] = []

    def prompt(self, request: str, candidates: Sequence[tuple[str, str]]) -> ArbiterPrompt:
        self.asked.append([name for name, _ in candidates])
        return ArbiterPrompt("pick one", request)

    async def arbitrate(self, prompt: ArbiterPrompt) -> str:
        return self.answer


async def route(
    stub: Stub, text: str, user: dict[str, object] = ALICE, **fields: object
) -> pb.RouteSkillsResponse:
    return await stub.RouteSkills(pb.RouteSkillsRequest(text=text, **fields), **user)  # type: ignore[arg-type]


async def test_list_skills_is_the_catalog_paginated_by_name_with_the_callers_view(stub: Stub) -> None:
    names: list[str] = []
    token = ""
    while True:
        page = await stub.ListSkills(pb.ListSkillsRequest(page_size=10, page_token=token), **ALICE)
        names += [s.name for s in page.skills]
        token = page.next_page_token
        if not token:
            break
    assert names == sorted(PRESET_NAMES | BUILTIN_NAMES) and len(names) == 23
    everything = {s.name: s for s in (await stub.ListSkills(pb.ListSkillsRequest(), **ALICE)).skills}
    assert everything["translate"].builtin and not everything["email-reply-draft"].builtin
    assert all(s.enabled and s.effective_auto_use and s.create_time.seconds for s in everything.values())
    await expect_error(
        stub.ListSkills(pb.ListSkillsRequest(page_token="%%%"), **ALICE),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    await expect_error(
        stub.ListSkills(pb.ListSkillsRequest(), timeout=10),
        grpc.StatusCode.UNAUTHENTICATED,
        "ERROR_REASON_UNAUTHENTICATED",
    )


async def test_forced_skills_short_circuit_the_router_and_are_never_dropped(stub: Stub) -> None:
    # alice disabled translate: forcing it is asking for it all the same.
    translate = (await stub.GetSkill(pb.GetSkillRequest(skill="translate"), **ALICE)).skill
    await stub.SetSkillEnablement(pb.SetSkillEnablementRequest(skill_id=translate.id, enabled=False), **ALICE)
    response = await route(
        stub,
        "Turn these meeting notes into action items with owners",
        forced_skills=["/translate", "weekly-status-report", "Translate"],
    )
    assert [(s.name, s.forced) for s in response.skills] == [
        ("translate", True),
        ("weekly-status-report", True),
    ]
    assert all(s.body and s.skill_id for s in response.skills)
    decision = response.decision
    assert decision.branch == router_pb2.ROUTE_BRANCH_FORCED and list(decision.candidates) == []
    assert "forced" in decision.explanation and decision.high_threshold == HIGH
    # Forced skills need no text.
    assert (await route(stub, "", forced_skills=["summarize"])).skills[0].name == "summarize"


async def test_unknown_forced_skill_is_not_found_with_its_name(stub: Stub) -> None:
    error = await expect_error(
        route(stub, "hi", forced_skills=["translate", "no-such-skill"]),
        grpc.StatusCode.NOT_FOUND,
        "ERROR_REASON_NOT_FOUND",
    )
    info = error_info(error)
    assert info is not None and info.metadata["skill"] == "no-such-skill"


async def test_clear_match_is_high_with_a_complete_decision_record(stub: Stub) -> None:
    response = await route(stub, "Transforme le compte rendu de la REUNION en actions", offline=True)
    assert [(s.name, s.forced) for s in response.skills] == [("meeting-notes-to-actions", False)]
    assert "action item" in response.skills[0].body
    d = response.decision
    assert d.branch == router_pb2.ROUTE_BRANCH_HIGH and (d.high_threshold, d.low_threshold) == (HIGH, LOW)
    assert d.embedder == "hashing" and d.max_auto_skills == 2 and not d.arbitration_allowed
    assert d.excluded_count == len(BUILTINS) and ">= high" in d.explanation
    top = d.candidates[0]
    assert top.name == "meeting-notes-to-actions" and top.skill_id == response.skills[0].skill_id
    assert top.lexical_score > 0 and top.embedding_score > 0 and top.fused_score >= HIGH
    assert top.lexical_rank == 1 and top.embedding_rank == 1
    assert 1 < len(d.candidates) <= 8 and not {c.name for c in d.candidates} & BUILTIN_NAMES
    fused = [c.fused_score for c in d.candidates]
    assert fused == sorted(fused, reverse=True)


async def test_unrelated_request_routes_to_none_and_builtins_are_never_chosen(stub: Stub) -> None:
    response = await route(stub, "What is the capital of Australia?")
    assert list(response.skills) == [] and response.decision.branch == router_pb2.ROUTE_BRANCH_NONE
    assert all(c.fused_score < LOW for c in response.decision.candidates)
    for text in ["Translate this text into another language", "Summarize this document into key points"]:
        response = await route(stub, text)
        assert not {s.name for s in response.skills} & BUILTIN_NAMES
        assert not {c.name for c in response.decision.candidates} & BUILTIN_NAMES


async def test_bad_requests_are_refused_with_reasons(stub: Stub) -> None:
    for text in ["", "   "]:
        await expect_error(
            route(stub, text), grpc.StatusCode.INVALID_ARGUMENT, "ERROR_REASON_INVALID_ARGUMENT"
        )
    await expect_error(route(stub, "x" * 32_001), grpc.StatusCode.INVALID_ARGUMENT, "ERROR_REASON_TOO_LARGE")
    await expect_error(
        stub.RouteModel(pb.RouteModelRequest(text="x" * 32_001), **ALICE),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_TOO_LARGE",
    )
    await expect_error(
        stub.RouteModel(pb.RouteModelRequest(text=" ", requested_model="auto"), **ALICE),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    await expect_error(
        route(stub, "hi", user={"timeout": 10}),
        grpc.StatusCode.UNAUTHENTICATED,
        "ERROR_REASON_UNAUTHENTICATED",
    )


async def test_grey_zone_goes_to_the_arbiter_unless_offline_or_disabled(db_url: str) -> None:
    arbiter = ScriptedArbiter("meeting-notes-to-actions\nThe user wants the actions of a meeting.")
    async with running(lambda s: build_server(s, arbiter), settings(db_url)) as (_, channel):
        stub = Stub(channel)
        online = await route(stub, GREY_TEXT)
        offline = await route(stub, GREY_TEXT, offline=True)
    d = online.decision
    assert (
        d.branch == router_pb2.ROUTE_BRANCH_GREY_LLM and d.arbiter == "test-arbiter" and d.arbitration_allowed
    )
    assert d.arbiter_answer.startswith("meeting-notes-to-actions\nThe user")
    assert [s.name for s in online.skills] == ["meeting-notes-to-actions"]
    assert arbiter.asked and arbiter.asked[0][0] == "meeting-notes-to-actions" and len(arbiter.asked) == 1
    assert offline.decision.branch == router_pb2.ROUTE_BRANCH_GREY_DETERMINISTIC
    assert offline.decision.arbiter == "deterministic" and list(offline.skills) == []  # below the midpoint
    async with running(lambda s: build_server(s, arbiter), settings(db_url, arbitration_enabled=False)) as (
        _,
        channel,
    ):
        disabled = await route(Stub(channel), GREY_TEXT)
    assert disabled.decision.branch == router_pb2.ROUTE_BRANCH_GREY_DETERMINISTIC and len(arbiter.asked) == 1
    assert "not allowed" in disabled.decision.explanation


async def test_without_an_arbiter_the_grey_zone_is_deterministic_and_says_why(stub: Stub) -> None:
    d = (await route(stub, GREY_TEXT)).decision
    assert d.branch == router_pb2.ROUTE_BRANCH_GREY_DETERMINISTIC and d.arbitration_allowed
    assert "no arbiter configured" in d.explanation and d.arbiter_answer.startswith("none")


@pytest.mark.parametrize(
    ("text", "instruction", "task", "expected"),
    [
        (
            "Translate this paragraph into French: The deploy is on Tuesday.",
            "Translate this paragraph into French",
            "translate",
            [],
        ),
        (
            "Corrige l'orthographe : le rapport d'avancement hebdomadaire est en retard.",
            "Corrige l'orthographe",
            "fix-spelling-grammar",
            [],
        ),
        ("Summarize the weekly status report of the Atlas project", "", "summarize", []),
        (
            "Draft a reply to this email: the weekly status report is late, send it by Friday",
            "Draft a reply to this email",
            "",
            ["email-reply-draft"],
        ),
        (
            "Rédige une réponse à ce courriel : le point d'avancement hebdomadaire est en retard",
            "Rédige une réponse à ce courriel",
            "",
            ["email-reply-draft"],
        ),
    ],
)
async def test_skills_are_matched_on_what_a_request_asks_not_on_the_text_it_carries(
    stub: Stub, text: str, instruction: str, task: str, expected: list[str]
) -> None:
    """The text a request carries (after its instruction's colon) mentions
    weekly-status-report's topic; a request for a built-in task gets no
    skill, a reply gets the reply skill only, and the record says why."""
    response = await route(stub, text)
    d = response.decision
    assert [s.name for s in response.skills] == expected, d.explanation
    assert (d.builtin_task, d.matched_text) == (task, instruction)
    if task:
        assert d.branch == router_pb2.ROUTE_BRANCH_NONE and f"built-in task {task}" in d.explanation
    if instruction:
        assert d.explanation.startswith("matched on the instruction, not on the")


async def test_at_most_two_automatic_skills(db_url: str) -> None:
    text = "Draft a reply email with the weekly status report and the meeting action items"
    async with running(build_server, settings(db_url, high_threshold=0.05, low_threshold=0.01)) as (
        _,
        channel,
    ):
        response = await route(Stub(channel), text)
    d = response.decision
    assert d.branch == router_pb2.ROUTE_BRANCH_HIGH and sum(c.fused_score >= 0.05 for c in d.candidates) > 2
    assert [s.name for s in response.skills] == [c.name for c in d.candidates[:2]]


async def test_enablement_and_auto_use_override_are_per_user(stub: Stub) -> None:
    text = "Draft a reply to this email from Marc"
    skill = (await stub.GetSkill(pb.GetSkillRequest(skill="email-reply-draft"), **ALICE)).skill
    off = await stub.SetSkillEnablement(
        pb.SetSkillEnablementRequest(skill_id=skill.id, enabled=True, auto_use=pb.AUTO_USE_OVERRIDE_OFF),
        **ALICE,
    )
    assert off.skill.enabled and off.skill.auto_use and not off.skill.effective_auto_use
    alice, bob = await route(stub, text), await route(stub, text, BOB)
    assert "email-reply-draft" not in {c.name for c in alice.decision.candidates}
    assert alice.decision.excluded_count == len(BUILTINS) + 1
    assert [s.name for s in bob.skills] == ["email-reply-draft"]
    # Disabling keeps the override; inheriting it back and enabling restores everything.
    disabled = await stub.SetSkillEnablement(
        pb.SetSkillEnablementRequest(skill_id=skill.id, enabled=False), **ALICE
    )
    assert not disabled.skill.enabled and not disabled.skill.effective_auto_use
    back = await stub.SetSkillEnablement(
        pb.SetSkillEnablementRequest(skill_id=skill.id, enabled=True, auto_use=pb.AUTO_USE_OVERRIDE_INHERIT),
        **ALICE,
    )
    assert back.skill.enabled and back.skill.effective_auto_use
    assert [s.name for s in (await route(stub, text)).skills] == ["email-reply-draft"]
    bob_view = (await stub.GetSkill(pb.GetSkillRequest(skill=skill.id), **BOB)).skill
    assert bob_view.enabled and bob_view.effective_auto_use
    await expect_error(
        stub.SetSkillEnablement(pb.SetSkillEnablementRequest(skill_id="nope", enabled=True), **ALICE),
        grpc.StatusCode.NOT_FOUND,
        "ERROR_REASON_NOT_FOUND",
    )


async def test_catalog_crud_reindexes_the_description(stub: Stub) -> None:
    text = "fill in my expense report for the Lyon trip"
    assert (await route(stub, text)).decision.branch == router_pb2.ROUTE_BRANCH_NONE
    new = pb.CreateSkillRequest(
        request_id="r-1",
        skill=router_pb2.Skill(
            name="expense-report",
            description="Fill in an expense report for a business trip: receipts and amounts. Note de frais.",
            body="List each expense with date, amount, category.",
            auto_use=True,
        ),
    )
    created = (await stub.CreateSkill(new, **ADMIN)).skill
    assert created.id and not created.builtin and created.effective_auto_use
    again = (await stub.CreateSkill(new, **ADMIN)).skill
    assert again.id == created.id  # idempotent on request_id
    await expect_error(
        stub.CreateSkill(pb.CreateSkillRequest(request_id="r-2", skill=new.skill), **ADMIN),
        grpc.StatusCode.FAILED_PRECONDITION,
        "ERROR_REASON_FAILED_PRECONDITION",
    )
    for bad in (router_pb2.Skill(name="Bad Name", body="x"), router_pb2.Skill(name="ok-name", body=" ")):
        await expect_error(
            stub.CreateSkill(pb.CreateSkillRequest(skill=bad), **ADMIN),
            grpc.StatusCode.INVALID_ARGUMENT,
            "ERROR_REASON_INVALID_ARGUMENT",
        )
    assert [s.name for s in (await route(stub, text)).skills] == ["expense-report"]
    # A new name and description are indexed at once: the old wording no longer matches.
    updated = await stub.UpdateSkill(
        pb.UpdateSkillRequest(
            skill=router_pb2.Skill(
                id=created.id, name="wedding-seating", description="Plan the seating of a wedding banquet."
            ),
            update_mask=FieldMask(paths=["name", "description"]),
        ),
        **ADMIN,
    )
    assert updated.skill.description.startswith("Plan the seating") and updated.skill.body == created.body
    assert list((await route(stub, text)).skills) == []
    seating = await route(stub, "seating plan for the wedding banquet")
    assert [s.name for s in seating.skills] == ["wedding-seating"]
    await expect_error(
        stub.UpdateSkill(pb.UpdateSkillRequest(skill=router_pb2.Skill(id=created.id)), **ADMIN),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    translate = (await stub.GetSkill(pb.GetSkillRequest(skill="translate"), **ALICE)).skill
    for call in (
        stub.UpdateSkill(
            pb.UpdateSkillRequest(
                skill=router_pb2.Skill(id=translate.id, body="x"), update_mask=FieldMask(paths=["body"])
            ),
            **ADMIN,
        ),
        stub.DeleteSkill(pb.DeleteSkillRequest(skill_id=translate.id), **ADMIN),
    ):
        await expect_error(call, grpc.StatusCode.FAILED_PRECONDITION, "ERROR_REASON_FAILED_PRECONDITION")
    await stub.DeleteSkill(pb.DeleteSkillRequest(skill_id=created.id), **ADMIN)
    for call in (
        stub.GetSkill(pb.GetSkillRequest(skill=created.id), **ALICE),
        stub.DeleteSkill(pb.DeleteSkillRequest(skill_id=created.id), **ADMIN),
        route(stub, "x", forced_skills=["wedding-seating"]),
    ):
        await expect_error(call, grpc.StatusCode.NOT_FOUND, "ERROR_REASON_NOT_FOUND")


async def test_two_replicas_on_one_database_stay_coherent(db_url: str) -> None:
    text = "fill in my expense report for the Lyon trip"
    async with (
        running(build_server, settings(db_url)) as (_, channel_a),
        running(build_server, settings(db_url)) as (_, channel_b),
    ):
        a, b = Stub(channel_a), Stub(channel_b)
        assert (await route(b, text)).decision.branch == router_pb2.ROUTE_BRANCH_NONE  # b's index is built
        skill = router_pb2.Skill(
            name="expense-report",
            description="Fill in an expense report for a business trip.",
            body="List them.",
        )
        skill.auto_use = True
        created = (await a.CreateSkill(pb.CreateSkillRequest(skill=skill), **ADMIN)).skill
        assert [s.name for s in (await route(b, text)).skills] == ["expense-report"]
        await a.DeleteSkill(pb.DeleteSkillRequest(skill_id=created.id), **ADMIN)
        assert list((await route(b, text)).skills) == []


async def test_not_relevant_feedback_is_recorded_listed_and_offers_turning_auto_use_off(stub: Stub) -> None:
    skill = (await stub.GetSkill(pb.GetSkillRequest(skill="email-reply-draft"), **ALICE)).skill
    request = pb.CreateSkillFeedbackRequest(
        request_id="f-1",
        skill_id=skill.id,
        request_text="Answer Marc's questions about the budget",
        run_id="run-7",
    )
    first = await stub.CreateSkillFeedback(request, **ALICE)
    assert first.offer_disable_auto_use and first.feedback.skill_name == "email-reply-draft"
    assert first.feedback.run_id == "run-7" and first.feedback.create_time.seconds
    assert (await stub.CreateSkillFeedback(request, **ALICE)).feedback.id == first.feedback.id
    await stub.SetSkillEnablement(
        pb.SetSkillEnablementRequest(skill_id=skill.id, enabled=True, auto_use=pb.AUTO_USE_OVERRIDE_OFF),
        **ALICE,
    )
    second = await stub.CreateSkillFeedback(
        pb.CreateSkillFeedbackRequest(request_id="f-2", skill_id=skill.id, request_text="Reply later"),
        **ALICE,
    )
    assert not second.offer_disable_auto_use  # already off for alice
    page1 = await stub.ListSkillFeedback(pb.ListSkillFeedbackRequest(page_size=1), **ALICE)
    page2 = await stub.ListSkillFeedback(
        pb.ListSkillFeedbackRequest(page_size=1, page_token=page1.next_page_token), **ALICE
    )
    assert [f.id for f in (*page1.feedback, *page2.feedback)] == [second.feedback.id, first.feedback.id]
    assert not page2.next_page_token
    assert list((await stub.ListSkillFeedback(pb.ListSkillFeedbackRequest(), **BOB)).feedback) == []
    for bad, code, reason in (
        (
            pb.CreateSkillFeedbackRequest(skill_id="nope", request_text="x"),
            grpc.StatusCode.NOT_FOUND,
            "ERROR_REASON_NOT_FOUND",
        ),
        (
            pb.CreateSkillFeedbackRequest(skill_id=skill.id),
            grpc.StatusCode.INVALID_ARGUMENT,
            "ERROR_REASON_INVALID_ARGUMENT",
        ),
    ):
        await expect_error(stub.CreateSkillFeedback(bad, **ALICE), code, reason)


async def test_route_model_over_the_wire(stub: Stub) -> None:
    short = await stub.RouteModel(
        pb.RouteModelRequest(text="What time is it in Tokyo?", requested_model="auto"), **ALICE
    )
    assert short.routed and short.model.id == "offline-fast" and "short factual" in short.reason
    assert short.request_profile == router_pb2.MODEL_PROFILE_FAST and not short.web_only
    multi = await stub.RouteModel(
        pb.RouteModelRequest(text="Collect the figures, then compare them and write a memo.", offline=True),
        **ALICE,
    )
    assert (
        multi.routed
        and multi.model.id == "offline-strong"
        and multi.request_profile == router_pb2.MODEL_PROFILE_STRONG
    )
    manual = await stub.RouteModel(
        pb.RouteModelRequest(text="Collect the figures, then compare them.", requested_model="offline-fast"),
        **ALICE,
    )
    assert not manual.routed and manual.model.id == "offline-fast" and "manual" in manual.reason
    assert manual.request_profile == router_pb2.MODEL_PROFILE_UNSPECIFIED
    error = await expect_error(
        stub.RouteModel(pb.RouteModelRequest(text="hi", requested_model="gpt-9"), **ALICE),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    info = error_info(error)
    assert info is not None and info.metadata["model"] == "gpt-9"


async def test_route_model_uses_the_configured_models(db_url: str) -> None:
    models = [
        {"id": "big", "provider": "acme", "model": "acme-xl", "profile": "strong", "expensive": True},
        {"id": "web", "provider": "acme", "model": "acme-web", "profile": "fast", "web_only": True},
        {"id": "mid", "provider": "acme", "model": "acme-m", "profile": "balanced"},
    ]
    async with running(build_server, settings(db_url, models_json=json.dumps(models))) as (_, channel):
        stub = Stub(channel)
        short = await stub.RouteModel(pb.RouteModelRequest(text="Capital of Peru?"), **ALICE)
        strong = await stub.RouteModel(
            pb.RouteModelRequest(text="Step 1: gather data. Step 2: analyse it."), **ALICE
        )
        web = await stub.RouteModel(pb.RouteModelRequest(text="news?", requested_model="web"), **ALICE)
    assert short.model.id == "mid" and short.routed and list(short.notices) == []
    assert (
        strong.model.id == "big" and strong.model.expensive and any("expensive" in n for n in strong.notices)
    )
    assert (
        web.model.id == "web"
        and web.web_only
        and not web.routed
        and any("web-only" in n for n in web.notices)
    )
