"""The offline model's tool rules: which request becomes which tool call
(only for offered tools), and the answer that quotes the tool results;
then the whole loop offline model -> registry -> offline model, as the
engine will drive it, for a request that the ticked mailbox answers."""

from __future__ import annotations

import json

import pytest

from services.engine.providers.base import ChatMessage, TextChunk, ToolCallChunk, ToolSpec, UsageChunk
from services.engine.providers.offline import OfflineProvider, tool_call
from services.engine.tools import AllowedSources, ToolContext, ToolRegistry
from services.engine.tools.connectors import TestMailConnector
from tests.fakes.tool_backend import FakeToolBackend

SYSTEM = ChatMessage("system", "You are helpful.")


def spec(name: str, connectors: tuple[str, ...] = ()) -> ToolSpec:
    properties: dict[str, object] = {"connector": {"type": "string", "enum": list(connectors)}}
    return ToolSpec(name, name, {"type": "object", "properties": properties})


ALL = [
    spec("search_workspace"),
    spec("read_page"),
    spec("query_connector", ("calendar", "testmail")),
    spec("save_note"),
    spec("ask_agent"),
    spec("propose_instruction_update"),
    spec("mcp__fake__add"),
]


def planned(text: str, tools: list[ToolSpec] = ALL) -> tuple[str, dict[str, object]] | None:
    call = tool_call([SYSTEM, ChatMessage("user", text)], tools)
    return None if call is None else (call.name, json.loads(call.arguments))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Search the workspace for beta launch", ("search_workspace", {"query": "beta launch"})),
        ("search for budget 2027?", ("search_workspace", {"query": "budget 2027"})),
        ("Please read page p-roadmap", ("read_page", {"page_id": "p-roadmap"})),
        (
            "Check my mail for quarterly review",
            ("query_connector", {"connector": "testmail", "query": "quarterly review"}),
        ),
        ("search calendar for Friday", ("query_connector", {"connector": "calendar", "query": "Friday"})),
        ('@mcp:fake:add {"a": 2, "b": 40}', ("mcp__fake__add", {"a": 2, "b": 40})),
        ("ask qa: is the build green?", ("ask_agent", {"agent": "qa", "message": "is the build green?"})),
        (
            "Save a decision: we ship on Fridays only",
            (
                "save_note",
                {"kind": "decision", "title": "we ship on Fridays only", "body": "we ship on Fridays only"},
            ),
        ),
        (
            "save feature summary: export works",
            ("save_note", {"kind": "feature_summary", "title": "export works", "body": "export works"}),
        ),
        (
            "Update my instructions: answer in French",
            (
                "propose_instruction_update",
                {
                    "addition": "answer in French",
                    "reason": "The user asked: Update my instructions: answer in French",
                },
            ),
        ),
        ("What is the capital of France?", None),
    ],
)
def test_requests_become_the_documented_tool_calls(
    text: str, expected: tuple[str, dict[str, object]] | None
) -> None:
    assert planned(text) == expected


def test_no_call_for_a_tool_that_is_not_offered() -> None:
    # Mail unchecked: "check my mail" is no call at all, never a workspace search.
    assert (
        planned("Check my mail for quarterly review", [spec("search_workspace"), spec("query_connector")])
        is None
    )
    assert planned("@mcp:other:add {}", ALL) is None
    assert planned("read page p1", [spec("search_workspace")]) is None
    assert planned("read page p1", []) is None


def test_no_call_after_a_tool_result() -> None:
    call = ToolCallChunk("offline-call-1", "read_page", '{"page_id": "p1"}')
    messages = [
        SYSTEM,
        ChatMessage("user", "read page p1"),
        ChatMessage("assistant", "", tool_calls=(call,)),
        ChatMessage("tool", "<tool-result ...>", tool_call_id="offline-call-1"),
    ]
    assert tool_call(messages, ALL) is None


async def test_the_stream_is_a_call_then_usage_and_unchanged_without_tools() -> None:
    provider = OfflineProvider()
    messages = [SYSTEM, ChatMessage("user", "read page p1")]
    chunks = [chunk async for chunk in provider.stream("m", messages, ALL)]
    assert chunks[0] == ToolCallChunk("offline-call-1", "read_page", '{"page_id": "p1"}')
    assert isinstance(chunks[1], UsageChunk) and len(chunks) == 2
    plain = [chunk async for chunk in provider.stream("m", messages)]
    text = "".join(c.text for c in plain if isinstance(c, TextChunk))
    assert text == "You asked: read page p1. This answer comes from m."


async def run_loop(
    registry: ToolRegistry, ctx: ToolContext, text: str, max_steps: int = 4
) -> tuple[str, list[ChatMessage]]:
    """The engine's tool loop in miniature: call the model with the offered
    tools; run each call it makes; feed the results back; stop at text."""
    provider = OfflineProvider()
    tools = await registry.specs(ctx)
    messages = [SYSTEM, ChatMessage("user", text)]
    for _ in range(max_steps):
        chunks = [chunk async for chunk in provider.stream("offline-small", messages, tools)]
        calls = [c for c in chunks if isinstance(c, ToolCallChunk)]
        if not calls:
            return "".join(c.text for c in chunks if isinstance(c, TextChunk)), messages
        messages.append(ChatMessage("assistant", "", tool_calls=tuple(calls)))
        for call in calls:
            messages.append((await registry.execute(call, ctx)).message())
    raise AssertionError("the loop did not end")


def mail_context(*connectors: str) -> ToolContext:
    return ToolContext("alice", "run-1", AllowedSources(True, frozenset(connectors)))


async def test_t06_a_checked_mailbox_is_read_and_quoted_an_unchecked_one_is_absent() -> None:
    registry = ToolRegistry(FakeToolBackend(), [TestMailConnector()])
    request = "Check my mail for quarterly review"

    checked = mail_context("testmail")
    answer, messages = await run_loop(registry, checked, request)
    assert "According to query_connector:" in answer and "Thursday 14:00, room Atlas" in answer
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool"]
    assert checked.sources_json() == [{"kind": "connector", "id": "testmail", "title": "Test mail"}]

    unchecked = mail_context()
    answer, messages = await run_loop(registry, unchecked, request)
    assert "Thursday" not in answer and [m.role for m in messages] == ["system", "user"]
    assert unchecked.sources_read == []


async def test_a_refused_call_is_answered_as_a_failure() -> None:
    backend = FakeToolBackend()
    ctx = ToolContext("alice", "run-1", AllowedSources())
    answer, _ = await run_loop(ToolRegistry(backend), ctx, "read page p-missing")
    assert "read_page failed: page 'p-missing' not found." in answer
    assert ctx.sources_read == []


async def test_the_answer_quotes_a_read_page() -> None:
    backend = FakeToolBackend()
    backend.add_page("p1", "alice", "Roadmap", "The beta launches on May 12.")
    ctx = ToolContext("alice", "run-1", AllowedSources())
    answer, _ = await run_loop(ToolRegistry(backend), ctx, "read page p1")
    assert answer.startswith("You asked: read page p1. According to read_page: Page p1 (version 1): Roadmap")
    assert "The beta launches on May 12." in answer and answer.endswith(
        "This answer comes from offline-small."
    )
