"""Retention of runs and run events, on both databases: runs that ended
before the cutoff go with their events, actions and skill runs (or only
their events); a run still running while the prune works keeps everything,
and so does a run waiting for approval; the prune runs once per interval
across replicas (the shared lease). Time moves on the test's clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import grpc
import pytest
from prometheus_client import REGISTRY
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel import col

from services.engine.models import AgentRun, RunEventRow
from services.engine.retention import Pruned, Retention, RetentionPolicy
from services.engine.settings import EngineSettings
from services.shared.db import create_engine
from services.shared.time import utcnow
from switchboard.engine.v1 import engine_pb2, engine_service_pb2
from tests.conftest import DatabaseFactory, MovableClock
from tests.service.harness import as_user
from tests.service.system import System, collect, conversation, system

DAY = timedelta(days=1)


@pytest.fixture
async def sb(make_database: DatabaseFactory, clock: MovableClock) -> AsyncIterator[System]:
    async with system(make_database, offline_token_delay=0.05) as running_system:
        yield running_system


@pytest.fixture
async def database(sb: System) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(sb.database_urls["engine"])
    try:
        yield engine
    finally:
        await engine.dispose()


def start(sb: System, conversation_id: str, text: str = "hi") -> grpc.aio.UnaryStreamCall:
    request = engine_service_pb2.StartRunRequest(conversation_id=conversation_id, message=text)
    return sb.engine.StartRun(request, metadata=as_user("alice")["metadata"], timeout=60)


async def finished_run(sb: System, conversation_id: str) -> str:
    events = await collect(start(sb, conversation_id))
    assert events[-1].WhichOneof("kind") == "final"
    return str(events[-1].run_id)


async def event_count(database: AsyncEngine, run_id: str) -> int:
    async with database.connect() as connection:
        query = select(func.count()).select_from(RunEventRow).where(col(RunEventRow.run_id) == run_id)
        return int((await connection.execute(query)).scalar_one())


async def run_exists(sb: System, run_id: str) -> bool:
    try:
        await sb.engine.GetRun(engine_service_pb2.GetRunRequest(run_id=run_id), **as_user("alice"))
    except grpc.aio.AioRpcError as error:
        assert error.code() == grpc.StatusCode.NOT_FOUND
        return False
    return True


async def test_a_prune_racing_a_running_run_removes_only_old_ended_runs(
    sb: System, database: AsyncEngine, clock: MovableClock
) -> None:
    target = await conversation(sb)
    old = [await finished_run(sb, target), await finished_run(sb, target)]
    other = await conversation(sb)
    running = aiter(start(sb, other, "Tell me a long story about retention and leases"))
    first = await anext(running)
    while (await anext(running)).event.WhichOneof("kind") != "delta":
        pass  # the run is generating now
    run_id = first.event.run_id
    clock.advance((2 * DAY).total_seconds())
    retention = Retention(database, RetentionPolicy(runs=DAY), 3600, "engine-a")
    counted = REGISTRY.get_sample_value("switchboard_retention_pruned_total", {"kind": "runs"}) or 0.0
    pruned = await retention.prune(utcnow())
    assert pruned.runs == 2 and pruned.run_events > 0
    assert REGISTRY.get_sample_value("switchboard_retention_pruned_total", {"kind": "runs"}) == counted + 2
    for gone in old:
        assert not await run_exists(sb, gone) and await event_count(database, gone) == 0
    # The running run and every event it wrote so far are all there...
    assert (
        await sb.engine.GetRun(engine_service_pb2.GetRunRequest(run_id=run_id), **as_user("alice"))
    ).run.status == (engine_pb2.RUN_STATUS_RUNNING)
    written = await event_count(database, run_id)
    assert written >= 2
    # ...and it ends normally, every event streamed in order.
    rest = [response.event async for response in running]
    assert rest[-1].WhichOneof("kind") == "final"
    replay = await collect(
        sb.engine.WatchRun(engine_service_pb2.WatchRunRequest(run_id=run_id), **as_user("alice"))
    )
    assert [e.sequence for e in replay] == list(range(1, len(replay) + 1))
    # It ended "now" on the moved clock: a second prune keeps it.
    assert (await retention.prune(utcnow())).runs == 0
    assert await run_exists(sb, run_id)


async def test_events_only_retention_keeps_the_runs(
    sb: System, database: AsyncEngine, clock: MovableClock
) -> None:
    target = await conversation(sb)
    run_id = await finished_run(sb, target)
    retention = Retention(database, RetentionPolicy(run_events=DAY), 3600, "engine-a")
    assert (await retention.prune(utcnow())).run_events == 0  # too recent
    clock.advance((DAY + timedelta(minutes=1)).total_seconds())
    assert (await retention.prune(utcnow())).run_events > 0
    assert await run_exists(sb, run_id) and await event_count(database, run_id) == 0
    # A stream of a run whose events are gone ends at once, with none.
    replay = await collect(
        sb.engine.WatchRun(engine_service_pb2.WatchRunRequest(run_id=run_id), **as_user("alice"))
    )
    assert replay == []


async def test_a_run_waiting_for_approval_is_never_pruned(
    sb: System, database: AsyncEngine, clock: MovableClock
) -> None:
    target = await conversation(sb)
    run_id = await finished_run(sb, target)
    async with database.begin() as connection:
        await connection.execute(
            update(AgentRun).where(col(AgentRun.id) == run_id).values(status="waiting_approval")
        )
    clock.advance((30 * DAY).total_seconds())
    retention = Retention(database, RetentionPolicy(run_events=DAY, runs=DAY), 3600, "engine-a")
    assert await retention.prune(utcnow()) == Pruned(0, 0)
    assert await run_exists(sb, run_id) and await event_count(database, run_id) > 0


async def test_the_prune_runs_once_per_interval_across_replicas(
    sb: System, database: AsyncEngine, clock: MovableClock
) -> None:
    policy = RetentionPolicy(runs=DAY)
    replicas = [Retention(database, policy, 600, holder) for holder in ("engine-a", "engine-b")]
    done = [await replica.prune_if_due() for replica in replicas]
    assert [result is not None for result in done] == [True, False]
    clock.advance(599)
    assert [await replica.prune_if_due() for replica in replicas] == [None, None]
    clock.advance(2)
    assert await replicas[1].prune_if_due() is not None
    assert await replicas[0].prune_if_due() is None


def test_retention_is_off_by_default_and_refuses_negative_settings() -> None:
    settings = EngineSettings()
    policy = RetentionPolicy.from_days(settings.retention_run_events_days, settings.retention_runs_days)
    assert not policy.enabled
    with pytest.raises(ValueError):
        EngineSettings(retention_runs_days=-1)
