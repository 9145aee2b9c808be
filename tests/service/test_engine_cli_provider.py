"""The engine's CLI provider against a fake headless agent CLI
(tests/fakes/agent_cli.py) run as a real subprocess: the same composed
context reaches it by each of the four strategies, its output streams as it
comes, its native session is captured and resumed, its failures say whether
a retry may help, no run directory or process is left behind — and a whole
run goes through it."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import grpc
import pytest

from services.engine.instructions import PRODUCT_SYSTEM
from services.engine.providers.base import (
    ChatMessage,
    LLMProvider,
    ProviderError,
    TextChunk,
    ToolCallChunk,
    UsageChunk,
    count_tokens,
)
from services.engine.providers.cli import InMemorySessionStore, compose_context
from services.engine.providers.config import parse_provider_configs
from services.engine.providers.registry import build_providers
from switchboard.engine.v1 import engine_pb2, engine_service_pb2
from switchboard.threads.v1 import threads_pb2, threads_service_pb2
from tests.conftest import DatabaseFactory
from tests.service.harness import as_user
from tests.service.system import collect, system

FAKE = str(Path(__file__).resolve().parents[1] / "fakes" / "agent_cli.py")
# Non-ASCII, a CRLF, trailing spaces and a final blank line: delivered as is.
SYSTEM = (
    "MARKER-7f3a: composed context\r\n"
    '# Instructions from the user\'s page "Déploiement"\n'
    "Réponds en français, s'il te plaît.   \n\n"
    "- [memory] deploys: Tuesday at noon\n\n"
)
PROMPT = "When is the deploy window?"
MESSAGES = [ChatMessage("system", SYSTEM), ChatMessage("user", PROMPT)]
STRATEGIES: dict[str, tuple[dict[str, str], list[str]]] = {
    "convention_file": (
        {"context_strategy": "convention_file", "convention_file_name": "AGENTS.md"},
        ["--context-from", "convention_file:AGENTS.md"],
    ),
    "flag": ({"context_strategy": "flag", "context_flag": "--context-file"}, ["--context-from", "flag"]),
    "stdin": ({"context_strategy": "stdin"}, ["--context-from", "stdin"]),
    "env": (
        {"context_strategy": "env", "context_env": "AGENT_CONTEXT"},
        ["--context-from", "env:AGENT_CONTEXT"],
    ),
}
# What the CLI may inherit, and a secret of the engine's that it must not.
ENVIRONMENT = {"PATH": os.environ.get("PATH", ""), "HOME": str(Path.home()), "ENGINE_DB_PASSWORD": "s3cret"}


def expected_answer(context: str, prompt: str = PROMPT, resumed: str = "") -> str:
    first = context.split("\n", 1)[0]
    answer = f"Context {len(context.encode())} bytes, first line: {first}. You asked: {prompt}."
    return f"resumed {resumed}. {answer}" if resumed else answer


def command(tmp_path: Path, strategy: str = "convention_file", *extra: str) -> list[str]:
    report = tmp_path / "report.jsonl"
    return [sys.executable, FAKE, *STRATEGIES[strategy][1], "--report", str(report), "--model", "{model}",
            *extra, "{prompt}"]  # fmt: skip


def config(tmp_path: Path, strategy: str = "convention_file", *extra: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": "agent",
        "kind": "cli",
        "command": command(tmp_path, strategy, *extra),
        "resume_args": ["--resume", "{session_id}"],
        **STRATEGIES[strategy][0],
        **fields,
    }


def make(
    tmp_path: Path,
    strategy: str = "convention_file",
    *extra: str,
    store: InMemorySessionStore | None = None,
    **fields: Any,
) -> LLMProvider:
    (parsed,) = parse_provider_configs(json.dumps([config(tmp_path, strategy, *extra, **fields)]))
    return build_providers([parsed], ENVIRONMENT, sessions=store or InMemorySessionStore())["agent"]


def reports(tmp_path: Path) -> list[dict[str, Any]]:
    lines = (tmp_path / "report.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


async def chunks(
    provider: LLMProvider, messages: list[ChatMessage] = MESSAGES, session_key: str = ""
) -> list[Any]:
    return [c async for c in provider.stream("model-x", messages, session_key=session_key)]


def text_of(received: list[Any]) -> str:
    return "".join(c.text for c in received if isinstance(c, TextChunk))


@pytest.mark.parametrize("strategy", list(STRATEGIES))
async def test_each_strategy_delivers_the_same_composed_context(tmp_path: Path, strategy: str) -> None:
    received = await chunks(make(tmp_path, strategy))
    (seen,) = reports(tmp_path)
    assert seen["context"].encode() == SYSTEM.encode()  # byte for byte
    assert text_of(received) == expected_answer(SYSTEM)
    assert len([c for c in received if isinstance(c, TextChunk)]) > 5  # deltas, not one blob
    # No usage from this CLI: the estimate, last.
    answer = expected_answer(SYSTEM)
    assert received[-1] == UsageChunk(count_tokens(SYSTEM) + count_tokens(PROMPT), count_tokens(answer))
    assert seen["argv"][-1] == PROMPT and seen["argv"][seen["argv"].index("--model") + 1] == "model-x"
    # A fresh run directory as the cwd, removed afterwards.
    cwd = Path(seen["cwd"])
    assert cwd.name == "run" and not cwd.parent.exists()
    # Only the variables it may inherit, plus the context's own for env.
    assert "ENGINE_DB_PASSWORD" not in seen["env"] and "PATH" in seen["env"]
    assert ("AGENT_CONTEXT" in seen["env"]) is (strategy == "env")
    if strategy == "flag":
        path = Path(seen["context_file"])
        assert path.is_absolute() and seen["context_file_exists"]
        # Outside the run directory: a relative path could not have reached it.
        assert cwd not in path.parents and not (cwd / path.name).exists()


async def test_an_agents_own_strategy_replaces_the_providers(tmp_path: Path) -> None:
    """The provider hands its context as a convention file; an agent whose
    injection strategy is stdin gets it on stdin instead (the fake CLI here
    reads stdin), byte for byte; a strategy the CLI is not configured for
    is reported, never half-used."""
    provider = make(tmp_path, "convention_file", "--context-from", "stdin")
    received = [c async for c in provider.stream("model-x", MESSAGES, context_strategy="stdin")]
    assert text_of(received) == expected_answer(SYSTEM)
    (seen,) = reports(tmp_path)
    assert seen["context"].encode() == SYSTEM.encode()
    assert "context_env" in provider.strategy_problem("env")  # type: ignore[attr-defined]
    assert provider.strategy_problem("stdin") == ""  # type: ignore[attr-defined]


@pytest.mark.parametrize("strategy", ["stdin", "flag"])
async def test_a_large_context_arrives_whole(tmp_path: Path, strategy: str) -> None:
    # Far beyond a pipe's buffer: the CLI reads while the provider writes.
    large = SYSTEM + "".join(f"- [memory] note {i}: {'détail ' * 20}\n" for i in range(3000))
    received = await chunks(
        make(tmp_path, strategy), [ChatMessage("system", large), ChatMessage("user", PROMPT)]
    )
    assert len(large.encode()) > 400_000 and reports(tmp_path)[0]["context"] == large
    assert text_of(received) == expected_answer(large)


async def test_a_context_too_large_for_an_environment_variable_is_a_final_failure(tmp_path: Path) -> None:
    large = SYSTEM * 20_000  # above Linux's 128 KiB limit for one variable
    with pytest.raises(ProviderError) as raised:
        await chunks(make(tmp_path, "env"), [ChatMessage("system", large), ChatMessage("user", PROMPT)])
    assert not raised.value.retryable and "cannot start" in raised.value.message


async def test_earlier_turns_reach_the_cli_as_a_transcript_after_the_instructions(tmp_path: Path) -> None:
    call = ToolCallChunk("call_1", "lookup", '{"word": "deploy"}')
    messages = [
        ChatMessage("system", SYSTEM),
        ChatMessage("user", "Who deploys?"),
        ChatMessage("assistant", "", tool_calls=(call,)),
        ChatMessage("tool", "deploy: Bob", tool_call_id="call_1"),
        ChatMessage("assistant", "Bob deploys."),
        ChatMessage("user", PROMPT),
    ]
    context, prompt = compose_context(messages)
    assert prompt == PROMPT
    assert context == (
        f"{SYSTEM}\n\n# Conversation so far\n\n## user\nWho deploys?\n\n"
        '## assistant\n[tool call lookup {"word": "deploy"}]\n\n## tool result (call_1)\ndeploy: Bob\n\n'
        "## assistant\nBob deploys."
    )
    received = await chunks(make(tmp_path, "stdin"), messages)
    assert reports(tmp_path)[0]["context"] == context
    assert text_of(received) == expected_answer(context)


async def test_usage_reported_by_the_cli_wins_over_the_estimate(tmp_path: Path) -> None:
    received = await chunks(make(tmp_path, "convention_file", "--usage", "1200,34"))
    assert received[-1] == UsageChunk(1200, 34)


async def test_text_streams_while_the_cli_is_still_running(tmp_path: Path) -> None:
    go = tmp_path / "go"
    stream = make(tmp_path, "convention_file", "--wait-for", str(go)).stream("model-x", MESSAGES)
    # The CLI holds its answer until "go" exists: a provider that buffered
    # the output until exit would not deliver this first piece in time.
    first = await asyncio.wait_for(anext(stream), 5)
    assert first == TextChunk("Context")
    go.touch()
    rest = [c async for c in stream]
    assert "Context" + text_of(rest) == expected_answer(SYSTEM)


async def test_a_placeholder_inside_the_prompt_is_not_expanded(tmp_path: Path) -> None:
    received = await chunks(make(tmp_path), [ChatMessage("system", SYSTEM), ChatMessage("user", "{model}?")])
    assert reports(tmp_path)[0]["argv"][-1] == "{model}?"
    assert text_of(received).endswith("You asked: {model}?.")


# Native sessions


async def test_the_session_is_captured_then_resumed_on_the_next_turn(tmp_path: Path) -> None:
    store = InMemorySessionStore()
    provider = make(tmp_path, store=store)
    first = text_of(await chunks(provider, session_key="thread-1"))
    session = await store.get("thread-1", "agent")
    assert session and session.startswith("sess-") and not first.startswith("resumed")
    second = text_of(await chunks(provider, session_key="thread-1"))
    assert second == expected_answer(SYSTEM, resumed=session)
    one, two = reports(tmp_path)
    assert "--resume" not in one["argv"]
    assert two["argv"][-3:] == ["--resume", session, PROMPT]  # just before the prompt
    assert await store.get("thread-1", "agent") == session
    # Another thread has its own session; no key, no session kept.
    other = text_of(await chunks(provider, session_key="thread-2"))
    assert not other.startswith("resumed") and await store.get("thread-2", "agent") not in (None, session)
    await chunks(provider)
    assert "--resume" not in reports(tmp_path)[-1]["argv"]


async def test_a_session_the_cli_no_longer_knows_is_replaced_by_a_fresh_one(tmp_path: Path) -> None:
    store = InMemorySessionStore()
    await store.put("thread-1", "agent", "sess-gone")
    state = tmp_path / "state"
    state.mkdir()
    provider = make(tmp_path, "convention_file", "--state", str(state), store=store)
    received = await chunks(provider, session_key="thread-1")
    assert text_of(received) == expected_answer(SYSTEM)
    refused, fresh = reports(tmp_path)
    assert "sess-gone" in refused["argv"] and "--resume" not in fresh["argv"]
    session = await store.get("thread-1", "agent")
    assert session not in (None, "sess-gone") and (state / str(session)).exists()
    assert text_of(await chunks(provider, session_key="thread-1")) == expected_answer(
        SYSTEM, resumed=str(session)
    )


async def test_plain_text_output_with_the_session_on_stderr(tmp_path: Path) -> None:
    store = InMemorySessionStore()
    provider = make(
        tmp_path, "env", "--format", "text", store=store, output="text", session_pattern=r"session id: (\S+)"
    )
    assert text_of(await chunks(provider, session_key="t")) == expected_answer(SYSTEM)
    session = await store.get("t", "agent")
    assert session and session.startswith("sess-")
    assert text_of(await chunks(provider, session_key="t")) == expected_answer(SYSTEM, resumed=session)


# Failures


async def test_a_non_zero_exit_is_a_final_failure_with_the_clis_stderr(tmp_path: Path) -> None:
    with pytest.raises(ProviderError) as raised:
        await chunks(make(tmp_path, "flag", "--fail", "3"))
    assert not raised.value.retryable
    assert "status 3" in raised.value.message and "invalid API key" in raised.value.message
    (seen,) = reports(tmp_path)
    assert not Path(seen["cwd"]).parent.exists() and not Path(seen["context_file"]).exists()


async def test_a_silent_cli_times_out_retryably_and_is_stopped(tmp_path: Path) -> None:
    with pytest.raises(ProviderError) as raised:
        await chunks(make(tmp_path, "stdin", "--hang", timeout=0.5))
    assert raised.value.retryable and "no output for 0.5 s" in raised.value.message
    (seen,) = reports(tmp_path)
    with pytest.raises(ProcessLookupError):
        os.kill(seen["pid"], 0)
    assert not Path(seen["cwd"]).parent.exists()


@pytest.mark.parametrize(("after", "retryable"), [(0, True), (3, False)])
async def test_a_crash_is_retryable_only_before_any_output(
    tmp_path: Path, after: int, retryable: bool
) -> None:
    received: list[Any] = []
    with pytest.raises(ProviderError) as raised:
        async for chunk in make(tmp_path, "env", "--crash-after", str(after)).stream("model-x", MESSAGES):
            received.append(chunk)
    assert raised.value.retryable is retryable and "signal 9" in raised.value.message
    assert len(received) == after


async def test_a_missing_executable_is_a_final_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))  # where run directories are made
    provider = make(tmp_path, command=[str(tmp_path / "no-such-cli"), "{prompt}"])
    with pytest.raises(ProviderError) as raised:
        await chunks(provider)
    assert not raised.value.retryable and "cannot start" in raised.value.message
    assert list(temp.iterdir()) == []


async def test_a_caller_that_stops_reading_leaves_no_process_behind(tmp_path: Path) -> None:
    stream = make(tmp_path, "convention_file", "--wait-for", str(tmp_path / "never")).stream(
        "model-x", MESSAGES
    )
    assert await anext(stream) == TextChunk("Context")
    await stream.aclose()
    (seen,) = reports(tmp_path)
    with pytest.raises(ProcessLookupError):
        os.kill(seen["pid"], 0)
    assert not Path(seen["cwd"]).parent.exists()


@pytest.mark.parametrize(
    "broken",
    [
        {"command": []},
        {"command": ["agent", "{prompt}", "{colour}"]},
        {"resume_args": ["--resume"]},
        {"context_strategy": "flag", "context_flag": ""},
        {"context_strategy": "env", "context_env": ""},
        {"context_strategy": "env", "context_env": "NOT A NAME"},
        {"context_strategy": "stdin", "command": ["agent", "--ctx", "{context_file}"]},
        {"convention_file_name": "../AGENTS.md"},
        {"output": "text", "session_pattern": "session: \\S+"},
        {"output": "xml"},
    ],
)
def test_a_cli_configuration_that_cannot_work_is_refused(tmp_path: Path, broken: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        parse_provider_configs(json.dumps([{**config(tmp_path), **broken}]))


def test_other_kinds_still_need_a_base_url() -> None:
    with pytest.raises(ValueError, match="base_url"):
        parse_provider_configs('[{"name": "a", "kind": "openai"}]')


# A whole run through the engine


CLI_MODELS = [{"id": "agent-model", "provider": "agent", "model": "agent-x", "profile": "balanced"}]


def cli_system(make_database: DatabaseFactory, providers: list[dict[str, Any]]) -> Any:
    """The four services with the fake CLI as the only model, "agent-model"."""
    return system(
        make_database,
        providers_json=json.dumps(providers),
        router_settings={"models_json": json.dumps(CLI_MODELS)},
    )


async def test_a_run_through_a_configured_cli_provider(
    make_database: DatabaseFactory, tmp_path: Path
) -> None:
    providers = [config(tmp_path, "flag")]
    async with cli_system(make_database, providers) as sb:
        user = as_user("alice")
        # Titled, so no background title call reaches the CLI after the run.
        conversation = await sb.threads.CreateConversation(
            threads_service_pb2.CreateConversationRequest(title="CLI"), **user
        )
        request = engine_service_pb2.StartRunRequest(
            request_id="r-cli", conversation_id=conversation.conversation.id, message=PROMPT,
            requested_model="agent-model", surface=engine_pb2.SURFACE_CHAT,
        )  # fmt: skip
        events = await collect(sb.engine.StartRun(request, metadata=user["metadata"], timeout=60))
    (seen,) = reports(tmp_path)
    # The engine's composed system message (product layer first) is the context.
    assert seen["context"].startswith(PRODUCT_SYSTEM) and seen["argv"][-1] == PROMPT
    final = events[-1]
    assert final.WhichOneof("kind") == "final", events[-1]
    assert final.final.text == expected_answer(seen["context"]) and final.final.model == "agent-x"
    deltas = "".join(e.delta.text for e in events if e.WhichOneof("kind") == "delta")
    assert deltas == final.final.text


async def test_an_agent_on_a_cli_resumes_its_native_session_from_the_threads_service(
    make_database: DatabaseFactory, tmp_path: Path
) -> None:
    """AskAgent with a CLI provider: the first ask starts a native session
    and the engine stores its id as the thread's provider session; the next
    ask (from another requester) resumes it."""
    providers = [config(tmp_path, "stdin")]
    async with cli_system(make_database, providers) as sb:
        user = as_user("alice")
        agent = threads_pb2.Agent(id="qa", model="agent-model")
        await sb.threads.CreateAgent(threads_service_pb2.CreateAgentRequest(agent=agent), **user)

        async def ask(requester: str) -> list[engine_pb2.RunEvent]:
            request = engine_service_pb2.AskAgentRequest(
                requester=requester, target_agent_id="qa", message="status?"
            )
            return await collect(sb.engine.AskAgent(request, metadata=user["metadata"], timeout=60))

        first, second = await ask("main"), await ask("architect")
        thread = await sb.threads.EnsureAgentThread(
            threads_service_pb2.EnsureAgentThreadRequest(target_agent_id="qa"), **user
        )
        sessions = await sb.threads.ListProviderSessions(
            threads_service_pb2.ListProviderSessionsRequest(agent_thread_id=thread.thread.id), **user
        )
    assert first[-1].WhichOneof("kind") == second[-1].WhichOneof("kind") == "final"
    (session,) = sessions.sessions
    assert session.provider_id == "agent" and session.native_session_id
    assert not first[-1].final.text.startswith("resumed")
    assert second[-1].final.text.startswith(f"resumed {session.native_session_id}.")


@pytest.mark.parametrize(
    ("strategy", "notice"),
    [(threads_pb2.INJECTION_STRATEGY_STDIN, False), (threads_pb2.INJECTION_STRATEGY_ENV, True)],
)
async def test_an_agents_injection_strategy_is_honoured_or_said_unavailable(
    make_database: DatabaseFactory, tmp_path: Path, strategy: int, notice: bool
) -> None:
    """The provider writes a convention file; the fake CLI reads stdin. An
    agent whose strategy is stdin gets its whole context there; one whose
    strategy the CLI has no settings for (env without context_env) gets a
    notice and the provider's own strategy."""
    providers = [config(tmp_path, "convention_file", "--context-from", "stdin")]
    async with cli_system(make_database, providers) as sb:
        user = as_user("alice")
        agent = threads_pb2.Agent(id="qa", model="agent-model", injection_strategy=strategy)  # type: ignore[arg-type]
        await sb.threads.CreateAgent(threads_service_pb2.CreateAgentRequest(agent=agent), **user)
        request = engine_service_pb2.AskAgentRequest(
            requester="main", target_agent_id="qa", message="status?"
        )
        events = await collect(sb.engine.AskAgent(request, metadata=user["metadata"], timeout=60))
    notices = [e.notice.code for e in events if e.WhichOneof("kind") == "notice"]
    assert notices == (["INJECTION_STRATEGY_UNAVAILABLE"] if notice else [])
    (seen,) = reports(tmp_path)
    # Honoured: the context arrived on stdin; refused: stdin stayed empty.
    assert (len(seen["context"]) > 100) is (not notice)
    assert "# You are the agent" in seen["context"] or notice


async def test_a_chat_on_a_cli_resumes_the_conversations_native_session(
    make_database: DatabaseFactory, tmp_path: Path
) -> None:
    providers = [config(tmp_path, "stdin")]
    async with cli_system(make_database, providers) as sb:
        alice, bob = as_user("alice"), as_user("bob")
        # Titled, so no background title call reaches the CLI between the two runs.
        chat = await sb.threads.CreateConversation(
            threads_service_pb2.CreateConversationRequest(title="Reprise"), **alice
        )

        async def send(text: str) -> list[engine_pb2.RunEvent]:
            request = engine_service_pb2.StartRunRequest(
                conversation_id=chat.conversation.id, message=text, requested_model="agent-model"
            )
            return await collect(sb.engine.StartRun(request, metadata=alice["metadata"], timeout=60))

        first, second = await send("Bonjour, on commence ?"), await send("Et ensuite ?")
        sessions = await sb.threads.ListProviderSessions(
            threads_service_pb2.ListProviderSessionsRequest(agent_thread_id=chat.conversation.id), **alice
        )
        # Another user cannot see the conversation's sessions: it looks missing.
        with pytest.raises(grpc.aio.AioRpcError) as hidden:
            await sb.threads.ListProviderSessions(
                threads_service_pb2.ListProviderSessionsRequest(agent_thread_id=chat.conversation.id), **bob
            )
    assert hidden.value.code() == grpc.StatusCode.NOT_FOUND
    (session,) = sessions.sessions
    assert not first[-1].final.text.startswith("resumed")
    assert second[-1].final.text.startswith(f"resumed {session.native_session_id}.")
    # The resumed CLI still got the composed context, earlier turn included.
    assert "Bonjour, on commence ?" in reports(tmp_path)[-1]["context"]
