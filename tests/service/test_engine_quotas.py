"""Per-user run quotas in the engine, counted from its database: runs
executing at once (a run held open), runs started within a minute (the
clock moved, not waited), each user's own; and memory's full quota reaching
a run as a quota notice, not as memory being unavailable."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from prometheus_client import REGISTRY

from services.engine.models import AgentRun
from services.engine.quotas import RunQuota
from services.engine.repository import RunsRepository
from services.engine.server import build_server as build_engine
from services.engine.settings import EngineSettings
from services.shared.db import create_engine
from services.shared.errors import TooManyRuns, error_info, retry_delay
from switchboard.engine.v1 import engine_pb2, engine_service_pb2, engine_service_pb2_grpc
from switchboard.memory.v1.pages_service_pb2 import GetActiveInstructionsRequest
from switchboard.threads.v1 import threads_pb2, threads_service_pb2
from tests.conftest import DatabaseFactory, MovableClock
from tests.service.harness import as_user, expect_error, running
from tests.service.system import System, collect, conversation, system

TOO_MANY_RUNS = (grpc.StatusCode.RESOURCE_EXHAUSTED, "ERROR_REASON_TOO_MANY_RUNS")
RATE_LIMITED = (grpc.StatusCode.RESOURCE_EXHAUSTED, "ERROR_REASON_RATE_LIMITED")


def start(
    engine: engine_service_pb2_grpc.EngineServiceStub,
    conversation_id: str,
    user: str = "alice",
    text: str = "Tell me a long story about quotas",
    request_id: str = "",
) -> grpc.aio.UnaryStreamCall:
    request = engine_service_pb2.StartRunRequest(
        request_id=request_id, conversation_id=conversation_id, message=text, surface=engine_pb2.SURFACE_CHAT
    )
    return engine.StartRun(request, metadata=as_user(user)["metadata"], timeout=30)


def refusals(reason: str) -> float:
    """The engine's count of runs refused for ``reason`` (this process's registry)."""
    return REGISTRY.get_sample_value("switchboard_run_refusals_total", {"reason": reason}) or 0.0


async def first_event(call: grpc.aio.UnaryStreamCall) -> engine_pb2.RunEvent:
    """The run's first event: once it arrives, the run's row is written."""
    async for response in call:
        return response.event
    raise AssertionError("the stream ended before its first event")


async def cancel(sb: System, call: grpc.aio.UnaryStreamCall, run_id: str, user: str = "alice") -> None:
    """Cancels a held run and follows it to its end (its row settled)."""
    await sb.engine.CancelRun(engine_service_pb2.CancelRunRequest(run_id=run_id), **as_user(user))
    last = [response.event async for response in call][-1]
    assert last.WhichOneof("kind") == "error" and last.error.code == "CANCELLED"


# Runs at once


@pytest.fixture
def at_once() -> int:
    return 1


@pytest.fixture
async def held(make_database: DatabaseFactory, at_once: int) -> AsyncIterator[System]:
    """``at_once`` runs at a time per user; the offline model writes a token
    a second, so a run stays executing until it is cancelled."""
    async with system(
        make_database,
        max_concurrent_runs_per_user=at_once,
        runs_per_minute_per_user=0,
        offline_token_delay=1.0,
    ) as running_system:
        yield running_system


async def test_a_second_run_at_once_is_refused_until_the_first_ends(held: System) -> None:
    sb = held
    chat = await conversation(sb)
    first = start(sb.engine, chat, request_id="first")
    run_id = (await first_event(first)).run_id

    # Another conversation, another surface: the limit is the user's.
    refused_before = refusals("ERROR_REASON_TOO_MANY_RUNS")
    error = await expect_error(first_event(start(sb.engine, await conversation(sb))), *TOO_MANY_RUNS)
    assert retry_delay(error) == 5
    assert refusals("ERROR_REASON_TOO_MANY_RUNS") == refused_before + 1
    assert "at most 1 at once" in (error.details() or "")
    # A retry of the held run's request is that run again, not a refusal.
    replay = start(sb.engine, chat, request_id="first")
    assert (await first_event(replay)).run_id == run_id
    replay.cancel()

    # Bob's quota is his own.
    bobs = start(sb.engine, await conversation(sb, "bob"), "bob")
    bob_run = (await first_event(bobs)).run_id
    await cancel(sb, bobs, bob_run, "bob")

    await cancel(sb, first, run_id)
    again = start(sb.engine, chat)
    started = await first_event(again)
    assert started.WhichOneof("kind") == "run_started"
    await cancel(sb, again, started.run_id)  # ended here, not drained through the shutdown grace


# Engine replicas share a PostgreSQL database only (SQLite is one process per
# file: docs/operations.md, Scaling), so this one runs on PostgreSQL alone.
@pytest.mark.parametrize("backend", ["postgres"])
@pytest.mark.parametrize("at_once", [2])
async def test_replicas_racing_on_one_database_admit_exactly_the_limit(held: System, backend: str) -> None:
    """Six starts at once, alternating between two engine replicas on one
    PostgreSQL database: the user's lock makes the counts exact, so two
    runs start and four are refused."""
    sb = held
    other = EngineSettings(
        port=0,
        database_url=sb.database_urls["engine"],
        threads_address=f"127.0.0.1:{sb.services['threads'].port}",
        memory_address=f"127.0.0.1:{sb.services['memory'].port}",
        router_address=f"127.0.0.1:{sb.services['router'].port}",
        instance_id="replica-b",
        max_concurrent_runs_per_user=2,
        runs_per_minute_per_user=0,
        offline_token_delay=1.0,
    )
    chats = [await conversation(sb) for _ in range(6)]
    async with running(build_engine, other) as (_, channel):
        replica_b = engine_service_pb2_grpc.EngineServiceStub(channel)
        engines = [sb.engine, replica_b]
        calls = [start(engines[index % 2], chat) for index, chat in enumerate(chats)]

        async def outcome(call: grpc.aio.UnaryStreamCall) -> str:
            try:
                return (await first_event(call)).run_id
            except grpc.aio.AioRpcError as error:
                info = error_info(error)
                return info.reason if info is not None else error.code().name

        outcomes = await asyncio.gather(*(outcome(call) for call in calls))
        started = [
            (call, run) for call, run in zip(calls, outcomes, strict=True) if not run.startswith("ERROR_")
        ]
        assert sorted(o for o in outcomes if o.startswith("ERROR_")) == ["ERROR_REASON_TOO_MANY_RUNS"] * 4
        assert len(started) == 2
        for call, run_id in started:
            await cancel(sb, call, run_id)


# Runs per minute


@pytest.fixture
async def rated(make_database: DatabaseFactory) -> AsyncIterator[System]:
    async with system(
        make_database, max_concurrent_runs_per_user=0, runs_per_minute_per_user=2
    ) as running_system:
        yield running_system


async def test_runs_per_minute_counts_starts_until_they_leave_the_minute(
    rated: System, clock: MovableClock
) -> None:
    sb = rated
    chat = await conversation(sb)
    for _ in range(2):
        events = await collect(start(sb.engine, chat))
        assert events[-1].WhichOneof("kind") == "final"

    error = await expect_error(first_event(start(sb.engine, chat)), *RATE_LIMITED)
    delay = retry_delay(error)
    assert delay is not None and 1 <= delay <= 60, delay
    # Finished runs still count: it is a rate, not a concurrency limit. And
    # every surface counts: an agent ask is a run too.
    agent = threads_pb2.Agent(id="helper", display_name="Helper", persona="Helps.")
    await sb.threads.CreateAgent(threads_service_pb2.CreateAgentRequest(agent=agent), **as_user("alice"))
    ask = engine_service_pb2.AskAgentRequest(requester="user", target_agent_id="helper", message="hello")
    await expect_error(
        first_event(sb.engine.AskAgent(ask, metadata=as_user("alice")["metadata"], timeout=30)), *RATE_LIMITED
    )

    # Bob is not alice.
    bobs = await collect(start(sb.engine, await conversation(sb, "bob"), "bob"))
    assert bobs[-1].WhichOneof("kind") == "final"

    # Half a minute on, the same two starts are still inside it, and the
    # delay has shrunk with the time that passed.
    clock.advance(30)
    later = retry_delay(await expect_error(first_event(start(sb.engine, chat)), *RATE_LIMITED))
    assert later is not None and later <= delay - 29, (delay, later)
    # Past the minute, both have left it: two more fit, not three.
    clock.advance(31)
    for _ in range(2):
        events = await collect(start(sb.engine, chat))
        assert events[-1].WhichOneof("kind") == "final"
    await expect_error(first_event(start(sb.engine, chat)), *RATE_LIMITED)


# Memory's quota through a run


@pytest.fixture
async def one_proposal(make_database: DatabaseFactory) -> AsyncIterator[System]:
    """Memory keeps one pending proposal per page."""
    async with system(make_database, memory_settings={"max_pending_proposals": 1}) as running_system:
        yield running_system


# The refusal in the run's language: the notice, then the answer, around
# memory's own words.
REFUSED = {
    "en": (
        "memory refused the proposal: {cause}",
        'I could not propose remembering "My team is Mobile": {cause}. Nothing was changed.',
    ),
    "fr": (
        "la mémoire a refusé la proposition : {cause}",
        "Je n'ai pas pu proposer de retenir « Mon équipe est Mobile » : {cause}. Rien n'a été modifié.",
    ),
}


@pytest.mark.parametrize(
    ("first", "second", "language"),
    [
        ("Remember that I prefer bullet lists", "Remember that my team is Mobile", "en"),
        ("Retiens que je préfère les listes à puces", "Retiens que mon équipe est Mobile", "fr"),
    ],
)
async def test_a_full_memory_quota_is_a_quota_notice_not_unavailable(
    one_proposal: System, first: str, second: str, language: str
) -> None:
    sb = one_proposal
    chat = await conversation(sb)
    proposed = await collect(start(sb.engine, chat, text=first))
    assert proposed[-1].final.status == engine_pb2.RUN_STATUS_WAITING_APPROVAL

    refused = await collect(start(sb.engine, chat, text=second))
    notices = {e.notice.code: e.notice.message for e in refused if e.WhichOneof("kind") == "notice"}
    assert "MEMORY_UNAVAILABLE" not in notices
    assert "QUOTA_EXCEEDED" in notices and "1 pending proposals" in notices["QUOTA_EXCEEDED"], notices
    assert not [e for e in refused if e.WhichOneof("kind") == "proposal"]
    final = refused[-1]
    assert final.WhichOneof("kind") == "final" and final.final.status == engine_pb2.RUN_STATUS_DONE
    page_id = (
        await sb.pages.GetActiveInstructions(GetActiveInstructionsRequest(), **as_user("alice"))
    ).page_id
    cause = f"page {page_id!r} has 1 pending proposals already; decide some first"
    notice, answer = REFUSED[language]
    assert notices["QUOTA_EXCEEDED"] == notice.format(cause=cause)
    assert final.final.text == answer.format(cause=cause)
    run = await sb.engine.GetRun(engine_service_pb2.GetRunRequest(run_id=final.run_id), **as_user("alice"))
    assert run.run.status == engine_pb2.RUN_STATUS_DONE and run.run.language == language


# The insert's two transactions


async def test_a_refused_insert_writes_nothing_and_lets_the_run_in_if_room_came_meanwhile(
    make_database: DatabaseFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's insert writes it (and its first event) only while the quota
    has room; a run refused there goes to a second transaction, which words
    the refusal, or inserts the run when the run in the way ended since."""
    async with make_database("engine") as url:
        engine = create_engine(url)
        try:
            repo = RunsRepository(engine)
            quota = RunQuota(max_concurrent=1)
            first = AgentRun(id=str(uuid.uuid4()), user_id="alice", conversation_id="c1")
            second = AgentRun(id=str(uuid.uuid4()), user_id="alice", conversation_id="c2")
            assert await repo.insert_run(first, b"first", quota=quota) is first
            with pytest.raises(TooManyRuns):
                await repo.insert_run(second, b"second", quota=quota)
            assert await repo.get_run(second.id) is None
            assert await repo.events_after(second.id, 0) == []

            decide = RunsRepository._insert_deciding

            async def first_ends_meanwhile(self: RunsRepository, *args: Any) -> AgentRun | None:
                await repo.finish_run(first.id, {"status": "done", "error": None}, [])
                return await decide(self, *args)

            monkeypatch.setattr(RunsRepository, "_insert_deciding", first_ends_meanwhile)
            assert await repo.insert_run(second, b"second", quota=quota) is second
            assert [row.payload for row in await repo.events_after(second.id, 0)] == [b"second"]
        finally:
            await engine.dispose()
