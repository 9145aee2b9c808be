"""RouterService.RouteMessage in-process through its real stub (hashing
embedder, shipped thresholds), on SQLite and PostgreSQL: one call answers
what RouteSkills and RouteModel answer for the same message, in English and
French, with their errors."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import json_format
from google.protobuf.message import Message

from services.shared.errors import error_info
from switchboard.router.v1 import router_service_pb2 as pb
from switchboard.router.v1 import router_service_pb2_grpc
from tests.service.harness import as_user, expect_error

Stub = router_service_pb2_grpc.RouterServiceStub
ALICE = as_user("alice")


@pytest.fixture
def stub(router_channel: grpc.aio.Channel) -> Stub:
    return Stub(router_channel)


def as_dict(message: Message) -> dict[str, object]:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


async def both(stub: Stub, text: str, **fields: object) -> tuple[pb.RouteMessageResponse, dict[str, object]]:
    """RouteMessage's answer, and RouteSkills' and RouteModel's for the same
    request as RouteMessage's shape."""
    forced = list(fields.get("forced_skills", []))  # type: ignore[call-overload]
    offline = bool(fields.get("offline", False))
    requested, default = str(fields.get("requested_model", "")), str(fields.get("default_model", ""))
    one = await stub.RouteMessage(
        pb.RouteMessageRequest(
            text=text,
            forced_skills=forced,
            requested_model=requested,
            default_model=default,
            offline=offline,
        ),
        **ALICE,
    )
    skills = await stub.RouteSkills(
        pb.RouteSkillsRequest(text=text, forced_skills=forced, offline=offline), **ALICE
    )
    model = await stub.RouteModel(
        pb.RouteModelRequest(text=text, requested_model=requested, default_model=default, offline=offline),
        **ALICE,
    )
    return one, {"skills": as_dict(skills), "model": as_dict(model)}


@pytest.mark.parametrize(
    ("text", "skill"),
    [
        ("Turn these meeting notes into action items with owners", "meeting-notes-to-actions"),
        ("Transforme ces notes de réunion en actions avec des responsables", None),
        ("What is the capital of Australia?", None),
        ("Quelle est la capitale de l'Australie ?", None),
    ],
)
async def test_route_message_answers_what_route_skills_and_route_model_answer(
    stub: Stub, text: str, skill: str | None
) -> None:
    one, apart = await both(stub, text, offline=True)
    assert as_dict(one) == apart
    if skill is not None:
        assert [s.name for s in one.skills.skills] == [skill]
    assert one.model.routed and one.model.model.provider == "offline"


@pytest.mark.parametrize(
    "text",
    [
        "Reply to Marc about the budget, then compare the figures",
        "Réponds à Marc sur le budget, puis compare",
    ],
)
async def test_forced_skills_and_a_chosen_model_come_back_together(stub: Stub, text: str) -> None:
    one, apart = await both(stub, text, forced_skills=["/translate"], requested_model="offline-fast")
    assert as_dict(one) == apart
    assert [(s.name, s.forced) for s in one.skills.skills] == [("translate", True)]
    assert one.model.model.id == "offline-fast" and not one.model.routed
    # The user's default model decides when the request names none.
    default, apart = await both(stub, text, default_model="offline-strong")
    assert as_dict(default) == apart and default.model.model.id == "offline-strong"


async def test_route_message_fails_as_either_router_would(stub: Stub) -> None:
    unknown_model = await expect_error(
        stub.RouteMessage(pb.RouteMessageRequest(text="hi", requested_model="gpt-9"), **ALICE),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    info = error_info(unknown_model)
    assert info is not None and info.metadata["model"] == "gpt-9"
    await expect_error(
        stub.RouteMessage(pb.RouteMessageRequest(text="bonjour", forced_skills=["wedding-seating"]), **ALICE),
        grpc.StatusCode.NOT_FOUND,
        "ERROR_REASON_NOT_FOUND",
    )
    await expect_error(
        stub.RouteMessage(pb.RouteMessageRequest(text=" "), **ALICE),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    await expect_error(
        stub.RouteMessage(pb.RouteMessageRequest(text="é" * 32_001), **ALICE),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_TOO_LARGE",
    )
    await expect_error(
        stub.RouteMessage(pb.RouteMessageRequest(text="hi"), timeout=10),
        grpc.StatusCode.UNAUTHENTICATED,
        "ERROR_REASON_UNAUTHENTICATED",
    )
