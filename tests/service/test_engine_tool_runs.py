"""Whole runs through the tool loop (StartRun over gRPC, offline model):
the conversation's allowed sources decide what is searched or read, each
tool call is a named step and every read lands in the run's
sources, an MCP server over stdio is called, an agent is asked, and the
step budget counts tool calls."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from services.engine.models import AgentRun
from services.engine.repository import RunsRepository
from services.shared.db import create_engine, session_factory
from switchboard.engine.v1 import engine_pb2, engine_service_pb2
from switchboard.memory.v1 import pages_pb2, pages_service_pb2
from switchboard.threads.v1 import threads_pb2, threads_service_pb2
from tests.conftest import DatabaseFactory
from tests.service.harness import as_user
from tests.service.system import System, collect, system

ROOT = Path(__file__).resolve().parents[2]
USER = as_user("alice")
MCP = [
    {"name": "calc", "command": sys.executable, "args": ["-m", "tests.fakes.mcp_server"], "cwd": str(ROOT)}
]


@pytest.fixture
async def sb(make_database: DatabaseFactory) -> AsyncIterator[System]:
    async with system(
        make_database, connectors="testmail", mcp_servers_json=json.dumps(MCP)
    ) as running_system:
        yield running_system


async def run(
    sb: System, text: str, allowed: threads_pb2.AllowedSources, budget: engine_pb2.Budget | None = None
) -> tuple[list[engine_pb2.RunEvent], engine_pb2.Run]:
    created = await sb.threads.CreateConversation(
        threads_service_pb2.CreateConversationRequest(allowed_sources=allowed), **USER
    )
    request = engine_service_pb2.StartRunRequest(
        conversation_id=created.conversation.id, message=text, surface=engine_pb2.SURFACE_CHAT, budget=budget
    )
    events = await collect(sb.engine.StartRun(request, metadata=USER["metadata"], timeout=60))
    record = await sb.engine.GetRun(engine_service_pb2.GetRunRequest(run_id=events[0].run_id), **USER)
    return events, record.run


def steps(events: list[engine_pb2.RunEvent]) -> list[str]:
    return [e.step.key for e in events if e.WhichOneof("kind") == "step" and e.step.status == 1]


async def test_an_unticked_connector_is_neither_searched_nor_read(sb: System) -> None:
    """With the mailbox ticked the answer comes from it and the
    sources list it; unticked, the same request reads nothing from it."""
    ticked, record = await run(
        sb, "check my mail for invoice", threads_pb2.AllowedSources(workspace=True, connectors=["testmail"])
    )
    assert "tools.connectors" in steps(ticked)
    assert "4711" in ticked[-1].final.text
    assert ("connector", "testmail") in {(s.kind, s.id) for s in record.sources}

    unticked, record = await run(sb, "check my mail for invoice", threads_pb2.AllowedSources(workspace=True))
    assert not [k for k in steps(unticked) if k.startswith("tools.")]
    assert "4711" not in unticked[-1].final.text
    assert "connector" not in {s.kind for s in record.sources}


async def test_only_pages_actually_read_are_sources(sb: System) -> None:
    for title, body in [
        ("Deploy rules", "Deploys happen on Tuesday at noon."),
        ("Lunch", "Pizza on Friday."),
    ]:
        page = pages_pb2.Page(title=title, body=body)
        await sb.pages.CreatePage(pages_service_pb2.CreatePageRequest(request_id=title, page=page), **USER)
    events, record = await run(
        sb, "search the workspace for deploy", threads_pb2.AllowedSources(workspace=True)
    )
    assert "tools.workspace" in steps(events)
    titles = {s.title for s in record.sources if s.kind == "page"}
    assert titles == {"Deploy rules"}  # the lunch page was available, not read


async def test_an_mcp_server_is_called_over_stdio_when_allowed(sb: System) -> None:
    allowed = threads_pb2.AllowedSources(workspace=True, mcp_servers=["calc"])
    events, record = await run(sb, '@mcp:calc:add {"a": 2, "b": 40}', allowed)
    assert "tools.mcp" in steps(events) and "42" in events[-1].final.text
    assert ("mcp", "calc") in {(s.kind, s.id) for s in record.sources}


async def test_the_agent_asks_another_agent(sb: System) -> None:
    agent = threads_pb2.Agent(id="qa", display_name="QA", model="offline-fast")
    await sb.threads.CreateAgent(threads_service_pb2.CreateAgentRequest(agent=agent), **USER)
    events, record = await run(
        sb, "ask qa: is the login flow tested?", threads_pb2.AllowedSources(workspace=True)
    )
    assert "tools.agents" in steps(events)
    assert "login flow" in events[-1].final.text
    assert "agent" in {s.kind for s in record.sources}
    # The nested ask is a run of qa whose parent is the asking run.
    engine = create_engine(sb.database_urls["engine"])
    try:
        async with session_factory(engine)() as session:
            nested = (await session.exec(select(AgentRun).where(AgentRun.agent_id == "qa"))).one()
    finally:
        await engine.dispose()
    assert nested.parent_run_id == record.id and nested.surface == "agent"


async def test_tool_calls_count_against_the_step_budget(sb: System) -> None:
    allowed = threads_pb2.AllowedSources(workspace=True, connectors=["testmail"])
    events, record = await run(sb, "check my mail for invoice", allowed, engine_pb2.Budget(max_steps=1))
    assert events[-1].error.code == "BUDGET_EXCEEDED" and "step budget" in events[-1].error.message
    assert record.status == engine_pb2.RUN_STATUS_BUDGET_EXCEEDED
    # Two steps: the model's call and the tool's; the answer would be the third.
    events, record = await run(sb, "check my mail for invoice", allowed, engine_pb2.Budget(max_steps=2))
    assert record.status == engine_pb2.RUN_STATUS_BUDGET_EXCEEDED
    actions, _ = await journal(sb, record.id)
    assert [a.tool for a in actions] == ["query_connector"]  # what it did is kept


async def journal(sb: System, run_id: str) -> tuple[list[Any], list[Any]]:
    engine = create_engine(sb.database_urls["engine"])
    try:
        actions, skills = await RunsRepository(engine).journal(run_id)
        return list(actions), list(skills)
    finally:
        await engine.dispose()


async def test_each_tool_call_is_an_action_event_and_a_journal_row(sb: System) -> None:
    allowed = threads_pb2.AllowedSources(workspace=True, connectors=["testmail"])
    events, record = await run(sb, "check my mail for invoice", allowed)
    (action,) = [e.action for e in events if e.WhichOneof("kind") == "action"]
    assert (action.tool, action.family, action.status) == ("query_connector", "connectors", "ok")
    actions, _ = await journal(sb, record.id)
    assert [(a.tool, a.family, a.status, a.user_id) for a in actions] == [
        ("query_connector", "connectors", "ok", "alice")
    ]


async def test_skills_applied_are_recorded_with_their_invocation(sb: System) -> None:
    created = await sb.threads.CreateConversation(threads_service_pb2.CreateConversationRequest(), **USER)
    request = engine_service_pb2.StartRunRequest(
        conversation_id=created.conversation.id, message="Hola, ¿qué tal?", forced_skills=["translate"]
    )
    events = await collect(sb.engine.StartRun(request, metadata=USER["metadata"], timeout=60))
    _, skills = await journal(sb, events[0].run_id)
    assert [(s.name, s.invocation) for s in skills] == [("translate", "manual")]


async def test_a_mentioned_page_is_read_once_even_when_it_is_the_instruction_page(sb: System) -> None:
    page = pages_pb2.Page(title="Deploy rules", body="Deploys happen on Tuesday at noon.")
    rules = (
        await sb.pages.CreatePage(pages_service_pb2.CreatePageRequest(request_id="r", page=page), **USER)
    ).page
    active = await sb.pages.CreateInstructionPage(
        pages_service_pb2.CreateInstructionPageRequest(request_id="i"), **USER
    )
    text = f"Summarise @page:{rules.id} with my rules @page:{active.page.id}"
    _, record = await run(sb, text, threads_pb2.AllowedSources(workspace=True))
    layers = {layer.key: layer for layer in record.layers}
    assert layers["working_context"].present and layers["instruction_page"].present
    page_sources = [s.id for s in record.sources if s.kind == "page"]
    assert sorted(page_sources) == sorted([rules.id, active.page.id])  # each once
    # Without the workspace allowed, a mention reads nothing.
    _, record = await run(sb, f"Summarise @page:{rules.id}", threads_pb2.AllowedSources(workspace=False))
    assert rules.id not in {s.id for s in record.sources}
