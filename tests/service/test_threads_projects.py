"""Agents belong to a project: the threads service with the real memory
service beside it (ProjectsService, the one source of truth for membership),
on SQLite and PostgreSQL. The project's viewers read an agent's thread, its
editors and owners ask it; membership changes count at the next call."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest
from alembic import command
from sqlalchemy import Connection, text

from services.memory.server import build_server as build_memory
from services.memory.settings import MemorySettings
from services.shared.bootstrap import RunningService
from services.shared.db import create_engine
from services.shared.migrations import alembic_config, upgrade_to_head
from services.shared.projects import personal_project_id
from services.threads.server import build_server as build_threads
from services.threads.settings import ThreadsSettings
from switchboard.memory.v1 import (
    memory_service_pb2,
    memory_service_pb2_grpc,
    projects_pb2,
    projects_service_pb2,
    projects_service_pb2_grpc,
)
from switchboard.threads.v1 import threads_pb2, threads_service_pb2_grpc
from switchboard.threads.v1 import threads_service_pb2 as pb
from tests.service.harness import as_user, expect_error, running

MIGRATIONS = Path(__file__).parents[2] / "services" / "threads" / "migrations"
Stub = threads_service_pb2_grpc.ThreadsServiceStub
Projects = projects_service_pb2_grpc.ProjectsServiceStub
VIEWER, EDITOR = projects_pb2.PROJECT_ROLE_VIEWER, projects_pb2.PROJECT_ROLE_EDITOR
DENIED = (grpc.StatusCode.PERMISSION_DENIED, "ERROR_REASON_PERMISSION_DENIED")
MISSING = (grpc.StatusCode.NOT_FOUND, "ERROR_REASON_NOT_FOUND")


@pytest.fixture
async def memory(memory_settings: MemorySettings) -> AsyncIterator[tuple[RunningService, grpc.aio.Channel]]:
    async with running(build_memory, memory_settings) as service:
        yield service


@pytest.fixture
def threads_options(memory: tuple[RunningService, grpc.aio.Channel]) -> dict[str, Any]:
    """The threads service asks this memory service who is a member of what."""
    return {"memory_address": f"127.0.0.1:{memory[0].port}"}


@pytest.fixture
def stub(threads_channel: grpc.aio.Channel) -> Stub:
    return Stub(threads_channel)


@pytest.fixture
def projects(memory: tuple[RunningService, grpc.aio.Channel]) -> Projects:
    return Projects(memory[1])


async def apollo(projects: Projects, **members: int) -> None:
    """alice's project "apollo", with ``members`` (user: role)."""
    project = projects_pb2.Project(id="apollo", display_name="Apollo")
    request = projects_service_pb2.CreateProjectRequest(project=project)
    await projects.CreateProject(request, **as_user("alice"))
    for user, role in members.items():
        await set_role(projects, user, role)


async def set_role(projects: Projects, user: str, role: int) -> None:
    member = projects_pb2.ProjectMember(project_id="apollo", user_id=user, role=role)  # type: ignore[arg-type]
    await projects.SetProjectMember(
        projects_service_pb2.SetProjectMemberRequest(member=member), **as_user("alice")
    )


async def create(stub: Stub, user: str, agent_id: str, project_id: str = "") -> threads_pb2.Agent:
    agent = threads_pb2.Agent(id=agent_id, project_id=project_id)
    return (await stub.CreateAgent(pb.CreateAgentRequest(agent=agent), **as_user(user))).agent


def ensure(stub: Stub, user: str, agent_id: str) -> Any:
    return stub.EnsureAgentThread(pb.EnsureAgentThreadRequest(target_agent_id=agent_id), **as_user(user))


def read(stub: Stub, user: str, agent_id: str) -> Any:
    view = pb.ListEntriesRequest.ForAgent(agent_id=agent_id)
    return stub.ListEntries(pb.ListEntriesRequest(for_agent=view), **as_user(user))


def ask(stub: Stub, user: str, thread_id: str, text: str) -> Any:
    entry = threads_pb2.Entry(
        requester="main", target="qa", role=threads_pb2.ROLE_USER, source="agent:main", content=text
    )
    return stub.AppendEntries(pb.AppendEntriesRequest(thread_id=thread_id, entries=[entry]), **as_user(user))


async def test_an_agent_goes_into_its_creators_personal_project_by_default(stub: Stub) -> None:
    created = await create(stub, "alice", "qa")
    assert created.project_id == personal_project_id("alice") and created.owner == "alice"
    for name in ("default", "personal"):
        named = await create(stub, "bob", f"qa-{name}", name)
        assert named.project_id == personal_project_id("bob")
    got = await stub.GetAgent(pb.GetAgentRequest(agent_id="qa"), **as_user("bob"))
    assert got.agent.project_id == personal_project_id("alice")  # the registry is visible to all


async def test_creating_an_agent_in_a_project_needs_its_editor_or_owner(
    stub: Stub, projects: Projects
) -> None:
    await apollo(projects, bob=VIEWER, carol=EDITOR)
    error = await expect_error(create(stub, "bob", "qa", "apollo"), *DENIED)
    assert "viewer" in (error.details() or "") and "editors and owners" in (error.details() or "")
    await expect_error(create(stub, "dave", "qa", "apollo"), *MISSING)  # not a member: as if missing
    await expect_error(create(stub, "dave", "qa", "nowhere"), *MISSING)
    await expect_error(
        create(stub, "carol", "qa", "not a project!"),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    assert (await create(stub, "carol", "qa", "apollo")).project_id == "apollo"
    assert (await create(stub, "alice", "architect", "apollo")).project_id == "apollo"
    got = await stub.GetAgent(pb.GetAgentRequest(agent_id="qa"), **as_user("bob"))
    assert got.agent.project_id == "apollo" and got.agent.owner == "carol"
    # An agent of a shared project is its members' to see.
    await expect_error(stub.GetAgent(pb.GetAgentRequest(agent_id="qa"), **as_user("dave")), *MISSING)


async def test_list_agents_filters_by_project(stub: Stub, projects: Projects) -> None:
    await apollo(projects, bob=EDITOR)
    await create(stub, "alice", "architect", "apollo")
    await create(stub, "bob", "qa", "apollo")
    await create(stub, "bob", "notes")
    await create(stub, "alice", "mine")

    async def listed(user: str, project_id: str = "", page_size: int = 0) -> list[str]:
        ids, token = [], ""
        while True:
            request = pb.ListAgentsRequest(project_id=project_id, page_size=page_size, page_token=token)
            page = await stub.ListAgents(request, **as_user(user))
            ids += [a.id for a in page.agents]
            assert all(a.project_id for a in page.agents)
            token = page.next_page_token
            if not token:
                return ids

    assert await listed("bob", "apollo", page_size=1) == ["architect", "qa"]
    assert await listed("bob") == ["architect", "mine", "notes", "qa"]
    # carol is no member of apollo: its agents are not hers to see.
    assert await listed("carol") == ["mine", "notes"]
    assert await listed("carol", "apollo") == []
    assert await listed("bob", "personal") == ["notes"]
    assert await listed("alice", "default") == ["mine"]
    assert await listed("alice", personal_project_id("bob")) == ["notes"]
    assert await listed("alice", "nowhere") == []


async def test_a_projects_viewers_read_an_agents_thread_and_its_editors_ask_it(
    stub: Stub, projects: Projects
) -> None:
    await apollo(projects, bob=VIEWER, carol=EDITOR)
    await create(stub, "carol", "qa", "apollo")
    thread = (await ensure(stub, "carol", "qa")).thread.id
    await ask(stub, "carol", thread, "Is the build green?")

    # bob, a viewer: reads the thread, its segments and sessions; never asks.
    assert [e.content for e in (await read(stub, "bob", "qa")).entries] == ["Is the build green?"]
    await stub.ListSegments(pb.ListSegmentsRequest(thread_id=thread), **as_user("bob"))
    await stub.ListProviderSessions(pb.ListProviderSessionsRequest(agent_thread_id=thread), **as_user("bob"))
    error = await expect_error(ensure(stub, "bob", "qa"), *DENIED)
    assert "viewer of project 'apollo'" in (error.details() or "")
    error = await expect_error(ask(stub, "bob", thread, "Ship it?"), *DENIED)
    assert "editors and owners ask it" in (error.details() or "")
    # alice owns the project (not the agent): she asks it.
    await ask(stub, "alice", thread, "Which tests fail?")
    # dave belongs to neither the agent nor its project: it reads like a
    # missing agent, everywhere.
    for call in (
        read(stub, "dave", "qa"),
        ensure(stub, "dave", "qa"),
        stub.GetAgent(pb.GetAgentRequest(agent_id="qa"), **as_user("dave")),
        stub.ListAgentMembers(pb.ListAgentMembersRequest(agent_id="qa"), **as_user("dave")),
        stub.ExportAgentThread(pb.ExportAgentThreadRequest(agent_id="qa"), **as_user("dave")),
    ):
        error = await expect_error(call, *MISSING)
        assert error.details() == "agent 'qa' not found"
    assert "qa" not in [
        a.id for a in (await stub.ListAgents(pb.ListAgentsRequest(), **as_user("dave"))).agents
    ]
    assert [a.id for a in (await stub.ListAgents(pb.ListAgentsRequest(), **as_user("bob"))).agents] == ["qa"]

    # Nothing is cached: a promotion and a removal count at the next call.
    await set_role(projects, "bob", EDITOR)
    await ensure(stub, "bob", "qa")
    await ask(stub, "bob", thread, "Ship it?")
    await projects.RemoveProjectMember(
        projects_service_pb2.RemoveProjectMemberRequest(project_id="apollo", user_id="bob"),
        **as_user("alice"),
    )
    await expect_error(read(stub, "bob", "qa"), *MISSING)


@pytest.mark.parametrize(
    ("activity", "detail"),
    [
        ("Je relis l'export des factures", "avant la livraison de mardi — étape 2/3"),
        ("Reviewing the invoice export", "before Tuesday's release — step 2/3"),
    ],
    ids=["fr", "en"],
)
async def test_an_agents_export_carries_its_live_state_for_those_who_may_read_it(
    stub: Stub,
    projects: Projects,
    memory: tuple[RunningService, grpc.aio.Channel],
    activity: str,
    detail: str,
) -> None:
    """The agent's entry in its project's live state, as memory holds it,
    is live_state.json of its export; read as the exporting user, so an
    agent member who is no member of the project gets the thread only."""
    await apollo(projects, bob=VIEWER, carol=EDITOR)
    await create(stub, "carol", "qa", "apollo")
    thread = (await ensure(stub, "carol", "qa")).thread.id
    await ask(stub, "carol", thread, "Où en est l'export ? / Where is the export?")

    def export(user: str) -> Any:
        return stub.ExportAgentThread(pb.ExportAgentThreadRequest(agent_id="qa"), **as_user(user))

    thread_files = ["agents/qa/log.jsonl", "agents/qa/providers.json"]
    assert [f.path for f in (await export("bob")).files] == thread_files  # qa says nothing yet

    live = memory_service_pb2_grpc.MemoryServiceStub(memory[1])
    for agent_id, doing in (("qa", activity), ("dev", "Something else")):
        await live.SetLiveState(
            memory_service_pb2.SetLiveStateRequest(
                project_id="apollo", agent_id=agent_id, activity=doing, detail=detail
            ),
            **as_user("carol"),
        )
    listed = await live.ListLiveState(
        memory_service_pb2.ListLiveStateRequest(project_id="apollo"), **as_user("bob")
    )
    entry = next(e for e in listed.entries if e.agent_id == "qa")

    def stamp(value: Any) -> str:
        return str(value.ToDatetime().strftime("%Y-%m-%dT%H:%M:%S.%fZ"))

    exported = await export("bob")
    assert [f.path for f in exported.files] == [*thread_files, "agents/qa/live_state.json"]
    content = exported.files[-1].content
    assert json.loads(content) == {
        "project_id": "apollo",
        "agent_id": "qa",
        "activity": activity,
        "detail": detail,
        "update_time": stamp(entry.update_time),
        "expire_time": stamp(entry.expire_time),
    }
    assert activity in content and detail in content  # as written, not escaped

    # dave may read the agent's thread (its member), not apollo's live state.
    await stub.AddAgentMember(pb.AddAgentMemberRequest(agent_id="qa", user_id="dave"), **as_user("carol"))
    assert [f.path for f in (await export("dave")).files] == thread_files


async def test_agent_members_keep_their_access_outside_the_project(stub: Stub) -> None:
    """An agent in its owner's personal project: the members its owner added
    still read and ask it (agent_members is a grant of its own)."""
    await create(stub, "alice", "qa")
    await stub.AddAgentMember(pb.AddAgentMemberRequest(agent_id="qa", user_id="bob"), **as_user("alice"))
    thread = (await ensure(stub, "bob", "qa")).thread.id
    await ask(stub, "bob", thread, "Hello")
    await expect_error(read(stub, "carol", "qa"), *DENIED)


async def test_without_memory_agents_go_only_into_personal_projects(db_url: str) -> None:
    settings = ThreadsSettings(port=0, database_url=db_url)
    async with running(build_threads, settings) as (_, channel):
        stub = Stub(channel)
        assert (await create(stub, "alice", "qa")).project_id == personal_project_id("alice")
        await expect_error(
            create(stub, "alice", "dev", "apollo"),
            grpc.StatusCode.FAILED_PRECONDITION,
            "ERROR_REASON_FAILED_PRECONDITION",
        )


async def test_upgrade_puts_existing_agents_in_their_owners_personal_project(db_url: str) -> None:
    engine = create_engine(db_url)
    try:
        config = alembic_config(MIGRATIONS, "threads")

        def to_0006(connection: Connection) -> None:
            config.attributes["connection"] = connection
            command.upgrade(config, "threads_0006_retention")

        async with engine.begin() as connection:
            await connection.run_sync(to_0006)
            await connection.execute(
                text(
                    "INSERT INTO agents (id, display_name, persona, provider_id, model, injection_strategy,"
                    " owner_id, create_time, update_time) VALUES"
                    " ('qa', 'QA', '', '', '', 0, 'alice', :now, :now),"
                    " ('dev', 'Dev', '', '', '', 0, 'alice', :now, :now),"
                    " ('old', 'Old', '', '', '', 0, '', :now, :now)"
                ),
                {"now": datetime(2026, 7, 2, 10, tzinfo=UTC)},
            )
        await upgrade_to_head(engine, MIGRATIONS, "threads")
        async with engine.connect() as connection:
            rows = (await connection.execute(text("SELECT id, project_id FROM agents ORDER BY id"))).all()
    finally:
        await engine.dispose()
    alice = personal_project_id("alice")
    assert [tuple(row) for row in rows] == [("dev", alice), ("old", ""), ("qa", alice)]


async def test_an_ownerless_agent_moves_into_its_claimers_personal_project(db_url: str) -> None:
    engine = create_engine(db_url)
    try:
        await upgrade_to_head(engine, MIGRATIONS, "threads")
        async with engine.begin() as connection:
            await connection.execute(
                text(
                    "INSERT INTO agents (id, display_name, persona, provider_id, model, injection_strategy,"
                    " owner_id, project_id, create_time, update_time) VALUES"
                    " ('old', 'Old', '', '', '', 0, '', '', :now, :now)"
                ),
                {"now": datetime(2026, 7, 2, 10, tzinfo=UTC)},
            )
    finally:
        await engine.dispose()
    async with running(build_threads, ThreadsSettings(port=0, database_url=db_url)) as (_, channel):
        stub = Stub(channel)
        got = await stub.GetAgent(pb.GetAgentRequest(agent_id="old"), **as_user("bob"))
        assert got.agent.project_id == "" and got.agent.owner == ""  # a registry read claims nothing
        await ensure(stub, "bob", "old")
        got = await stub.GetAgent(pb.GetAgentRequest(agent_id="old"), **as_user("alice"))
        assert got.agent.project_id == personal_project_id("bob") and got.agent.owner == "bob"
