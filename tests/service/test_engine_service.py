"""The engine against the real threads, memory and router services (all
in-process on port 0, over real sockets), called through its stub."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import grpc
import pytest
from sqlalchemy import text

from services.engine.models import AgentRun, EngineInstance
from services.engine.repository import RunsRepository
from services.engine.runs import RunLimits, RunService
from services.engine.server import MIGRATIONS
from services.shared.db import create_engine, session_factory
from services.shared.migrations import upgrade_to_head
from services.shared.time import utcnow
from switchboard.engine.v1 import engine_pb2
from switchboard.engine.v1 import engine_service_pb2 as pb
from switchboard.memory.v1 import memory_pb2, memory_service_pb2
from switchboard.router.v1 import router_pb2
from switchboard.threads.v1 import threads_pb2, threads_service_pb2
from tests.conftest import DatabaseFactory
from tests.service.harness import as_user, expect_error
from tests.service.system import System, collect, conversation, system


@pytest.fixture
async def sb(make_database: DatabaseFactory) -> AsyncIterator[System]:
    async with system(make_database) as running_system:
        yield running_system


async def count_runs(url: str) -> int:
    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            return int((await connection.execute(text("SELECT count(*) FROM agent_runs"))).scalar_one())
    finally:
        await engine.dispose()


def kinds(events: list[engine_pb2.RunEvent]) -> list[str]:
    return [
        f"step:{e.step.key}:{engine_pb2.StepStatus.Name(e.step.status)[12:].lower()}"
        if e.WhichOneof("kind") == "step"
        else str(e.WhichOneof("kind"))
        for e in events
    ]


async def test_a_run_streams_named_steps_and_is_recorded(sb: System) -> None:
    conversation_id = await conversation(sb)
    events = await collect(
        sb.engine.StartRun(
            pb.StartRunRequest(conversation_id=conversation_id, message="What is the capital of France?"),
            **as_user("alice"),
        )
    )
    sequence = kinds(events)
    assert sequence[:8] == [
        "run_started",
        "step:context:started",
        "live_state",  # the project's live state as the run read it
        "step:context:completed",
        "step:routing:started",
        "step:routing:completed",
        "step:generate:started",
        "delta",
    ]
    assert sequence[-2:] == ["step:generate:completed", "final"]
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    assert len({e.run_id for e in events}) == 1
    final = events[-1].final
    deltas = [e.delta.text for e in events if e.WhichOneof("kind") == "delta"]
    assert "".join(deltas) == final.text
    # Coalesced: far fewer delta events than tokens.
    assert len(deltas) < final.usage.tokens_out and final.usage.tokens_in > 0

    run = (await sb.engine.GetRun(pb.GetRunRequest(run_id=events[0].run_id), **as_user("alice"))).run
    assert run.status == engine_pb2.RUN_STATUS_DONE
    assert (run.provider, run.model) == ("offline", final.model) and final.model.startswith(
        "switchboard-offline"
    )
    assert run.usage.tokens_out == final.usage.tokens_out and run.usage.tokens_in == final.usage.tokens_in
    assert run.conversation_id == conversation_id and run.surface == engine_pb2.SURFACE_CHAT
    assert run.HasField("finish_time") and run.credits == 0
    assert [layer.key for layer in run.layers] == [
        "product_system",
        "instruction_page",
        "memory",
        "skills",
        "project_context",
        "live_state",
        "working_context",
        "run_context",
        "conversation_summary",
        "history",
    ]
    # The first message of a conversation: no earlier turn, no summary.
    history = {layer.key: layer for layer in run.layers}["history"]
    assert (history.present, history.item_count, history.size_tokens) == (False, 0, 0)
    assert all(layer.size_tokens > 0 for layer in run.layers if layer.present)
    assert run.router_decision.skills.branch != router_pb2.ROUTE_BRANCH_UNSPECIFIED
    assert run.router_decision.model.model.model == run.model

    entries = await sb.threads.ListEntries(
        threads_service_pb2.ListEntriesRequest(thread_id=conversation_id), **as_user("alice")
    )
    assert [(e.content, e.run_id) for e in entries.entries] == [
        ("What is the capital of France?", run.id),
        (final.text, run.id),
    ]


async def test_memory_and_skills_reach_the_model_and_the_record(sb: System) -> None:
    await sb.memory.CreateNote(
        memory_service_pb2.CreateNoteRequest(
            note=memory_pb2.Note(
                kind=memory_pb2.NOTE_KIND_FACT,
                title="Status reports go out on Friday",
                body="Weekly status, Friday.",
            )
        ),
        **as_user("alice"),
    )
    conversation_id = await conversation(sb)
    events = await collect(
        sb.engine.StartRun(
            pb.StartRunRequest(conversation_id=conversation_id, message="Write the weekly status report"),
            **as_user("alice"),
        )
    )
    used = [e.skill_used.skill for e in events if e.WhichOneof("kind") == "skill_used"]
    assert [(s.name, s.invocation) for s in used] == [
        ("weekly-status-report", engine_pb2.SKILL_INVOCATION_AUTO)
    ]
    final = events[-1].final
    assert "weekly-status-report" in final.text and "Status reports go out on Friday" in final.text
    run = (await sb.engine.GetRun(pb.GetRunRequest(run_id=events[0].run_id), **as_user("alice"))).run
    assert [s.name for s in run.skills] == ["weekly-status-report"]
    assert [(s.kind, s.title) for s in run.sources] == [("memory", "Status reports go out on Friday")]
    assert {layer.key: layer.present for layer in run.layers}["memory"] is True


async def test_forced_skill_is_manual(sb: System) -> None:
    conversation_id = await conversation(sb)
    events = await collect(
        sb.engine.StartRun(
            pb.StartRunRequest(
                conversation_id=conversation_id, message="bonjour", forced_skills=["translate"]
            ),
            **as_user("alice"),
        )
    )
    used = [e.skill_used.skill for e in events if e.WhichOneof("kind") == "skill_used"]
    assert [(s.name, s.invocation) for s in used] == [("translate", engine_pb2.SKILL_INVOCATION_MANUAL)]


async def test_refused_requests_write_nothing(sb: System) -> None:
    conversation_id = await conversation(sb)
    cases = [
        (pb.StartRunRequest(conversation_id="missing", message="hi"), grpc.StatusCode.NOT_FOUND, "NOT_FOUND"),
        (
            pb.StartRunRequest(conversation_id=conversation_id, message="  "),
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_ARGUMENT",
        ),
        (
            pb.StartRunRequest(conversation_id="", message="hi"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_ARGUMENT",
        ),
        (
            pb.StartRunRequest(conversation_id=conversation_id, message="x" * 40_000),
            grpc.StatusCode.INVALID_ARGUMENT,
            "TOO_LARGE",
        ),
    ]
    for request, code, reason in cases:
        await expect_error(
            collect(sb.engine.StartRun(request, **as_user("alice"))), code, f"ERROR_REASON_{reason}"
        )
    # A run's context outside its limits: INVALID_ARGUMENT naming the field.
    page = engine_pb2.CurrentPage(id="p1", title="Plan", type="page")
    block = engine_pb2.SelectedBlock
    contexts = [
        (
            engine_pb2.RunContext(regime=engine_pb2.RUN_REGIME_AUTONOMOUS),
            "INVALID_ARGUMENT",
            "context.regime",
        ),
        (engine_pb2.RunContext(regime=7), "INVALID_ARGUMENT", "context.regime"),
        (
            engine_pb2.RunContext(page=engine_pb2.CurrentPage(type="page")),
            "INVALID_ARGUMENT",
            "context.page.id",
        ),
        (
            engine_pb2.RunContext(page=engine_pb2.CurrentPage(id="p1")),
            "INVALID_ARGUMENT",
            "context.page.type",
        ),
        (
            engine_pb2.RunContext(page=engine_pb2.CurrentPage(id="p1", type="Meeting Notes")),
            "INVALID_ARGUMENT",
            "context.page.type",
        ),
        (
            engine_pb2.RunContext(page=engine_pb2.CurrentPage(id="p1", type="page", title="t" * 201)),
            "TOO_LARGE",
            "context.page.title",
        ),
        (
            engine_pb2.RunContext(page=page, selections=[block(text=" \n ")]),
            "INVALID_ARGUMENT",
            "selections[0].text",
        ),
        (engine_pb2.RunContext(selections=[block(text="x" * 4001)]), "TOO_LARGE", "selections[0].text"),
        (engine_pb2.RunContext(selections=[block(text="x")] * 11), "TOO_LARGE", "at most 10"),
        (engine_pb2.RunContext(selections=[block(text="x" * 4000)] * 4), "TOO_LARGE", "12000 in all"),
        (engine_pb2.RunContext(selections=[block(text="x", block_id="b" * 201)]), "TOO_LARGE", "block_id"),
    ]
    for context, reason, says in contexts:
        request = pb.StartRunRequest(conversation_id=conversation_id, message="hi", context=context)
        error = await expect_error(
            collect(sb.engine.StartRun(request, **as_user("alice"))),
            grpc.StatusCode.INVALID_ARGUMENT,
            f"ERROR_REASON_{reason}",
        )
        assert says in (error.details() or ""), (says, error.details())
    # Bob cannot run on Alice's conversation: the same NOT_FOUND as a missing one.
    await expect_error(
        collect(
            sb.engine.StartRun(
                pb.StartRunRequest(conversation_id=conversation_id, message="hi"), **as_user("bob")
            )
        ),
        grpc.StatusCode.NOT_FOUND,
        "ERROR_REASON_NOT_FOUND",
    )
    await expect_error(
        collect(
            sb.engine.StartRun(pb.StartRunRequest(conversation_id=conversation_id, message="hi"), timeout=10)
        ),
        grpc.StatusCode.UNAUTHENTICATED,
        "ERROR_REASON_UNAUTHENTICATED",
    )
    assert await count_runs(sb.database_urls["engine"]) == 0


async def test_start_run_is_idempotent_on_request_id(sb: System) -> None:
    conversation_id = await conversation(sb)
    request = pb.StartRunRequest(request_id="retry-me", conversation_id=conversation_id, message="hello")
    first, second = await asyncio.gather(
        collect(sb.engine.StartRun(request, **as_user("alice"))),
        collect(sb.engine.StartRun(request, **as_user("alice"))),
    )
    assert first[0].run_id == second[0].run_id
    assert [e.sequence for e in second] == [e.sequence for e in first]
    assert await count_runs(sb.database_urls["engine"]) == 1


async def test_runs_are_private_and_resumable(sb: System) -> None:
    conversation_id = await conversation(sb)
    events = await collect(
        sb.engine.StartRun(
            pb.StartRunRequest(conversation_id=conversation_id, message="hello"), **as_user("alice")
        )
    )
    run_id = events[0].run_id
    for call in (
        sb.engine.GetRun(pb.GetRunRequest(run_id=run_id), **as_user("bob")),
        collect(sb.engine.WatchRun(pb.WatchRunRequest(run_id=run_id), **as_user("bob"))),
        sb.engine.GetRun(pb.GetRunRequest(run_id="no-such-run"), **as_user("alice")),
    ):
        await expect_error(call, grpc.StatusCode.NOT_FOUND, "ERROR_REASON_NOT_FOUND")
    # Resuming after event 3 gives exactly the rest, from the database.
    resumed = await collect(
        sb.engine.WatchRun(pb.WatchRunRequest(run_id=run_id, after_sequence=3), **as_user("alice"))
    )
    assert resumed == events[3:]
    # After the terminal event there is nothing more.
    assert (
        await collect(
            sb.engine.WatchRun(
                pb.WatchRunRequest(run_id=run_id, after_sequence=events[-1].sequence), **as_user("alice")
            )
        )
        == []
    )


async def test_a_run_continues_when_its_client_goes_away(make_database: DatabaseFactory) -> None:
    async with system(make_database, offline_token_delay=0.02) as sb:
        conversation_id = await conversation(sb)
        call = sb.engine.StartRun(
            pb.StartRunRequest(conversation_id=conversation_id, message="hello there"), **as_user("alice")
        )
        first = (await call.read()).event
        call.cancel()
        watched = await collect(
            sb.engine.WatchRun(pb.WatchRunRequest(run_id=first.run_id), **as_user("alice"))
        )
        assert watched[0] == first and watched[-1].WhichOneof("kind") == "final"
        run = (await sb.engine.GetRun(pb.GetRunRequest(run_id=first.run_id), **as_user("alice"))).run
        assert run.status == engine_pb2.RUN_STATUS_DONE


class SlowHeartbeats(RunsRepository):
    """A lease renewal that takes a while, as on a loaded database."""

    async def heartbeat(self, instance_id: str) -> None:
        await asyncio.sleep(0.2)
        await super().heartbeat(instance_id)


async def test_a_renewal_in_flight_at_shutdown_neither_fails_nor_brings_the_lease_back(
    make_database: DatabaseFactory,
) -> None:
    async with make_database("engine") as url:
        engine = create_engine(url)
        await upgrade_to_head(engine, MIGRATIONS, "engine")
        runs = RunService(SlowHeartbeats(engine), None, {}, RunLimits(1000, 0.03, 512, 15.0), "me")  # type: ignore[arg-type]
        await runs.heartbeat()
        renewal = asyncio.create_task(runs.heartbeat())
        await asyncio.sleep(0.05)  # the renewal is under way
        await runs.close(grace=1)
        await renewal  # it ended before the release, without an error
        await runs.heartbeat()  # the lease loop's last turn after the release: nothing
        async with session_factory(engine)() as session:
            assert await session.get(EngineInstance, "me") is None
        await engine.dispose()


async def test_runs_of_a_dead_instance_are_settled_and_live_ones_untouched(
    make_database: DatabaseFactory,
) -> None:
    async with make_database("engine") as url:
        engine = create_engine(url)
        await upgrade_to_head(engine, MIGRATIONS, "engine")
        sessions = session_factory(engine)
        async with sessions() as session:
            session.add(EngineInstance(id="alive", heartbeat_at=utcnow()))
            session.add(EngineInstance(id="dead", heartbeat_at=utcnow() - timedelta(minutes=5)))
            session.add(AgentRun(id="run-dead", user_id="alice", instance_id="dead"))
            session.add(AgentRun(id="run-gone", user_id="alice", instance_id="never-registered"))
            session.add(AgentRun(id="run-alive", user_id="alice", instance_id="alive"))
            await session.commit()

        runs = RunService(RunsRepository(engine), None, {}, RunLimits(1000, 0.03, 512, 15.0), "me")  # type: ignore[arg-type]
        assert await runs.settle_orphans() == 2
        assert await runs.settle_orphans() == 0  # idempotent
        async with sessions() as session:
            statuses = {
                r.id: (r.status, r.error)
                for r in (await session.exec(__import__("sqlmodel").select(AgentRun))).all()
            }
        assert statuses == {
            "run-dead": ("failed", "interrupted"),
            "run-gone": ("failed", "interrupted"),
            "run-alive": ("running", None),
        }
        # A client following the settled run gets a terminal event.
        events = [e async for e in runs.follow("alice", "run-dead", 0)]
        assert [e.WhichOneof("kind") for e in events] == ["error"] and events[0].error.code == "INTERRUPTED"
        await engine.dispose()


async def test_without_the_router_the_routing_step_completes_with_one_notice(sb: System) -> None:
    """The router is optional to a run: it goes on without automatic skills,
    with the engine's fallback model (tests/e2e/test_dependency_faults.py
    covers slow, killed and the other services as real processes)."""
    conversation_id = await conversation(sb)
    await sb.services["router"].stop(None)
    events = await collect(
        sb.engine.StartRun(
            pb.StartRunRequest(conversation_id=conversation_id, message="hello"), **as_user("alice")
        )
    )
    assert kinds(events)[:6] == [
        "run_started",
        "step:context:started",
        "live_state",
        "step:context:completed",
        "step:routing:started",
        "notice",
    ]
    assert "step:routing:completed" in kinds(events) and kinds(events)[-1] == "final"
    notice = events[5].notice
    assert notice.code == "ROUTER_UNAVAILABLE" and "UNAVAILABLE" in notice.message
    run = (await sb.engine.GetRun(pb.GetRunRequest(run_id=events[0].run_id), **as_user("alice"))).run
    assert run.status == engine_pb2.RUN_STATUS_DONE and run.model == "switchboard-offline-balanced"
    # The record says the fallback answered, and holds no Skill Router decision.
    assert run.router_decision.model.fallback and not run.router_decision.skills.candidates
    assert run.router_decision.model.model.model == "switchboard-offline-balanced"


async def test_shutdown_gives_runs_the_grace_and_clients_their_terminal_event(
    make_database: DatabaseFactory,
) -> None:
    async with system(make_database, offline_token_delay=0.5) as sb:
        conversation_id = await conversation(sb)
        call = sb.engine.StartRun(
            pb.StartRunRequest(conversation_id=conversation_id, message="a slow answer please"),
            **as_user("alice"),
        )
        events = []
        stopping: asyncio.Task[None] | None = None
        while (response := await call.read()) is not grpc.aio.EOF:
            events.append(response.event)
            if response.event.WhichOneof("kind") == "delta" and stopping is None:
                stopping = asyncio.create_task(sb.services["engine"].stop(1.0))  # mid-answer
        assert stopping is not None
        await stopping
        # The client saw the run end live: the open step failed, then INTERRUPTED.
        assert kinds(events)[-2:] == ["step:generate:failed", "error"]
        assert events[-1].error.code == "INTERRUPTED"
        assert [e.sequence for e in events] == list(range(1, len(events) + 1))


async def test_the_first_exchange_titles_an_untitled_conversation(sb: System) -> None:
    untitled = await conversation(sb)
    titled = (
        await sb.threads.CreateConversation(
            threads_service_pb2.CreateConversationRequest(title="My own title"), **as_user("alice")
        )
    ).conversation.id
    for conversation_id in (untitled, titled):
        for message in ("Plan the offsite agenda for the design team", "And the budget?"):
            await collect(
                sb.engine.StartRun(
                    pb.StartRunRequest(conversation_id=conversation_id, message=message), **as_user("alice")
                )
            )

    async def get(conversation_id: str) -> threads_pb2.Conversation:
        request = threads_service_pb2.GetConversationRequest(conversation_id=conversation_id)
        return (await sb.threads.GetConversation(request, **as_user("alice"))).conversation

    auto = await get(untitled)
    assert (auto.title, auto.title_auto) == ("Plan the offsite agenda for the design team", True)
    manual = await get(titled)
    assert (manual.title, manual.title_auto) == ("My own title", False)
