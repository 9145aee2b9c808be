"""A schedule run by two engine replicas, as real processes on one
PostgreSQL (with one threads, memory and router): a per-second schedule for
a real window of many ticks, while one engine restarts, then while both are
stopped past the misfire grace, then after both come back.

Moving the clock across processes is not possible here, so the schedule
ticks every second and the test counts exactly against the ticks that
elapsed: every tick between the first and the last one run is either run
once (its run's trigger payload names it, and no tick is named twice) or
counted missed, and the ticks of the downtime are missed, not replayed."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Awaitable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import grpc
import pytest

from services.shared.identity import user_metadata
from switchboard.engine.v1 import schedules_pb2, schedules_service_pb2, schedules_service_pb2_grpc
from switchboard.threads.v1 import threads_service_pb2, threads_service_pb2_grpc
from tests.polling import until
from tests.processes import backing_services, child_env, free_ports, process, wait_grpc_serving

pytestmark = pytest.mark.postgres

ENGINES = ("engine-a", "engine-b")
GRACE_SECONDS = 2.0


@dataclass
class Cluster:
    """The services, and a way to stop and start each engine."""

    stack: AsyncExitStack
    tmp_path: Path
    common: dict[str, str]
    ports: dict[str, int]
    engine_database: str
    engines: dict[str, asyncio.subprocess.Process] = field(default_factory=dict)
    starts: int = 0

    def address(self, name: str) -> str:
        return f"127.0.0.1:{self.ports[name]}"

    async def start_engine(self, name: str) -> None:
        self.starts += 1
        env = child_env(
            {
                **self.common,
                "SWITCHBOARD_ENGINE_PORT": str(self.ports[name]),
                "SWITCHBOARD_ENGINE_INSTANCE_ID": name,
            }
        )
        log = self.tmp_path / f"{name}-{self.starts}.log"
        argv = [sys.executable, "-m", "services.engine"]
        self.engines[name] = await self.stack.enter_async_context(process(argv, env, log))
        await wait_grpc_serving(self.address(name), log)

    async def stop_engine(self, name: str) -> None:
        """SIGTERM, as an orchestrator stops a replica (its drain included)."""
        child = self.engines.pop(name)
        child.terminate()
        await asyncio.wait_for(child.wait(), 60)

    async def scheduled_ticks(self, schedule_id: str) -> list[str]:
        """The tick each of the schedule's runs was started for."""
        connection = await asyncpg.connect(self.engine_database.replace("+asyncpg", ""))
        try:
            rows = await connection.fetch(
                "SELECT trigger_payload_json FROM agent_runs WHERE trigger_id = $1", schedule_id
            )
        finally:
            await connection.close()
        return [json.loads(row["trigger_payload_json"])["tick"] for row in rows]


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    ports = free_ports("threads", "memory", "router", *ENGINES)
    async with AsyncExitStack() as stack:
        settings = {
            "SWITCHBOARD_ENGINE_LEASE_SECONDS": "2",
            # Longer than the test: the next tick's time and announcements wake the schedulers.
            "SWITCHBOARD_ENGINE_SAFETY_POLL_SECONDS": "600",
            "SWITCHBOARD_ENGINE_SCHEDULE_MISFIRE_GRACE_SECONDS": str(GRACE_SECONDS),
        }
        urls, common = await stack.enter_async_context(
            backing_services(tmp_path, ports, "sbschedules", settings)
        )
        running = Cluster(stack, tmp_path, common, ports, urls["engine"])
        for name in ENGINES:
            await running.start_engine(name)
        yield running


def instant(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp).astimezone(UTC)


async def test_each_tick_runs_once_or_is_missed_across_replicas_restarts_and_downtime(
    cluster: Cluster,
) -> None:
    async with grpc.aio.insecure_channel(cluster.address("threads")) as threads_channel:
        threads = threads_service_pb2_grpc.ThreadsServiceStub(threads_channel)
        created = await threads.CreateConversation(
            threads_service_pb2.CreateConversationRequest(), metadata=user_metadata("alice"), timeout=10
        )
        target = created.conversation.id

    async def read(schedule_id: str) -> schedules_pb2.Schedule:
        # Whichever engine is up answers (both read the same database).
        for name in cluster.engines:
            async with grpc.aio.insecure_channel(cluster.address(name)) as channel:
                stub = schedules_service_pb2_grpc.ScheduleServiceStub(channel)
                request = schedules_service_pb2.GetScheduleRequest(schedule_id=schedule_id)
                return (await stub.GetSchedule(request, metadata=user_metadata("alice"), timeout=10)).schedule
        raise AssertionError("no engine is running")

    async with grpc.aio.insecure_channel(cluster.address("engine-a")) as channel:
        stub = schedules_service_pb2_grpc.ScheduleServiceStub(channel)
        spec = schedules_pb2.Schedule(cron="* * * * * *", message="ping", conversation_id=target)
        created_schedule = await stub.CreateSchedule(
            schedules_service_pb2.CreateScheduleRequest(schedule=spec),
            metadata=user_metadata("alice"),
            timeout=10,
        )
    schedule_id = created_schedule.schedule.id
    first = created_schedule.schedule.next_run_time.ToDatetime(tzinfo=UTC)

    def schedule() -> Awaitable[schedules_pb2.Schedule]:
        return read(schedule_id)

    # Both replicas polling.
    await until(schedule, lambda s: s.run_count >= 5, timeout=60)
    # One replica restarts; the other goes on meanwhile.
    await cluster.stop_engine("engine-a")
    before_restart = (await schedule()).run_count
    await cluster.start_engine("engine-a")
    await until(schedule, lambda s: s.run_count >= before_restart + 4, timeout=60)
    # Both stop, for longer than the misfire grace; then both come back.
    await cluster.stop_engine("engine-a")
    await cluster.stop_engine("engine-b")
    stopped = datetime.now(UTC)
    await asyncio.sleep(GRACE_SECONDS + 5)  # real ticks must pass unserved: that is what is tested
    resumed = datetime.now(UTC)
    for name in ENGINES:
        await cluster.start_engine(name)
    back = await until(schedule, lambda s: s.missed_count > 0, timeout=60)
    await until(schedule, lambda s: s.run_count >= back.run_count + 3, timeout=60)

    async with grpc.aio.insecure_channel(cluster.address("engine-b")) as channel:
        stub = schedules_service_pb2_grpc.ScheduleServiceStub(channel)
        paused = await stub.PauseSchedule(
            schedules_service_pb2.PauseScheduleRequest(schedule_id=schedule_id),
            metadata=user_metadata("alice"),
            timeout=10,
        )
    final = paused.schedule
    last = final.last_run_time.ToDatetime(tzinfo=UTC)
    # Every claimed tick's run gets started (the claim is counted first).
    deadline = asyncio.get_running_loop().time() + 30
    while len(ticks := await cluster.scheduled_ticks(schedule_id)) < final.run_count:
        assert asyncio.get_running_loop().time() < deadline, (len(ticks), final)
        await asyncio.sleep(0.1)

    run_ticks = [instant(tick) for tick in ticks]
    assert len(run_ticks) == len(set(run_ticks)) == final.run_count, "a tick ran twice"
    assert all(first <= tick <= last for tick in run_ticks)
    elapsed = int((last - first).total_seconds()) + 1
    assert final.run_count + final.missed_count == elapsed, (final.run_count, final.missed_count, elapsed)
    # The downtime's ticks were missed, not replayed afterwards: every tick
    # already older than the grace when the engines came back.
    unserved = (stopped + timedelta(seconds=1), resumed - timedelta(seconds=GRACE_SECONDS + 0.5))
    assert not [tick for tick in run_ticks if unserved[0] < tick < unserved[1]]
    assert final.missed_count >= int((unserved[1] - unserved[0]).total_seconds()) >= 3
