"""AskAgent: agents asking agents on one shared thread per agent, provider
swaps through handoff summaries, and what happens to a
request for a thread that is busy."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest
from google.protobuf.field_mask_pb2 import FieldMask

from services.engine.collaborators import Collaborators
from services.engine.models import AgentRun
from services.engine.repository import RunsRepository
from services.shared.db import create_engine
from services.shared.errors import error_info
from switchboard.engine.v1 import engine_pb2, engine_service_pb2
from switchboard.memory.v1 import handoff_service_pb2, memory_pb2, memory_service_pb2
from switchboard.threads.v1 import threads_pb2, threads_service_pb2
from tests.conftest import DatabaseFactory
from tests.fakes.llm_server import FakeServer, openai_app, serve
from tests.service.harness import as_user, expect_error
from tests.service.system import System, collect, system

USER = "alice"


@pytest.fixture(scope="module")
def remote_server() -> Iterator[FakeServer]:
    with serve(openai_app) as server:
        yield server


@pytest.fixture
def remote(remote_server: FakeServer) -> FakeServer:
    remote_server.script.reset()
    return remote_server


@pytest.fixture(scope="module")
def second_server() -> Iterator[FakeServer]:
    """A second provider's endpoint, for agents pinned to one of two."""
    with serve(openai_app) as server:
        yield server


@pytest.fixture
def threads_settings() -> dict[str, Any]:
    return {}


@pytest.fixture
async def sb(
    make_database: DatabaseFactory, remote: FakeServer, threads_settings: dict[str, Any]
) -> AsyncIterator[System]:
    providers = [{"name": "remote", "kind": "openai", "base_url": f"{remote.url}/v1"}]
    models = [
        {"id": "offline-fast", "provider": "offline", "model": "switchboard-offline-fast", "profile": "fast"},
        {"id": "remote-model", "provider": "remote", "model": "model-x", "profile": "balanced"},
    ]
    async with system(
        make_database,
        providers_json=json.dumps(providers),
        router_settings={"models_json": json.dumps(models)},
        threads_settings=threads_settings,
        offline_token_delay=0.02,
    ) as running_system:
        for agent in ("main", "architect", "qa"):
            spec = threads_pb2.Agent(
                id=agent, display_name=agent.title(), persona=f"The {agent} agent.", model="offline-fast"
            )
            await running_system.threads.CreateAgent(
                threads_service_pb2.CreateAgentRequest(agent=spec), **as_user(USER)
            )
        yield running_system


def ask(
    sb: System,
    requester: str,
    target: str,
    text: str,
    policy: Any = engine_service_pb2.BUSY_POLICY_UNSPECIFIED,
    request_id: str = "",
    user: str = USER,
) -> grpc.aio.UnaryStreamCall:
    request = engine_service_pb2.AskAgentRequest(
        request_id=request_id, requester=requester, target_agent_id=target, message=text, busy_policy=policy
    )
    return sb.engine.AskAgent(request, metadata=as_user(user)["metadata"], timeout=60)


async def thread_entries(sb: System, agent: str) -> list[threads_pb2.Entry]:
    thread = await sb.threads.EnsureAgentThread(
        threads_service_pb2.EnsureAgentThreadRequest(target_agent_id=agent), **as_user(USER)
    )
    listed = await sb.threads.ListEntries(
        threads_service_pb2.ListEntriesRequest(thread_id=thread.thread.id, page_size=200), **as_user(USER)
    )
    return list(listed.entries)


async def live_sessions(sb: System, agent: str) -> list[threads_pb2.ProviderSession]:
    thread = await sb.threads.EnsureAgentThread(
        threads_service_pb2.EnsureAgentThreadRequest(target_agent_id=agent), **as_user(USER)
    )
    listed = await sb.threads.ListProviderSessions(
        threads_service_pb2.ListProviderSessionsRequest(agent_thread_id=thread.thread.id), **as_user(USER)
    )
    return list(listed.sessions)


async def test_a_fact_given_to_qa_by_main_is_there_when_architect_asks(sb: System) -> None:
    """What main told qa is in qa's one thread, so qa knows it when architect
    asks: the thread belongs to the target agent, not to a pair."""
    given = await collect(ask(sb, "main", "qa", "Keep this release token for the team: ZX-42-QA"))
    assert given[-1].WhichOneof("kind") == "final"
    answer = await collect(ask(sb, "architect", "qa", "Which release token did main give you?"))
    assert answer[-1].WhichOneof("kind") == "final"
    assert "ZX-42-QA" in answer[-1].final.text

    entries = await thread_entries(sb, "qa")
    assert [(e.requester, e.target, e.role) for e in entries] == [
        ("main", "qa", threads_pb2.ROLE_USER),
        ("main", "qa", threads_pb2.ROLE_ASSISTANT),
        ("architect", "qa", threads_pb2.ROLE_USER),
        ("architect", "qa", threads_pb2.ROLE_ASSISTANT),
    ]
    # Question and answer share their correlation id; the two asks do not.
    assert entries[0].correlation_id == entries[1].correlation_id != entries[2].correlation_id
    run = await sb.engine.GetRun(engine_service_pb2.GetRunRequest(run_id=answer[0].run_id), **as_user(USER))
    assert run.run.agent_id == "qa" and run.run.surface == engine_pb2.SURFACE_AGENT
    # An ask routes its model only: no Skill Router record.
    decision = run.run.router_decision
    assert not decision.HasField("skills") and not decision.model.fallback
    assert decision.model.model.model == run.run.model
    assert [s.provider_id for s in await live_sessions(sb, "qa")] == ["offline"]


async def test_switching_provider_starts_the_new_one_from_handoff_and_transcript(
    sb: System, remote: FakeServer
) -> None:
    context = memory_pb2.ProjectContext(project_id="default", body="Every release needs a QA sign-off.")
    await sb.memory.UpdateProjectContext(
        memory_service_pb2.UpdateProjectContextRequest(context=context), **as_user(USER)
    )
    await collect(ask(sb, "main", "qa", "Keep this release token for the team: ZX-42-QA"))
    update = threads_service_pb2.UpdateAgentRequest(
        agent=threads_pb2.Agent(id="qa", model="remote-model"), update_mask=FieldMask(paths=["model"])
    )
    await sb.threads.UpdateAgent(update, **as_user(USER))
    events = await collect(ask(sb, "architect", "qa", "Which release token did main give you?"))
    notices = [e.notice for e in events if e.WhichOneof("kind") == "notice"]
    assert [n.code for n in notices] == ["PROVIDER_SWITCHED"] and "offline" in notices[0].message
    assert events[-1].final.provider == "remote"
    # The new provider received the composed context: persona, the handoff
    # summary (checkpointed at the swap) and the thread's recent entries.
    system_prompt = remote.script.requests[0]["messages"][0]["content"]
    assert "The qa agent." in system_prompt and "Every release needs a QA sign-off." in system_prompt
    assert "# Handoff summary" in system_prompt and "Active requests by requester" in system_prompt
    assert "ZX-42-QA" in system_prompt
    assert [s.provider_id for s in await live_sessions(sb, "qa")] == ["remote"]  # one live session


async def test_concurrent_asks_queue_on_one_thread_with_one_session(sb: System) -> None:
    calls = [ask(sb, f"agent{i}", "qa", f"Question number {i} about deploys") for i in range(5)]
    results = await asyncio.gather(*(collect(call) for call in calls))
    assert all(events[-1].WhichOneof("kind") == "final" for events in results)
    entries = await thread_entries(sb, "qa")
    # Two runs never wrote at once: each answer directly follows its question.
    for question, answer in zip(entries[::2], entries[1::2], strict=True):
        assert question.role == threads_pb2.ROLE_USER and answer.role == threads_pb2.ROLE_ASSISTANT
        assert question.correlation_id == answer.correlation_id and answer.sequence == question.sequence + 1
    assert len(await live_sessions(sb, "qa")) == 1


async def test_the_run_that_commits_first_goes_first_whatever_its_stamp(
    make_database: DatabaseFactory,
) -> None:
    """Two runs of one thread, stamped in one order and inserted in the
    other (a run's request may be slower to reach its insert): the one
    committed first finds nothing ahead, the other finds it ahead — never
    both free, whichever the stamps say."""
    async with make_database("engine") as url:
        engine = create_engine(url)
        try:
            repo = RunsRepository(engine)
            stamped_first = AgentRun(id=str(uuid.uuid4()), user_id=USER, conversation_id="thread")
            stamped_later = AgentRun(id=str(uuid.uuid4()), user_id="bob", conversation_id="thread")
            assert stamped_first.started_at < stamped_later.started_at
            assert await repo.insert_run(stamped_later, b"later") is stamped_later
            assert await repo.insert_run(stamped_first, b"first") is stamped_first
            assert await repo.runs_ahead(stamped_later) == 0
            assert await repo.runs_ahead(stamped_first) == 1
            await repo.finish_run(stamped_later.id, {"status": "done", "error": None}, [])
            assert await repo.runs_ahead(stamped_first) == 0
        finally:
            await engine.dispose()


async def test_a_busy_thread_rejects_or_interrupts_on_request(sb: System) -> None:
    # Mallory is a member of qa (its owner let her in): she may ask it.
    await sb.threads.AddAgentMember(
        threads_service_pb2.AddAgentMemberRequest(agent_id="qa", user_id="mallory"), **as_user(USER)
    )
    slow = ask(sb, "main", "qa", "Write a long answer about everything we know")
    first = await slow.read()  # the run exists and is running
    # Another user shares the agent's thread but not its runs: a refusal does
    # not name the active run, and INTERRUPT queues behind it, cancelling nothing.
    refused = await expect_error(
        collect(ask(sb, "architect", "qa", "Mine?", engine_service_pb2.BUSY_POLICY_REJECT, user="mallory")),
        grpc.StatusCode.FAILED_PRECONDITION,
        "ERROR_REASON_FAILED_PRECONDITION",
    )
    assert first.event.run_id not in str(error_info(refused))
    foreign = ask(sb, "architect", "qa", "Me first", engine_service_pb2.BUSY_POLICY_INTERRUPT, user="mallory")
    queued = await foreign.read()
    running = await sb.engine.GetRun(
        engine_service_pb2.GetRunRequest(run_id=first.event.run_id), **as_user(USER)
    )
    assert running.run.status == engine_pb2.RUN_STATUS_RUNNING
    await expect_error(
        collect(ask(sb, "architect", "qa", "Quick one", engine_service_pb2.BUSY_POLICY_REJECT)),
        grpc.StatusCode.FAILED_PRECONDITION,
        "ERROR_REASON_FAILED_PRECONDITION",
    )
    interrupting = await collect(
        ask(sb, "architect", "qa", "Urgent one", engine_service_pb2.BUSY_POLICY_INTERRUPT)
    )
    rest = []
    while (response := await slow.read()) is not grpc.aio.EOF:
        rest.append(response.event)
    assert rest[-1].WhichOneof("kind") == "error" and rest[-1].error.code == "CANCELLED"
    assert interrupting[-1].WhichOneof("kind") == "final"
    cancelled = await sb.engine.GetRun(
        engine_service_pb2.GetRunRequest(run_id=first.event.run_id), **as_user(USER)
    )
    assert cancelled.run.status == engine_pb2.RUN_STATUS_CANCELLED
    # Mallory's run waited its turn and finished; hers was never cancelled.
    assert queued.event.WhichOneof("kind") == "run_started"
    last = queued
    while (response := await foreign.read()) is not grpc.aio.EOF:
        last = response
    assert last.event.WhichOneof("kind") == "final"


async def test_concurrent_rejecting_asks_on_an_idle_thread_start_one_run(sb: System) -> None:
    """REJECT is decided inside the run's insert: requests that arrive
    together cannot all find the thread idle and then queue behind each other."""

    async def first_event(index: int) -> str:
        call = ask(sb, "main", "qa", f"Write a long answer {index}", engine_service_pb2.BUSY_POLICY_REJECT)
        try:
            response = await call.read()
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.FAILED_PRECONDITION, error
            return "refused"
        call.cancel()  # the run goes on; this client does not follow it
        return str(response.event.WhichOneof("kind"))

    outcomes = await asyncio.gather(*(first_event(i) for i in range(20)))
    assert sorted(outcomes) == ["refused"] * 19 + ["run_started"]


async def test_bad_asks_are_refused_and_retries_do_not_ask_twice(sb: System) -> None:
    await expect_error(
        collect(ask(sb, "main", "nobody", "Hello?")), grpc.StatusCode.NOT_FOUND, "ERROR_REASON_NOT_FOUND"
    )
    await expect_error(
        collect(ask(sb, "", "qa", "Hello?")),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    once = await collect(ask(sb, "main", "qa", "Hello once", request_id="same"))
    again = await collect(ask(sb, "main", "qa", "Hello once", request_id="same"))
    assert once[0].run_id == again[0].run_id
    assert len(await thread_entries(sb, "qa")) == 2


async def use_remote_model(sb: System, agent: str) -> None:
    update = threads_service_pb2.UpdateAgentRequest(
        agent=threads_pb2.Agent(id=agent, model="remote-model"), update_mask=FieldMask(paths=["model"])
    )
    await sb.threads.UpdateAgent(update, **as_user(USER))


async def agent_thread_id(sb: System, agent: str) -> str:
    thread = await sb.threads.EnsureAgentThread(
        threads_service_pb2.EnsureAgentThreadRequest(target_agent_id=agent), **as_user(USER)
    )
    return str(thread.thread.id)


async def test_the_asked_model_reads_who_asked_and_who_answered(sb: System, remote: FakeServer) -> None:
    await use_remote_model(sb, "qa")
    remote.script.steps = ["say:We ship on Tuesday.", "say:I told main we ship on Tuesday."]
    await collect(ask(sb, "main", "qa", "When do we ship?"))
    await collect(ask(sb, "architect", "qa", "What did you tell main?"))
    system_prompt = remote.script.requests[-1]["messages"][0]["content"]
    assert system_prompt.startswith("You are one agent of a team")
    tail = system_prompt.split("# Recent entries of your thread since its last rotation (oldest first)\n")[1]
    lines = tail.split("\n")[:2]
    assert lines[0].startswith("- [thread #1, correlation ")
    assert lines[0].endswith("] main asked qa: When do we ship?")
    assert lines[1].startswith("- [thread #2, correlation ")
    assert lines[1].endswith("] qa answered main: We ship on Tuesday.")
    assert remote.script.requests[-1]["messages"][-1] == {
        "role": "user",
        "content": "architect asks: What did you tell main?",
    }


async def test_marked_answers_fill_the_handoff_sections_through_asks(sb: System, remote: FakeServer) -> None:
    """The three sections no entry kind used to fill: the question marks an
    objective, the answers mark a decision and a blocker, in both languages."""
    await use_remote_model(sb, "qa")
    remote.script.steps = [
        "say:Done.\nDecision: ship on Tuesday\nBlocker: the signing key is missing",
        "say:D'accord.\nDécision : geler les traductions lundi",
    ]
    await collect(ask(sb, "main", "qa", "Objective: release 2.0 this week. When do we ship?"))
    await collect(ask(sb, "architect", "qa", "Objectif : sortir la 2.0 en français aussi"))
    thread = await agent_thread_id(sb, "qa")
    summary = (
        await sb.handoff.CheckpointHandoff(
            handoff_service_pb2.CheckpointHandoffRequest(thread_id=thread), **as_user(USER)
        )
    ).summary
    sections = {section.title: list(section.lines) for section in summary.sections}
    assert "sortir la 2.0 en français aussi" in sections["Current objective"][0]
    assert [line.split(" (qa")[0] for line in sections["Recent decisions"]] == [
        "- ship on Tuesday",
        "- geler les traductions lundi",
    ]
    assert (
        sections["Blockers"][0].startswith("- [") and "the signing key is missing" in sections["Blockers"][0]
    )
    assert summary.summariser == "rules"


@pytest.mark.parametrize("threads_settings", [{"rotate_after_entries": 2}])
async def test_after_a_rotation_the_model_gets_the_summary_never_the_closed_segment(
    sb: System, remote: FakeServer
) -> None:
    await use_remote_model(sb, "qa")
    remote.script.steps = ["say:Decision: the release token is ZX-42-QA", "say:Noted."]
    await collect(ask(sb, "main", "qa", "Keep the release token ZX-42-QA"))  # 2 entries: rotation
    await collect(ask(sb, "architect", "qa", "Which release token?"))
    system_prompt = remote.script.requests[-1]["messages"][0]["content"]
    assert "# Recent entries" not in system_prompt  # the open segment was empty when asked
    summary = system_prompt.split("# Handoff summary\n")[1]
    assert "the release token is ZX-42-QA" in summary.split("## Recent decisions")[1]
    assert "main asked qa" not in system_prompt


def tool_names(body: dict[str, Any]) -> list[str]:
    return sorted(tool["function"]["name"] for tool in body.get("tools", []))


async def test_an_asked_agent_uses_tools_and_asks_another_agent_on_the_same_correlation(
    sb: System, remote: FakeServer
) -> None:
    await use_remote_model(sb, "qa")
    question = json.dumps({"agent": "architect", "message": "is the API frozen?"})
    remote.script.steps = [f"tool:ask_agent:{question}", "say:Architect answered; the API is frozen."]
    events = await collect(
        ask(sb, "main", "qa", "Ask architect: is the API frozen?", request_id="ask-frozen")
    )
    assert events[-1].final.text == "Architect answered; the API is frozen."
    first, second = remote.script.requests
    assert tool_names(first) == [
        "ask_agent",
        "live_state",
        "read_page",
        "save_note",
        "search_workspace",
        "set_live_state",
    ]
    result = second["messages"][-1]
    assert result["role"] == "tool" and "Architect answered:" in result["content"]
    assert "is the API frozen?" in result["content"]  # the offline architect echoes the question
    # The nested ask is on architect's thread, asked by qa, on main's correlation.
    (asked, answered) = await thread_entries(sb, "architect")
    qa_entries = await thread_entries(sb, "qa")
    assert (asked.requester, asked.target, asked.content) == ("qa", "architect", "is the API frozen?")
    assert asked.correlation_id == answered.correlation_id == qa_entries[0].correlation_id
    nested = await sb.engine.GetRun(engine_service_pb2.GetRunRequest(run_id=asked.run_id), **as_user(USER))
    assert nested.run.parent_run_id == events[0].run_id


async def test_each_run_of_a_nested_ask_reads_its_agent_once(
    sb: System, remote: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    await use_remote_model(sb, "qa")
    reads: list[str] = []
    get_agent = Collaborators.get_agent

    async def counted(self: Collaborators, user: str, agent_id: str) -> threads_pb2.Agent:
        reads.append(agent_id)
        return await get_agent(self, user, agent_id)

    monkeypatch.setattr(Collaborators, "get_agent", counted)
    question = json.dumps({"agent": "architect", "message": "is the API frozen?"})
    remote.script.steps = [f"tool:ask_agent:{question}", "say:Architect answered."]
    events = await collect(ask(sb, "main", "qa", "Ask architect: is the API frozen?"))
    assert events[-1].final.text == "Architect answered."
    # qa's run and the nested run on architect's thread: one read each.
    assert sorted(reads) == ["architect", "qa"]


async def test_asking_back_up_the_chain_is_refused_as_a_cycle(sb: System, remote: FakeServer) -> None:
    await use_remote_model(sb, "qa")
    back = json.dumps({"agent": "main", "message": "what is the plan?"})
    remote.script.steps = [f"tool:ask_agent:{back}", "say:I will not ask main back."]
    events = await collect(ask(sb, "main", "qa", "Ask main: what is the plan?"))
    assert events[-1].WhichOneof("kind") == "final"
    refused = remote.script.requests[1]["messages"][-1]["content"]
    assert 'status="error"' in refused and "main → qa → main" in refused and "cycle" in refused
    assert await thread_entries(sb, "main") == []  # nothing was asked


@pytest.mark.parametrize(
    "question", ["Quand livre-t-on la version 2 ?", "When do we ship version 2?"], ids=["fr", "en"]
)
async def test_without_the_router_an_ask_is_answered_by_the_fallback_model_with_one_notice(
    make_database: DatabaseFactory, remote: FakeServer, question: str
) -> None:
    """The router is optional to an ask as to a chat run: the ask goes on
    with the engine's fallback model (here the recording provider's) and
    the same composed context, and says so once."""
    providers = [{"name": "remote", "kind": "openai", "base_url": f"{remote.url}/v1"}]
    async with system(
        make_database, providers_json=json.dumps(providers), fallback_model="remote/model-fallback"
    ) as sb:
        persona = "Vérifie chaque livraison."
        spec = threads_pb2.Agent(id="qa", display_name="QA", persona=persona, model="auto")
        await sb.threads.CreateAgent(threads_service_pb2.CreateAgentRequest(agent=spec), **as_user(USER))
        await sb.services["router"].stop(None)
        remote.script.steps = ["say:Mardi. / Tuesday."]
        events = await collect(ask(sb, "main", "qa", question))

        assert events[-1].WhichOneof("kind") == "final", events[-1]
        assert events[-1].final.text == "Mardi. / Tuesday." and events[-1].final.model == "model-fallback"
        notices = [e.notice for e in events if e.WhichOneof("kind") == "notice"]
        assert [n.code for n in notices] == ["ROUTER_UNAVAILABLE"]
        (request,) = remote.script.requests
        assert request["model"] == "model-fallback"
        system_prompt = request["messages"][0]
        assert system_prompt["role"] == "system" and persona in system_prompt["content"]
        assert request["messages"][-1] == {"role": "user", "content": f"main asks: {question}"}
        run = (
            await sb.engine.GetRun(engine_service_pb2.GetRunRequest(run_id=events[0].run_id), **as_user(USER))
        ).run
        assert run.status == engine_pb2.RUN_STATUS_DONE and run.router_decision.model.fallback
        assert run.router_decision.model.model.model == "model-fallback"


@pytest.mark.parametrize("question", ["Et maintenant ?", "And now?"], ids=["fr", "en"])
async def test_a_router_blip_never_swaps_a_pinned_agents_provider(
    make_database: DatabaseFactory, remote: FakeServer, question: str
) -> None:
    """An agent pinned to a model asked while the router is down keeps the
    model its thread last ran on: no provider swap, no handoff, one notice."""
    providers = [{"name": "remote", "kind": "openai", "base_url": f"{remote.url}/v1"}]
    models = [{"id": "pinned-model", "provider": "remote", "model": "model-pinned", "profile": "strong"}]
    async with system(
        make_database,
        router_settings={"models_json": json.dumps(models)},
        providers_json=json.dumps(providers),
        fallback_model="offline/switchboard-offline-fast",
    ) as sb:
        spec = threads_pb2.Agent(id="qa", display_name="QA", model="pinned-model")
        await sb.threads.CreateAgent(threads_service_pb2.CreateAgentRequest(agent=spec), **as_user(USER))
        remote.script.steps = ["say:First answer."]
        first = await collect(ask(sb, "main", "qa", "Is the build green?"))
        assert first[-1].final.model == "model-pinned", first[-1]
        await sb.services["router"].stop(None)
        remote.script.steps = ["say:Still me."]
        events = await collect(ask(sb, "main", "qa", question))
        assert events[-1].WhichOneof("kind") == "final", events[-1]
        assert events[-1].final.text == "Still me." and events[-1].final.model == "model-pinned"
        assert [e.notice.code for e in events if e.WhichOneof("kind") == "notice"] == ["ROUTER_UNAVAILABLE"]
        assert [r["model"] for r in remote.script.requests] == ["model-pinned", "model-pinned"]
        run = (
            await sb.engine.GetRun(engine_service_pb2.GetRunRequest(run_id=events[0].run_id), **as_user(USER))
        ).run
        assert run.router_decision.model.fallback and run.provider == "remote"


async def test_an_agent_pinned_to_a_provider_runs_there_and_nowhere_else(
    make_database: DatabaseFactory, remote: FakeServer, second_server: FakeServer
) -> None:
    """Two providers, each a recording server; Auto alone picks alpha's
    model. The agent pinned to beta is answered by beta's endpoint (Auto
    among beta's models), the unpinned one by alpha's; a model of another
    provider is refused before any call; and without the router the pinned
    agent keeps beta, or fails saying why, never falling back to alpha."""
    beta = second_server
    beta.script.reset()
    providers = [
        {"name": "alpha", "kind": "openai", "base_url": f"{remote.url}/v1"},
        {"name": "beta", "kind": "openai", "base_url": f"{beta.url}/v1"},
    ]
    models = [
        {"id": "alpha-fast", "provider": "alpha", "model": "model-alpha", "profile": "fast"},
        {"id": "beta-balanced", "provider": "beta", "model": "model-beta", "profile": "balanced"},
    ]
    async with system(
        make_database,
        providers_json=json.dumps(providers),
        router_settings={"models_json": json.dumps(models)},
        fallback_model="alpha/model-alpha",
    ) as sb:
        for spec in (
            threads_pb2.Agent(id="qa", persona="Pinned QA.", provider_id="beta", model="auto"),
            threads_pb2.Agent(id="dev", persona="Free dev."),
            threads_pb2.Agent(id="ops", provider_id="beta", model="alpha-fast"),
            threads_pb2.Agent(id="sec", provider_id="beta"),
        ):
            await sb.threads.CreateAgent(threads_service_pb2.CreateAgentRequest(agent=spec), **as_user(USER))
        remote.script.steps, beta.script.steps = ["say:From alpha."], ["say:From beta."]
        pinned = await collect(ask(sb, "main", "qa", "Is the build green?"))
        free = await collect(ask(sb, "main", "dev", "Is the build green?"))
        assert (pinned[-1].final.text, pinned[-1].final.provider, pinned[-1].final.model) == (
            "From beta.",
            "beta",
            "model-beta",
        ), pinned[-1]
        assert (free[-1].final.text, free[-1].final.provider) == ("From alpha.", "alpha"), free[-1]
        (to_beta,), (to_alpha,) = beta.script.requests, remote.script.requests
        assert to_beta["model"] == "model-beta" and to_alpha["model"] == "model-alpha"
        assert "Pinned QA." in to_beta["messages"][0]["content"]
        assert to_beta["messages"][-1] == {"role": "user", "content": "main asks: Is the build green?"}

        refused = await collect(ask(sb, "main", "ops", "Is the build green?"))
        assert refused[-1].error.code == "ERROR_REASON_INVALID_ARGUMENT", refused[-1]
        assert "'alpha-fast' is served by provider 'alpha', not by the pinned provider 'beta'" in (
            refused[-1].error.message
        )

        await sb.services["router"].stop(None)
        beta.script.steps = ["say:Toujours beta."]
        kept = await collect(ask(sb, "main", "qa", "Et maintenant ?"))
        assert (kept[-1].final.text, kept[-1].final.model) == ("Toujours beta.", "model-beta"), kept[-1]
        assert [e.notice.code for e in kept if e.WhichOneof("kind") == "notice"] == ["ROUTER_UNAVAILABLE"]
        stranded = await collect(ask(sb, "main", "sec", "And now?"))
        assert stranded[-1].error.code == "ERROR_REASON_DEPENDENCY_UNAVAILABLE", stranded[-1]
        assert "pinned to provider 'beta'" in stranded[-1].error.message
        assert "does not run elsewhere" in stranded[-1].error.message
        # Nothing else reached either endpoint: no fallback to alpha, no call for ops.
        assert [r["model"] for r in beta.script.requests] == ["model-beta", "model-beta"]
        assert [r["model"] for r in remote.script.requests] == ["model-alpha"]
