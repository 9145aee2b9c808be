"""The OpenAI-compatible endpoint's rules, without any service: what a
request's messages become (instructions, earlier turns, the message the run
answers) and when a client's history agrees with the stored one."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from gateway.openai_compat.conversation import history_matches, stored_turns
from gateway.openai_compat.errors import OpenAIError
from gateway.openai_compat.exchange import ChatCompletionBody, read_exchange
from switchboard.threads.v1 import threads_pb2
from tests.unit.test_gateway_streams import NoService, app_with

USER, ASSISTANT, TOOL = threads_pb2.ROLE_USER, threads_pb2.ROLE_ASSISTANT, threads_pb2.ROLE_TOOL


def body(*messages: dict[str, Any], **extra: Any) -> ChatCompletionBody:
    return ChatCompletionBody.model_validate({"model": "auto", "messages": list(messages), **extra})


def entry(role: threads_pb2.Role.ValueType, content: str, run_id: str = "") -> threads_pb2.Entry:
    return threads_pb2.Entry(role=role, content=content, run_id=run_id)


def test_system_messages_become_instructions_and_only_the_last_message_is_posted() -> None:
    exchange = read_exchange(
        body(
            {"role": "system", "content": "Réponds en français."},
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Bonjour !"},
            {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
            {
                "role": "user",
                "content": [{"type": "text", "text": "Quel jour"}, {"type": "text", "text": "?"}],
            },
        )
    )
    assert exchange.instructions == "Réponds en français.\n\nBe brief."
    assert exchange.earlier == [("user", "Hello"), ("assistant", "Bonjour !")]
    assert exchange.message == "Quel jour\n?"


HI = {"role": "user", "content": "hi"}
CALLS = {"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]}


@pytest.mark.parametrize(
    ("messages", "extra", "code", "param"),
    [
        ([HI, {"role": "assistant", "content": "yo"}], {}, "invalid_request", "messages[1].role"),
        ([{"role": "system", "content": "Be brief"}], {}, "invalid_request", "messages[0].role"),
        ([CALLS, HI], {}, "unsupported_tool_calls", "messages[0].tool_calls"),
        ([{"role": "function", "content": "42"}, HI], {}, "unsupported_tool_calls", "messages[0].role"),
        (
            [{"role": "user", "content": [{"type": "input_audio"}]}],
            {},
            "unsupported_content",
            "messages[0].content[0]",
        ),
        ([{"role": "user", "content": None}], {}, "invalid_request", "messages[0].content"),
        ([HI], {"functions": [{"name": "f"}]}, "unsupported_tools", "functions"),
    ],
)
def test_requests_it_cannot_honour_are_refused_naming_the_field(
    messages: list[dict[str, Any]], extra: dict[str, Any], code: str, param: str
) -> None:
    with pytest.raises(OpenAIError) as refused:
        read_exchange(body(*messages, **extra))
    assert (refused.value.status, refused.value.code, refused.value.param) == (400, code, param)


STORED = [
    entry(USER, "Quand est le déploiement ?", "r1"),
    entry(ASSISTANT, "", "r1"),  # a tool call's message
    entry(TOOL, "calendar: Tuesday", "r1"),
    entry(ASSISTANT, "Mardi à midi.", "r1"),
    entry(USER, "And the review?", "r2"),  # its run failed: no answer
    entry(USER, "And the review?", "r3"),
    entry(ASSISTANT, "Let me check. ", "r3"),
    entry(ASSISTANT, "Wednesday.", "r3"),
]


def test_the_stored_turns_are_the_answered_messages_and_their_answers() -> None:
    turns = stored_turns(STORED)
    assert [role for role, _ in turns] == ["user", "assistant", "user", "assistant"]
    # An answer matches as the run's whole text or its last message.
    assert turns[3][1] == {"Let me check. Wednesday.", "Wednesday."}


def user(text: str) -> tuple[str, str]:
    return ("user", text)


def answer(text: str) -> tuple[str, str]:
    return ("assistant", text)


DEPLOY = [user("Quand est le déploiement ?"), answer("Mardi à midi.")]


@pytest.mark.parametrize(
    ("client", "matches"),
    [
        ([], True),  # only the new message
        ([*DEPLOY, user("And the review?"), answer("Let me check. Wednesday.")], True),
        # Whitespace aside; the answer's last message; the oldest turns dropped by the client.
        ([user(" And the review? "), answer("Wednesday.\n")], True),
        # The failed turn kept by the client: left out on both sides.
        ([*DEPLOY, user("And the review?"), user("And the review?"), answer("Wednesday.")], True),
        # An edited question, an edited answer, a regenerated last answer.
        (
            [
                user("When is the deploy?"),
                answer("Mardi à midi."),
                user("And the review?"),
                answer("Wednesday."),
            ],
            False,
        ),
        ([user("And the review?"), answer("Thursday.")], False),
        (DEPLOY, False),
        # More turns than the conversation holds.
        ([user("Earlier"), answer("Yes"), *DEPLOY, user("And the review?"), answer("Wednesday.")], False),
    ],
)
def test_a_clients_history_matches_when_it_is_the_stored_conversations_latest_turns(
    client: list[tuple[str, str]], matches: bool
) -> None:
    assert history_matches(client, stored_turns(STORED)) is matches


@pytest.fixture
async def no_services() -> AsyncIterator[httpx.AsyncClient]:
    app = app_with(NoService())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        yield client


def dumps(messages: list[dict[str, Any]], **extra: Any) -> bytes:
    return json.dumps({"model": "auto", "messages": messages, **extra}).encode()


@pytest.mark.parametrize(
    ("raw", "status", "param"),
    [
        (b'{"model": "auto", "messages": [', 400, None),  # not JSON
        (b"[]", 400, None),
        (dumps([{**HI, "content": "x" * 32_001}]), 413, "messages"),
        (dumps([HI], stream={"on": True}), 400, "stream"),
        (dumps([HI], model=""), 400, "model"),
        (dumps([HI] * 1001), 400, "messages"),
    ],
)  # fmt: skip
async def test_bad_bodies_are_refused_before_any_rpc(
    no_services: httpx.AsyncClient, raw: bytes, status: int, param: str | None
) -> None:
    response = await no_services.post(
        "/v1/chat/completions", content=raw, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"] and error["code"]
    assert error["param"] == param
    assert response.headers["x-should-retry"] == "false"


async def test_an_unexpected_failure_is_a_500_in_openais_shape_without_its_cause() -> None:
    class BrokenRouter:
        async def ListModels(self, *_: Any, **__: Any) -> Any:  # noqa: N802
            raise RuntimeError("secret detail")

    app = app_with(NoService())
    app.state.router = BrokenRouter()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        response = await client.post("/v1/chat/completions", json={"model": "some-model", "messages": [HI]})
    assert response.status_code == 500
    assert response.json() == {
        "error": {"message": "internal error", "type": "server_error", "param": None, "code": "internal"}
    }
    assert response.headers["x-should-retry"] == "false"
