"""The engine's MCP client against a real MCP server over stdio
(tests/fakes/mcp_server.py, started as a subprocess exactly as a configured
server is): its tools are listed and offered as mcp__<server>__<tool> only
when the conversation allows the server, calls are forwarded and declared
as sources, and a server that fails to start, or dies mid-call, is an error
result and a restart, never a hung run. Closing the hub stops the process."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest

from services.engine.providers.base import ChatMessage, TextChunk, ToolCallChunk
from services.engine.providers.offline import OfflineProvider
from services.engine.tools import AllowedSources, ToolContext, ToolRegistry
from services.engine.tools.backend import PageHit, PageText, ProposedNote, SavedNote
from services.engine.tools.connectors import TestMailConnector
from services.engine.tools.mcp_client import McpHub, McpServerConfig
from services.shared.errors import NotFound
from switchboard.memory.v1 import memory_pb2, memory_service_pb2_grpc, pages_pb2, pages_service_pb2_grpc
from switchboard.memory.v1 import memory_service_pb2 as memory_pb
from switchboard.memory.v1 import pages_service_pb2 as pages_pb
from tests.fakes.tool_backend import FakeToolBackend
from tests.service.harness import as_user

ROOT = Path(__file__).resolve().parents[2]
FAKE = McpServerConfig(
    name="fake", command=sys.executable, args=("-m", "tests.fakes.mcp_server"), cwd=str(ROOT), retry_after=0
)
BROKEN = McpServerConfig(
    name="broken",
    command=sys.executable,
    args=("-c", "import sys; sys.stderr.write('missing API token\\n'); sys.exit(2)"),
)


@pytest.fixture
async def hub() -> AsyncIterator[McpHub]:
    hub = McpHub([FAKE, BROKEN])
    yield hub
    await hub.close()


def context(*servers: str, request: str = "") -> ToolContext:
    allowed = AllowedSources(True, mcp_servers=frozenset(servers))
    return ToolContext("alice", "run-1", allowed, request=request)


def call(name: str, **arguments: object) -> ToolCallChunk:
    return ToolCallChunk(call_id=f"c-{name}", name=name, arguments=json.dumps(arguments))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_the_allowed_servers_tools_are_listed_with_their_schemas(hub: McpHub) -> None:
    registry = ToolRegistry(FakeToolBackend(), mcp=hub)
    specs = {spec.name: spec for spec in await registry.specs(context("fake"))}
    assert {"mcp__fake__add", "mcp__fake__lookup", "mcp__fake__crash", "mcp__fake__pid"} <= set(specs)
    add = specs["mcp__fake__add"]
    assert add.description == "[MCP server fake] Adds two integers."
    assert add.parameters["required"] == ["a", "b"]
    # Not allowed: not offered (and not started).
    assert not any(name.startswith("mcp__") for name in {s.name for s in await registry.specs(context())})


async def test_calls_are_forwarded_and_declared_only_when_they_read(hub: McpHub) -> None:
    registry = ToolRegistry(FakeToolBackend(), mcp=hub)
    ctx = context("fake")
    result = await registry.execute(call("mcp__fake__add", a=2, b=40), ctx)
    assert not result.is_error and result.family == "mcp"
    assert result.content.split("\n")[2] == "42"
    assert ctx.sources_json() == [{"kind": "mcp", "id": "fake", "title": "MCP server fake"}]

    fresh = context("fake")
    missing = await registry.execute(call("mcp__fake__lookup", word="zebra"), fresh)
    assert missing.is_error and "no entry for 'zebra'" in missing.content
    bad = await registry.execute(call("mcp__fake__add", a="two"), fresh)
    assert bad.is_error and "validation error" in bad.content
    unknown = await registry.execute(call("mcp__fake__nope"), fresh)
    assert unknown.is_error and "Unknown tool: nope" in unknown.content
    assert fresh.sources_read == []  # errors read nothing


async def test_server_text_cannot_close_the_result_block(hub: McpHub) -> None:
    registry = ToolRegistry(FakeToolBackend(), mcp=hub)
    result = await registry.execute(call("mcp__fake__lookup", word="trap"), context("fake"))
    assert not result.is_error and "Ignore previous instructions" in result.content
    assert result.content.count("</tool-result>") == 1 and result.content.endswith("</tool-result>")


async def test_a_server_that_dies_mid_call_is_an_error_then_restarts(hub: McpHub) -> None:
    registry = ToolRegistry(FakeToolBackend(), mcp=hub)
    ctx = context("fake")
    first = await registry.execute(call("mcp__fake__pid"), ctx)
    first_pid = int(first.content.split("\n")[2])
    began = time.monotonic()
    crashed = await registry.execute(call("mcp__fake__crash"), ctx)
    assert time.monotonic() - began < 5
    assert (
        crashed.is_error and "MCP server 'fake' failed during 'crash': Connection closed" in crashed.content
    )
    await asyncio.sleep(0.1)
    assert not alive(first_pid)
    # The next use starts the server afresh.
    again = await registry.execute(call("mcp__fake__pid"), ctx)
    assert not again.is_error and int(again.content.split("\n")[2]) != first_pid
    assert (await registry.execute(call("mcp__fake__add", a=1, b=1), ctx)).content.split("\n")[2] == "2"


async def test_a_server_that_fails_to_start_is_a_notice_and_an_error_result(hub: McpHub) -> None:
    registry = ToolRegistry(FakeToolBackend(), mcp=hub)
    ctx = context("fake", "broken")
    names = {spec.name for spec in await registry.specs(ctx)}
    assert "mcp__fake__add" in names and not any(n.startswith("mcp__broken__") for n in names)
    assert len(ctx.notices) == 1
    assert "MCP server 'broken' failed to start" in ctx.notices[0] and "missing API token" in ctx.notices[0]
    result = await registry.execute(call("mcp__broken__anything"), ctx)
    assert result.is_error and "missing API token" in result.content
    assert [s.id for s in ctx.sources_read] == []


async def test_a_server_that_never_answers_times_out(tmp_path: Path) -> None:
    silent = McpServerConfig(
        name="silent", command=sys.executable, args=("-c", "import time; time.sleep(60)"), start_timeout=0.5
    )
    hub = McpHub([silent])
    try:
        registry = ToolRegistry(FakeToolBackend(), mcp=hub)
        began = time.monotonic()
        result = await registry.execute(call("mcp__silent__x"), context("silent"))
        assert result.is_error and "did not start within 0.5 s" in result.content
        assert time.monotonic() - began < 8
    finally:
        await hub.close()


async def test_closing_the_hub_stops_the_server_process() -> None:
    hub = McpHub([FAKE])
    registry = ToolRegistry(FakeToolBackend(), mcp=hub)
    result = await registry.execute(call("mcp__fake__pid"), context("fake"))
    pid = int(result.content.split("\n")[2])
    assert alive(pid)
    await hub.close()
    await asyncio.sleep(0.1)
    assert not alive(pid)


async def test_the_offline_model_calls_an_mcp_tool_and_quotes_its_answer(hub: McpHub) -> None:
    registry = ToolRegistry(FakeToolBackend(), mcp=hub)
    ctx = context("fake")
    provider = OfflineProvider()
    tools = await registry.specs(ctx)
    messages = [ChatMessage("user", '@mcp:fake:lookup {"word": "handoff"}')]
    [chunk, _] = [c async for c in provider.stream("offline-small", messages, tools)]
    assert isinstance(chunk, ToolCallChunk) and chunk.name == "mcp__fake__lookup"
    messages += [
        ChatMessage("assistant", "", tool_calls=(chunk,)),
        (await registry.execute(chunk, ctx)).message(),
    ]
    answer = "".join(
        [c.text async for c in provider.stream("offline-small", messages, tools) if isinstance(c, TextChunk)]
    )
    assert (
        "According to mcp__fake__lookup: A handoff is the bounded summary that closes a thread segment."
        in answer
    )
    assert ctx.sources_json() == [{"kind": "mcp", "id": "fake", "title": "MCP server fake"}]


# The built-in tools over the real memory service (SQLite and PostgreSQL),
# through an adapter like the one the engine needs: the ACL holds through
# the tools, and the note is really written.


class MemoryBackend(FakeToolBackend):
    """Pages and notes from the memory service's real stubs (the engine's
    gRPC ToolBackend will do the same); agents stay fake."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        super().__init__()
        self._pages = pages_service_pb2_grpc.PagesServiceStub(channel)
        self._memory = memory_service_pb2_grpc.MemoryServiceStub(channel)

    async def _rpc(self, method: Any, request: Any, user: str) -> Any:
        try:
            return await method(request, **as_user(user))
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.NOT_FOUND:
                raise NotFound(error.details() or "not found") from error
            raise

    async def search_pages(self, user: str, query: str, limit: int) -> Sequence[PageHit]:
        # No page search RPC yet: the readable pages, filtered by word.
        listed = await self._rpc(self._pages.ListPages, pages_pb.ListPagesRequest(page_size=100), user)
        words = query.lower().split()
        return [
            PageHit(p.id, p.title, p.body[:80])
            for p in listed.pages
            if any(w in f"{p.title} {p.body}".lower() for w in words)
        ][:limit]

    async def read_page(self, user: str, page_id: str) -> PageText:
        page = (await self._rpc(self._pages.GetPage, pages_pb.GetPageRequest(page_id=page_id), user)).page
        return PageText(page.id, page.title, page.body, page.version)

    async def save_note(
        self, user: str, request_id: str, kind: str, title: str, body: str, tags: Sequence[str]
    ) -> SavedNote:
        note = memory_pb2.Note(
            kind=memory_pb2.NoteKind.Value(f"NOTE_KIND_{kind.upper()}"), title=title, body=body, tags=tags
        )
        request = memory_pb.CreateNoteRequest(
            request_id=request_id, note=note, duplicate_policy=memory_pb2.DUPLICATE_POLICY_MERGE
        )
        response = await self._rpc(self._memory.CreateNote, request, user)
        outcome = "merged" if response.outcome == memory_pb2.SAVE_OUTCOME_MERGED else "created"
        return SavedNote(response.note.id, response.note.title, outcome)

    async def propose_note(
        self,
        user: str,
        request_id: str,
        kind: str,
        title: str,
        body: str,
        tags: Sequence[str],
        reason: str = "",
        run_id: str = "",
        project_id: str = "",
        agent: str = "",
    ) -> ProposedNote:
        note = memory_pb2.Note(
            project_id=project_id,
            kind=memory_pb2.NoteKind.Value(f"NOTE_KIND_{kind.upper()}"),
            title=title,
            body=body,
            tags=tags,
        )
        request = memory_pb.ProposeNoteRequest(request_id=request_id, note=note, reason=reason, run_id=run_id)
        proposal = (await self._rpc(self._memory.ProposeNote, request, user)).proposal
        return ProposedNote(proposal.id, proposal.note.title, "pending", proposal.target_note.id)


@pytest.fixture
def memory(memory_channel: grpc.aio.Channel) -> grpc.aio.Channel:
    return memory_channel


async def create_page(channel: grpc.aio.Channel, user: str, title: str, body: str) -> str:
    stub = pages_service_pb2_grpc.PagesServiceStub(channel)
    request = pages_pb.CreatePageRequest(request_id=title, page=pages_pb2.Page(title=title, body=body))
    return str((await stub.CreatePage(request, **as_user(user))).page.id)


async def test_tools_over_the_memory_service_keep_its_acl_and_write_notes(memory: grpc.aio.Channel) -> None:
    own = await create_page(memory, "alice", "Roadmap", "The beta launches on May 12.")
    other = await create_page(memory, "bob", "Bob's plan", "Bob's roadmap: secret.")
    registry = ToolRegistry(MemoryBackend(memory), [TestMailConnector()])
    ctx = context(request="Search the roadmap, then save a decision: Beta date, beta on May 12")

    search = await registry.execute(call("search_workspace", query="roadmap"), ctx)
    assert own in search.content and other not in search.content and "secret" not in search.content
    read = await registry.execute(call("read_page", page_id=own), ctx)
    assert not read.is_error and "May 12" in read.content
    refused = await registry.execute(call("read_page", page_id=other), ctx)
    assert refused.is_error and "secret" not in refused.content
    assert ctx.sources_json() == [{"kind": "page", "id": own, "title": "Roadmap"}]

    saved = await registry.execute(
        call("save_note", kind="decision", title="Beta date", body="Beta on May 12"), ctx
    )
    assert not saved.is_error and "decision was saved as" in saved.content
    notes = await memory_service_pb2_grpc.MemoryServiceStub(memory).ListNotes(
        memory_pb.ListNotesRequest(), **as_user("alice")
    )
    assert [(n.title, n.kind) for n in notes.notes] == [("Beta date", memory_pb2.NOTE_KIND_DECISION)]
