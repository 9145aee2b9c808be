"""Scheduled runs through ScheduleService, on both databases: bad input is
refused before anything is stored; a tick starts an ordinary run (surface
SCHEDULE, trigger_id the schedule) once, even with two engine replicas
polling; ticks that pass while no engine runs are counted missed and never
replayed; a tick claimed by an engine that stopped before starting its run
is started by another. Time moves on the test's clock, not by waiting."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from google.protobuf.json_format import MessageToDict
from prometheus_client import REGISTRY
from sqlalchemy import update
from sqlmodel import col

from services.engine.runs.run_context import AUTONOMOUS, AUTONOMOUS_HEADING
from services.engine.schedules.cron import TickPlan
from services.engine.schedules.models import Schedule
from services.engine.schedules.repository import SchedulesRepository
from services.engine.schedules.scheduler import tick_request_id
from services.engine.server import build_server as build_engine
from services.engine.settings import EngineSettings
from services.shared.db import create_engine
from switchboard.engine.v1 import (
    engine_pb2,
    engine_service_pb2,
    schedules_pb2,
    schedules_service_pb2,
    schedules_service_pb2_grpc,
)
from switchboard.threads.v1 import threads_pb2, threads_service_pb2
from tests.conftest import DatabaseFactory, MovableClock
from tests.polling import until
from tests.service.harness import as_user, expect_error, running
from tests.service.system import System, collect, conversation, system

pb = schedules_service_pb2
# Every five minutes: the clock moves by whole ticks, far from any real wait.
EVERY_5_MINUTES = "*/5 * * * *"
# The clock is a test's own: the scheduler finds a tick it moved to at its safety poll.
ENGINE_OPTIONS = {"safety_poll_seconds": 0.05, "schedule_misfire_grace_seconds": 60.0, "lease_seconds": 5.0}


@pytest.fixture
async def sb(make_database: DatabaseFactory, clock: MovableClock) -> AsyncIterator[System]:
    async with system(make_database, **ENGINE_OPTIONS) as running_system:
        yield running_system


async def create(
    sb: System, cron: str = EVERY_5_MINUTES, user: str = "alice", **target: str
) -> schedules_pb2.Schedule:
    schedule = schedules_pb2.Schedule(cron=cron, time_zone="Europe/Paris", message="Daily digest", **target)
    response = await sb.schedules.CreateSchedule(pb.CreateScheduleRequest(schedule=schedule), **as_user(user))
    return response.schedule


async def get(sb: System, schedule_id: str, user: str = "alice") -> schedules_pb2.Schedule:
    response = await sb.schedules.GetSchedule(pb.GetScheduleRequest(schedule_id=schedule_id), **as_user(user))
    return response.schedule


def ticks_counted(outcome: str) -> float:
    """The in-process engine's switchboard_schedule_ticks_total{outcome}."""
    return REGISTRY.get_sample_value("switchboard_schedule_ticks_total", {"outcome": outcome}) or 0.0


def move_to(clock: MovableClock, moment: datetime, past: float = 1.0) -> None:
    """Moves the clock to ``past`` seconds after ``moment``."""
    clock.advance((moment - clock()).total_seconds() + past)


async def scheduled_runs(sb: System, conversation_id: str, schedule_id: str) -> list[engine_pb2.Run]:
    runs = await sb.engine.ListRuns(
        engine_service_pb2.ListRunsRequest(conversation_id=conversation_id, page_size=100), **as_user("alice")
    )
    return [run for run in runs.runs if run.trigger_id == schedule_id]


# Bad input


async def test_bad_schedules_are_refused_and_store_nothing(sb: System) -> None:
    mine = await conversation(sb)
    bobs = await conversation(sb, user="bob")
    invalid, not_found = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND
    cases = [
        (schedules_pb2.Schedule(cron="61 * * * *", message="hi", conversation_id=mine), invalid),
        (schedules_pb2.Schedule(cron="* * *", message="hi", conversation_id=mine), invalid),
        (schedules_pb2.Schedule(cron="every day", message="hi", conversation_id=mine), invalid),
        (
            schedules_pb2.Schedule(
                cron="0 9 * * *", time_zone="Mars/Olympus", message="hi", conversation_id=mine
            ),
            invalid,
        ),
        (schedules_pb2.Schedule(cron="0 9 * * *", message="  ", conversation_id=mine), invalid),
        (schedules_pb2.Schedule(cron="0 9 * * *", message="hi"), invalid),  # no target
        (schedules_pb2.Schedule(cron="0 9 * * *", message="hi", conversation_id=bobs), not_found),
        (schedules_pb2.Schedule(cron="0 9 * * *", message="hi", conversation_id="nope"), not_found),
        (schedules_pb2.Schedule(cron="0 9 * * *", message="hi", agent_id="no-such-agent"), not_found),
    ]
    for schedule, code in cases:
        reason = "ERROR_REASON_NOT_FOUND" if code == not_found else "ERROR_REASON_INVALID_ARGUMENT"
        await expect_error(
            sb.schedules.CreateSchedule(pb.CreateScheduleRequest(schedule=schedule), **as_user("alice")),
            code,
            reason,
        )
    listed = await sb.schedules.ListSchedules(pb.ListSchedulesRequest(), **as_user("alice"))
    assert list(listed.schedules) == []
    # A client cannot pass its run off as a scheduled one.
    spoofed = engine_service_pb2.StartRunRequest(
        conversation_id=mine, message="hi", surface=engine_pb2.SURFACE_SCHEDULE
    )
    await expect_error(
        collect(sb.engine.StartRun(spoofed, **as_user("alice"))), invalid, "ERROR_REASON_INVALID_ARGUMENT"
    )
    await expect_error(
        sb.schedules.ListSchedules(pb.ListSchedulesRequest(page_token="garbage"), **as_user("alice")),
        invalid,
        "ERROR_REASON_INVALID_ARGUMENT",
    )


# Create, list, pause, resume, delete


async def test_schedules_are_listed_by_page_paused_resumed_and_deleted_by_their_owner_only(
    sb: System, clock: MovableClock
) -> None:
    target = await conversation(sb)
    created = [await create(sb, conversation_id=target) for _ in range(3)]
    first = created[0]
    assert first.conversation_id == target and first.time_zone == "Europe/Paris" and not first.paused
    next_tick = first.next_run_time.ToDatetime(tzinfo=UTC)
    assert clock() < next_tick <= clock() + timedelta(minutes=5) and next_tick.minute % 5 == 0

    page = await sb.schedules.ListSchedules(pb.ListSchedulesRequest(page_size=2), **as_user("alice"))
    rest = await sb.schedules.ListSchedules(
        pb.ListSchedulesRequest(page_size=2, page_token=page.next_page_token), **as_user("alice")
    )
    assert [s.id for s in [*page.schedules, *rest.schedules]] == [s.id for s in created]
    assert rest.next_page_token == ""
    bob = await sb.schedules.ListSchedules(pb.ListSchedulesRequest(), **as_user("bob"))
    assert list(bob.schedules) == []

    for call in (sb.schedules.GetSchedule, sb.schedules.PauseSchedule, sb.schedules.DeleteSchedule):
        request = {
            sb.schedules.GetSchedule: pb.GetScheduleRequest,
            sb.schedules.PauseSchedule: pb.PauseScheduleRequest,
            sb.schedules.DeleteSchedule: pb.DeleteScheduleRequest,
        }[call](schedule_id=first.id)
        await expect_error(
            call(request, **as_user("bob")), grpc.StatusCode.NOT_FOUND, "ERROR_REASON_NOT_FOUND"
        )

    paused = (
        await sb.schedules.PauseSchedule(pb.PauseScheduleRequest(schedule_id=first.id), **as_user("alice"))
    ).schedule
    assert paused.paused and not paused.HasField("next_run_time")
    # A paused schedule's ticks pass without a run and without being missed.
    clock.advance(3600)
    resumed = (
        await sb.schedules.ResumeSchedule(pb.ResumeScheduleRequest(schedule_id=first.id), **as_user("alice"))
    ).schedule
    assert not resumed.paused and resumed.missed_count == 0 and resumed.run_count == 0
    assert resumed.next_run_time.ToDatetime(tzinfo=UTC) > clock()

    await sb.schedules.DeleteSchedule(pb.DeleteScheduleRequest(schedule_id=first.id), **as_user("alice"))
    await expect_error(get(sb, first.id), grpc.StatusCode.NOT_FOUND, "ERROR_REASON_NOT_FOUND")
    await expect_error(
        sb.schedules.DeleteSchedule(pb.DeleteScheduleRequest(schedule_id=first.id), **as_user("alice")),
        grpc.StatusCode.NOT_FOUND,
        "ERROR_REASON_NOT_FOUND",
    )


async def test_create_is_idempotent_on_request_id(sb: System) -> None:
    target = await conversation(sb)
    schedule = schedules_pb2.Schedule(cron="0 9 * * MON", message="Weekly plan", conversation_id=target)
    request = pb.CreateScheduleRequest(request_id="weekly-1", schedule=schedule)
    first = await sb.schedules.CreateSchedule(request, **as_user("alice"))
    again = await sb.schedules.CreateSchedule(request, **as_user("alice"))
    assert first.schedule.id == again.schedule.id
    listed = await sb.schedules.ListSchedules(pb.ListSchedulesRequest(), **as_user("alice"))
    assert len(listed.schedules) == 1


# Ticks


async def test_a_tick_starts_an_ordinary_run_marked_scheduled(sb: System, clock: MovableClock) -> None:
    target = await conversation(sb)
    schedule = await create(sb, conversation_id=target)
    tick = schedule.next_run_time.ToDatetime(tzinfo=UTC)
    move_to(clock, tick)
    ran = await until(lambda: get(sb, schedule.id), lambda s: bool(s.last_run_id))
    assert ran.run_count == 1 and ran.missed_count == 0 and ran.last_error == ""
    assert ran.last_run_time.ToDatetime(tzinfo=UTC) == tick
    assert ran.next_run_time.ToDatetime(tzinfo=UTC) == tick + timedelta(minutes=5)
    run = (
        await sb.engine.GetRun(engine_service_pb2.GetRunRequest(run_id=ran.last_run_id), **as_user("alice"))
    ).run
    assert run.surface == engine_pb2.SURFACE_SCHEDULE
    assert run.trigger_id == schedule.id and run.conversation_id == target
    assert MessageToDict(run.trigger_payload) == {"schedule_id": schedule.id, "tick": tick.isoformat()}
    assert run.request_id == tick_request_id(schedule.id, tick)
    # It is an ordinary run: it answers on the conversation and ends done.
    events = sb.engine.WatchRun(engine_service_pb2.WatchRunRequest(run_id=run.id), **as_user("alice"))
    assert [r.event async for r in events][-1].WhichOneof("kind") == "final"
    # Nobody asked for it in person: its regime is autonomous, and its model
    # was told so, last in the working context.
    run = (await sb.engine.GetRun(engine_service_pb2.GetRunRequest(run_id=run.id), **as_user("alice"))).run
    assert run.context == engine_pb2.RunContext(regime=engine_pb2.RUN_REGIME_AUTONOMOUS)
    told = {layer.key: layer for layer in run.layers}["run_context"]
    assert told.present and told.size_chars == len(f"{AUTONOMOUS_HEADING}\n{AUTONOMOUS}")


async def test_a_tick_on_an_agent_runs_on_its_shared_thread(sb: System, clock: MovableClock) -> None:
    agent = threads_pb2.Agent(id="qa", display_name="QA", persona="The QA agent.")
    await sb.threads.CreateAgent(threads_service_pb2.CreateAgentRequest(agent=agent), **as_user("alice"))
    schedule = await create(sb, agent_id="qa")
    assert schedule.agent_id == "qa"
    move_to(clock, schedule.next_run_time.ToDatetime(tzinfo=UTC))
    ran = await until(lambda: get(sb, schedule.id), lambda s: bool(s.last_run_id))
    run = (
        await sb.engine.GetRun(engine_service_pb2.GetRunRequest(run_id=ran.last_run_id), **as_user("alice"))
    ).run
    assert (
        run.surface == engine_pb2.SURFACE_SCHEDULE and run.agent_id == "qa" and run.trigger_id == schedule.id
    )
    assert run.context.regime == engine_pb2.RUN_REGIME_AUTONOMOUS


async def test_ticks_that_passed_while_nothing_ran_are_counted_missed_not_replayed(
    sb: System, clock: MovableClock
) -> None:
    target = await conversation(sb)
    schedule = await create(sb, conversation_id=target)
    first = schedule.next_run_time.ToDatetime(tzinfo=UTC)
    missed_before = ticks_counted("missed")
    # Twelve ticks later, 30 s after the twelfth: within the 60 s grace it
    # runs (late); the eleven before it are missed.
    twelfth = first + timedelta(minutes=55)
    move_to(clock, twelfth, past=30)
    ran = await until(lambda: get(sb, schedule.id), lambda s: bool(s.last_run_id))
    assert (ran.run_count, ran.missed_count) == (1, 11)
    assert ran.last_run_time.ToDatetime(tzinfo=UTC) == twelfth
    assert ran.last_missed_time.ToDatetime(tzinfo=UTC) == twelfth - timedelta(minutes=5)
    assert len(await scheduled_runs(sb, target, schedule.id)) == 1
    # Far past the grace: every tick missed, none run.
    move_to(clock, twelfth + timedelta(minutes=60), past=90)
    later = await until(lambda: get(sb, schedule.id), lambda s: s.missed_count > 11)
    assert (later.run_count, later.missed_count) == (1, 11 + 12)
    assert len(await scheduled_runs(sb, target, schedule.id)) == 1
    assert ticks_counted("missed") - missed_before == 23  # the engine's metric says the same


async def test_a_tick_whose_target_is_gone_records_why(sb: System, clock: MovableClock) -> None:
    target = await conversation(sb)
    schedule = await create(sb, conversation_id=target)
    # The conversation is gone (retention pruned it): nothing to run on.
    database = create_engine(sb.database_urls["engine"])
    try:
        async with database.begin() as connection:
            await connection.execute(
                update(Schedule).where(col(Schedule.id) == schedule.id).values(conversation_id="gone")
            )
    finally:
        await database.dispose()
    move_to(clock, schedule.next_run_time.ToDatetime(tzinfo=UTC))
    failed = await until(lambda: get(sb, schedule.id), lambda s: bool(s.last_error))
    assert failed.run_count == 1 and failed.last_run_id == "" and "not found" in failed.last_error


# Replicas and restarts


@asynccontextmanager
async def another_engine(
    sb: System, instance_id: str
) -> AsyncIterator[schedules_service_pb2_grpc.ScheduleServiceStub]:
    """A second engine process-like replica on the same database and services."""
    settings = EngineSettings(
        port=0,
        database_url=sb.database_urls["engine"],
        threads_address=f"127.0.0.1:{sb.services['threads'].port}",
        memory_address=f"127.0.0.1:{sb.services['memory'].port}",
        router_address=f"127.0.0.1:{sb.services['router'].port}",
        instance_id=instance_id,
        **ENGINE_OPTIONS,  # type: ignore[arg-type]
    )
    async with running(build_engine, settings) as (_, channel):
        yield schedules_service_pb2_grpc.ScheduleServiceStub(channel)


async def test_two_replicas_run_each_tick_once(sb: System, clock: MovableClock) -> None:
    target = await conversation(sb)
    schedule = await create(sb, conversation_id=target)
    tick = schedule.next_run_time.ToDatetime(tzinfo=UTC)
    async with another_engine(sb, "replica-b"):
        for count in range(1, 9):
            move_to(clock, tick)
            await until(
                lambda: get(sb, schedule.id), lambda s, n=count: s.run_count == n and bool(s.last_run_id)
            )
            tick += timedelta(minutes=5)
    runs = await scheduled_runs(sb, target, schedule.id)
    ticks = [run.trigger_payload["tick"] for run in runs]
    assert len(runs) == 8 and len(set(ticks)) == 8
    assert (await get(sb, schedule.id)).missed_count == 0


async def test_a_claimed_tick_whose_engine_stopped_before_its_run_is_started_once_by_another(
    sb: System, clock: MovableClock
) -> None:
    """The claim commits first (the tick counted, pending); an engine that
    stops right then leaves it pending: past a lease, another starts it."""
    target = await conversation(sb)
    # A paused schedule: the engine's own loop leaves it alone while the test claims.
    schedule = await create(sb, conversation_id=target)
    await sb.schedules.PauseSchedule(pb.PauseScheduleRequest(schedule_id=schedule.id), **as_user("alice"))
    tick = schedule.next_run_time.ToDatetime(tzinfo=UTC)
    database = create_engine(sb.database_urls["engine"])
    try:
        repo = SchedulesRepository(database)
        await repo.set_paused("alice", schedule.id, False, tick)
        # The claim of an engine that stops before starting the run.
        now = tick + timedelta(seconds=1)
        plan = TickPlan(missed=[], run=tick, next_tick=tick + timedelta(minutes=5))
        assert await repo.claim(schedule.id, tick, plan, now)
        assert not await repo.claim(schedule.id, tick, plan, now)  # a tick is claimed once
    finally:
        await database.dispose()
    claimed = await get(sb, schedule.id)
    assert claimed.run_count == 1 and claimed.last_run_id == ""
    move_to(clock, tick, past=1 + ENGINE_OPTIONS["lease_seconds"] + 1)
    started = await until(lambda: get(sb, schedule.id), lambda s: bool(s.last_run_id))
    assert started.run_count == 1
    runs = await scheduled_runs(sb, target, schedule.id)
    assert [run.id for run in runs] == [started.last_run_id]
    assert runs[0].request_id == tick_request_id(schedule.id, tick)


async def test_an_engine_restarted_after_ticks_passed_counts_them_missed(
    make_database: DatabaseFactory, clock: MovableClock
) -> None:
    async with system(make_database, **ENGINE_OPTIONS) as sb:
        target = await conversation(sb)
        schedule = await create(sb, conversation_id=target)
        first = schedule.next_run_time.ToDatetime(tzinfo=UTC)
        move_to(clock, first)
        await until(lambda: get(sb, schedule.id), lambda s: bool(s.last_run_id))
        # The only engine stops; three ticks pass; a new one starts.
        await sb.services["engine"].stop(None)
        move_to(clock, first + timedelta(minutes=15), past=120)
        async with another_engine(sb, "restarted") as schedules:

            async def schedule_now() -> schedules_pb2.Schedule:
                request = pb.GetScheduleRequest(schedule_id=schedule.id)
                return (await schedules.GetSchedule(request, **as_user("alice"))).schedule

            after = await until(schedule_now, lambda s: s.missed_count > 0)
    assert (after.run_count, after.missed_count) == (1, 3)
    assert after.last_missed_time.ToDatetime(tzinfo=UTC) == first + timedelta(minutes=15)
    assert after.next_run_time.ToDatetime(tzinfo=UTC) == first + timedelta(minutes=20)
