"""The engine's OpenAI-compatible and Anthropic providers, through the
official SDKs, against a local server speaking each API's real streaming
wire format (tests/fakes/llm_server.py) — and a whole run through them: a
failure is retried only before the first token reached the client; after
that the run fails with its cause and no text is shown twice."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from services.engine.providers.base import (
    ChatMessage,
    ProviderError,
    TextChunk,
    ToolCallChunk,
    ToolSpec,
    UsageChunk,
)
from services.engine.providers.config import ProviderConfig, parse_provider_configs
from services.engine.providers.registry import build_providers
from switchboard.engine.v1 import engine_pb2, engine_service_pb2
from switchboard.threads.v1 import threads_service_pb2
from tests.conftest import DatabaseFactory
from tests.fakes.llm_server import ANSWER, INPUT_TOKENS, THOUGHT, FakeServer, anthropic_app, serve
from tests.service.harness import as_user
from tests.service.system import System, collect, system

KINDS = ["openai", "anthropic"]
MESSAGES = [ChatMessage("system", "You are terse."), ChatMessage("user", "When is the deploy window?")]
LOOKUP = ToolSpec("lookup", "Look a word up", {"type": "object", "properties": {"word": {"type": "string"}}})


ProviderFor = Callable[[str, FakeServer], Any]


@pytest.fixture
async def provider_for() -> AsyncIterator[ProviderFor]:
    """Builds a provider of a kind against a fake server; each is closed
    (its SDK's pooled connections) after the test."""
    made: list[Any] = []

    def build(kind: str, server: FakeServer) -> Any:
        base = f"{server.url}/v1" if kind == "openai" else server.url
        config = ProviderConfig(name=f"test-{kind}", kind=kind, base_url=base, api_key_env="TEST_KEY")  # type: ignore[arg-type]
        made.append(build_providers([config], {"TEST_KEY": "sk-test"})[f"test-{kind}"])
        return made[-1]

    yield build
    for provider in made:
        await provider.close()


async def chunks(provider: Any, tools: tuple[ToolSpec, ...] = ()) -> list[Any]:
    return [chunk async for chunk in provider.stream("model-x", MESSAGES, tools)]


async def test_text_streams_in_pieces_with_usage(
    fake: tuple[str, FakeServer], provider_for: ProviderFor
) -> None:
    kind, server = fake
    received = await chunks(provider_for(kind, server))
    texts = [c.text for c in received if isinstance(c, TextChunk)]
    assert len(texts) > 3 and "".join(texts) == ANSWER
    assert received[-1] == UsageChunk(INPUT_TOKENS, len(ANSWER.split(" ")))
    sent = server.script.requests[0]
    assert sent["model"] == "model-x" and sent["stream"] is True
    if kind == "anthropic":  # the system prompt goes where the API wants it
        assert sent["system"] == "You are terse." and [m["role"] for m in sent["messages"]] == ["user"]
    else:
        assert [m["role"] for m in sent["messages"]] == ["system", "user"]
        assert sent["stream_options"] == {"include_usage": True}


async def test_tool_calls_are_reassembled_from_their_fragments(
    fake: tuple[str, FakeServer], provider_for: ProviderFor
) -> None:
    kind, server = fake
    arguments = json.dumps({"word": "déploiement", "strict": True})
    server.script.steps = [f"tool:lookup:{arguments}"]
    received = await chunks(provider_for(kind, server), (LOOKUP,))
    (call,) = [c for c in received if isinstance(c, ToolCallChunk)]
    assert call.name == "lookup" and json.loads(call.arguments) == {"word": "déploiement", "strict": True}
    offered = server.script.requests[0]["tools"][0]
    assert (offered.get("function") or offered)["name"] == "lookup"


@pytest.mark.parametrize(
    ("step", "retryable"), [("status:429", True), ("status:500", True), ("status:400", False)]
)
async def test_http_errors_say_whether_a_retry_may_help(
    fake: tuple[str, FakeServer],
    step: str,
    retryable: bool,
    provider_for: ProviderFor,
) -> None:
    kind, server = fake
    server.script.steps = [step]
    with pytest.raises(ProviderError) as raised:
        await chunks(provider_for(kind, server))
    assert raised.value.retryable is retryable
    assert step.split(":")[1] in raised.value.message


async def test_a_stream_cut_mid_answer_is_a_retryable_failure_after_the_text(
    fake: tuple[str, FakeServer],
    provider_for: ProviderFor,
) -> None:
    kind, server = fake
    server.script.steps = ["cut:3"]
    received: list[Any] = []
    with pytest.raises(ProviderError) as raised:
        async for chunk in provider_for(kind, server).stream("model-x", MESSAGES):
            received.append(chunk)
    assert "".join(c.text for c in received) == "The deploy window"
    assert raised.value.retryable


async def test_an_overloaded_error_inside_a_200_stream_is_retryable(provider_for: ProviderFor) -> None:
    with serve(anthropic_app) as server:
        server.script.steps = ["overloaded:2"]
        with pytest.raises(ProviderError) as raised:
            await chunks(provider_for("anthropic", server))
    assert raised.value.retryable and "overloaded_error" in raised.value.message


def test_provider_configuration_is_checked() -> None:
    assert parse_provider_configs("") == []
    for broken in [
        '[{"name": "offline", "kind": "openai", "base_url": "x"}]',
        '[{"name": "a", "kind": "gemini"}]',
    ]:
        with pytest.raises(ValueError):
            parse_provider_configs(broken)


# A whole run through a configured provider


@pytest.fixture
async def remote(make_database: DatabaseFactory, fake: tuple[str, FakeServer]) -> Any:
    kind, server = fake
    base = f"{server.url}/v1" if kind == "openai" else server.url
    providers = [{"name": "remote", "kind": kind, "base_url": base}]
    models = [
        {"id": "remote-model", "provider": "remote", "model": "model-x", "profile": "balanced"},
        {"id": "web-model", "provider": "remote", "model": "model-web", "profile": "fast", "web_only": True},
        {"id": "offline-fast", "provider": "offline", "model": "switchboard-offline-fast", "profile": "fast"},
    ]
    async with system(
        make_database,
        providers_json=json.dumps(providers),
        router_settings={"models_json": json.dumps(models)},
    ) as sb:
        yield sb, server


async def run(
    sb: System, text: str = "When is the deploy window?", model: str = "remote-model"
) -> list[engine_pb2.RunEvent]:
    user = as_user("alice")
    # Named: no title model call comes after the run's own requests.
    conversation = await sb.threads.CreateConversation(
        threads_service_pb2.CreateConversationRequest(title="Provider test"), **user
    )
    request = engine_service_pb2.StartRunRequest(
        request_id=f"r-{text}", conversation_id=conversation.conversation.id, message=text,
        requested_model=model, surface=engine_pb2.SURFACE_CHAT,
    )  # fmt: skip
    return await collect(sb.engine.StartRun(request, metadata=user["metadata"], timeout=60))


def answer_text(events: list[engine_pb2.RunEvent]) -> str:
    return "".join(e.delta.text for e in events if e.WhichOneof("kind") == "delta")


async def test_a_run_retries_a_failure_before_the_first_token(remote: tuple[System, FakeServer]) -> None:
    sb, server = remote
    server.script.steps = ["status:429", "status:503"]
    events = await run(sb)
    assert events[-1].WhichOneof("kind") == "final"
    assert answer_text(events) == ANSWER == events[-1].final.text  # shown once
    assert events[-1].final.model == "model-x" and events[-1].final.usage.tokens_in == INPUT_TOKENS
    assert len(server.script.requests) == 3


async def test_a_stream_cut_after_text_fails_the_run_without_repeating_text(
    remote: tuple[System, FakeServer],
) -> None:
    sb, server = remote
    server.script.steps = ["cut:3"]
    events = await run(sb)
    assert events[-1].WhichOneof("kind") == "error"
    assert events[-1].error.code == "ERROR_REASON_DEPENDENCY_UNAVAILABLE"
    assert answer_text(events) == "The deploy window"  # what arrived, once; no retry
    assert len(server.script.requests) == 1
    got = await sb.engine.GetRun(
        engine_service_pb2.GetRunRequest(run_id=events[0].run_id), **as_user("alice")
    )
    assert got.run.status == engine_pb2.RUN_STATUS_FAILED and "connection" in got.run.error


async def test_a_refused_request_is_not_retried_and_fails_the_run(remote: tuple[System, FakeServer]) -> None:
    sb, server = remote
    server.script.steps = ["status:400"]
    events = await run(sb)
    assert events[-1].WhichOneof("kind") == "error" and "400" in events[-1].error.message
    assert len(server.script.requests) == 1


async def test_retries_end_after_the_configured_attempts(remote: tuple[System, FakeServer]) -> None:
    sb, server = remote
    server.script.steps = ["status:500"] * 5
    events = await run(sb)
    assert events[-1].WhichOneof("kind") == "error"
    assert len(server.script.requests) == 3  # provider_attempts
    assert answer_text(events) == ""


async def test_a_web_only_model_is_announced_before_the_first_model_call(
    remote: tuple[System, FakeServer],
) -> None:
    sb, _ = remote
    events = await run(sb, model="web-model")
    kinds = [e.WhichOneof("kind") for e in events]
    notices = [e.notice for e in events if e.WhichOneof("kind") == "notice"]
    # The router's notice, then what this run's sources lose (the workspace).
    assert [n.code for n in notices] == ["WEB_ONLY_MODEL", "SOURCES_WITHHELD"]
    assert "web" in notices[0].message.lower() and "workspace" in notices[1].message
    assert kinds.index("notice") < kinds.index("delta")
    assert events[-1].final.model == "model-web"


async def test_tool_calls_and_results_go_back_in_each_apis_format(
    fake: tuple[str, FakeServer], provider_for: ProviderFor
) -> None:
    kind, server = fake
    call = ToolCallChunk("call_9", "lookup", '{"word": "deploy"}')
    conversation = [
        *MESSAGES,
        ChatMessage("assistant", "", tool_calls=(call,)),
        ChatMessage("tool", "deploy: Tuesday", tool_call_id="call_9"),
    ]
    await chunks_of(provider_for(kind, server), conversation)
    sent = server.script.requests[0]["messages"]
    if kind == "openai":
        assert sent[-2]["tool_calls"][0]["function"] == {"name": "lookup", "arguments": '{"word": "deploy"}'}
        assert sent[-1] == {"role": "tool", "tool_call_id": "call_9", "content": "deploy: Tuesday"}
    else:
        assert sent[-2]["content"] == [
            {"type": "tool_use", "id": "call_9", "name": "lookup", "input": {"word": "deploy"}}
        ]
        assert sent[-1] == {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "call_9", "content": "deploy: Tuesday"}],
        }


async def chunks_of(provider: Any, messages: list[ChatMessage]) -> list[Any]:
    return [chunk async for chunk in provider.stream("model-x", messages)]


async def test_reasoning_streams_apart_from_the_answer(remote: tuple[System, FakeServer]) -> None:
    """Extended thinking (Anthropic) or reasoning_content (OpenAI-compatible
    servers) becomes `reasoning` events before the text, never part of it."""
    sb, server = remote
    server.script.steps = ["think"]
    events = await run(sb)
    kinds = [e.WhichOneof("kind") for e in events]
    (reasoning,) = [e.reasoning.text for e in events if e.WhichOneof("kind") == "reasoning"]
    assert reasoning == THOUGHT and kinds.index("reasoning") < kinds.index("delta")
    assert answer_text(events) == ANSWER == events[-1].final.text
