"""PostgreSQL restarted under running runs. Threads, memory, router and the
engine run as real processes on a private PostgreSQL cluster (never the
shared server); runs stream from the offline model while the cluster is
stopped, kept down, started again, and later restarted once more. Then:

* every run ended ``done``, or ``failed`` with its cause recorded: none is
  left ``running``;
* one run row per request id (clients retry StartRun with the same id), one
  user and one assistant entry per run, each run's events numbered 1..n with
  no gap or repeat, one terminal event, last, and what each client received
  is exactly what is stored;
* the four services still report SERVING and new runs complete."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import grpc
import pytest

from services.healthcheck import check
from services.shared.identity import user_metadata
from switchboard.engine.v1 import engine_pb2, engine_service_pb2, engine_service_pb2_grpc
from switchboard.threads.v1 import threads_service_pb2, threads_service_pb2_grpc
from tests.private_postgres import PrivateCluster, private_cluster
from tests.processes import child_env, free_ports, process, wait_grpc_serving

pytestmark = pytest.mark.postgres

SERVICES = ("threads", "memory", "router", "engine")
USER = "alice"
# The offline model's pace: a run streams for about two seconds.
TOKEN_DELAY = 0.1
RUNS = 14
START_EVERY = 0.3  # seconds between two run starts
DOWN_SECONDS = 2.5  # how long the first restart keeps the cluster down


@dataclass
class System:
    cluster: PrivateCluster
    addresses: dict[str, str]
    logs: dict[str, Path]
    urls: dict[str, str]

    async def fetch(self, service: str, query: str) -> list[asyncpg.Record]:
        connection = await asyncpg.connect(self.urls[service].replace("+asyncpg", ""), timeout=10)
        try:
            return list(await connection.fetch(query))
        finally:
            await connection.close()


@pytest.fixture
async def system(tmp_path: Path) -> AsyncIterator[System]:
    async with AsyncExitStack() as stack:
        cluster = await stack.enter_async_context(private_cluster())
        urls = {name: await cluster.create_database(f"sb_{name}") for name in SERVICES}
        ports = free_ports(*SERVICES)
        addresses = {name: f"127.0.0.1:{port}" for name, port in ports.items()}
        common = {
            **{f"SWITCHBOARD_{name.upper()}_DATABASE_URL": url for name, url in urls.items()},
            **{f"SWITCHBOARD_{name.upper()}_PORT": str(port) for name, port in ports.items()},
            "SWITCHBOARD_MEMORY_EMBEDDER": "hashing",
            "SWITCHBOARD_ROUTER_EMBEDDER": "hashing",
            "SWITCHBOARD_ENGINE_THREADS_ADDRESS": addresses["threads"],
            "SWITCHBOARD_ENGINE_MEMORY_ADDRESS": addresses["memory"],
            "SWITCHBOARD_ENGINE_ROUTER_ADDRESS": addresses["router"],
            "SWITCHBOARD_ENGINE_OFFLINE_TOKEN_DELAY": str(TOKEN_DELAY),
            "SWITCHBOARD_LOG_LEVEL": "INFO",
            # Longer than the test: the wake-up listeners must reconnect and catch up.
            **{f"SWITCHBOARD_{name.upper()}_SAFETY_POLL_SECONDS": "600" for name in SERVICES},
            **{f"SWITCHBOARD_{name.upper()}_SHUTDOWN_GRACE": "2" for name in SERVICES},
        }
        logs = {name: tmp_path / f"{name}.log" for name in SERVICES}
        children = []
        # All four at once: the engine needs only its own database to start.
        for name in SERVICES:
            argv = [sys.executable, "-m", f"services.{name}"]
            children.append(await stack.enter_async_context(process(argv, child_env(common), logs[name])))
        await asyncio.gather(*(wait_grpc_serving(addresses[n], logs[n]) for n in SERVICES))
        try:
            yield System(cluster, addresses, logs, urls)
        finally:
            for child in children:  # stopped together rather than one after the other
                if child.returncode is None:
                    child.terminate()


@dataclass
class ClientRun:
    """One run as its client saw it: StartRun, retried with the same request
    id when the call itself fails (the idempotent way to retry)."""

    request_id: str
    events: list[engine_pb2.RunEvent] = field(default_factory=list)
    attempts: int = 0
    errors: list[str] = field(default_factory=list)


async def create_conversation(system: System, index: int) -> str:
    async with grpc.aio.insecure_channel(system.addresses["threads"]) as channel:
        stub = threads_service_pb2_grpc.ThreadsServiceStub(channel)
        for attempt in range(20):
            try:
                response = await stub.CreateConversation(
                    threads_service_pb2.CreateConversationRequest(request_id=f"conversation-{index}"),
                    metadata=user_metadata(USER),
                    timeout=10,
                )
                return str(response.conversation.id)
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.UNAVAILABLE or attempt == 19:
                    raise
                await asyncio.sleep(0.5)
    raise AssertionError("unreachable")


async def follow_run(system: System, conversation_id: str, request_id: str) -> ClientRun:
    run = ClientRun(request_id)
    request = engine_service_pb2.StartRunRequest(
        request_id=request_id,
        conversation_id=conversation_id,
        message=f"{request_id}: please summarise where the deploy window stands this week",
    )
    async with grpc.aio.insecure_channel(system.addresses["engine"]) as channel:
        stub = engine_service_pb2_grpc.EngineServiceStub(channel)
        while run.attempts < 10:
            run.attempts += 1
            # A retry with the same request id streams the same run from event 1.
            run.events = []
            try:
                async for response in stub.StartRun(request, metadata=user_metadata(USER), timeout=120):
                    run.events.append(response.event)
                return run
            except grpc.aio.AioRpcError as error:
                run.errors.append(f"{error.code().name}: {error.details()}")
                await asyncio.sleep(0.5)
    return run


def _terminal(event: engine_pb2.RunEvent) -> str | None:
    kind = event.WhichOneof("kind")
    return kind if kind in ("final", "error") else None


async def test_runs_survive_postgres_restarts_without_duplicates(system: System) -> None:
    began = time.monotonic()
    conversations = await asyncio.gather(*(create_conversation(system, i) for i in range(RUNS + 2)))

    async def staggered(index: int) -> ClientRun:
        await asyncio.sleep(index * START_EVERY)
        return await follow_run(system, conversations[index], f"restart-run-{index}")

    clients = [asyncio.create_task(staggered(i)) for i in range(RUNS)]
    # First restart while the first runs stream and others start: stopped
    # (fast: connections are cut, open transactions rolled back), kept down,
    # started again. The second one, a plain fast restart, lands on runs
    # that are finishing (their last events, their assistant entries).
    await asyncio.sleep(1.2)
    await system.cluster.restart(down_seconds=DOWN_SECONDS)
    await asyncio.sleep(1.5)
    await system.cluster.restart(down_seconds=0.3)
    restarted = time.monotonic()
    runs = await asyncio.wait_for(asyncio.gather(*clients), timeout=90)

    # New runs after the restarts succeed at once.
    after = await asyncio.gather(
        *(follow_run(system, conversations[RUNS + i], f"after-restart-{i}") for i in range(2))
    )
    for name in SERVICES:
        assert await asyncio.to_thread(check, system.addresses[name], "", 2.0) == "SERVING", name

    rows = await system.fetch("engine", "SELECT id, request_id, status, error FROM agent_runs")
    by_request: dict[str, list[asyncpg.Record]] = {}
    for row in rows:
        by_request.setdefault(row["request_id"], []).append(row)
    events = await system.fetch("engine", "SELECT run_id, sequence, payload FROM run_events")
    stored: dict[str, list[engine_pb2.RunEvent]] = {}
    for row in sorted(events, key=lambda r: (r["run_id"], r["sequence"])):
        stored.setdefault(row["run_id"], []).append(engine_pb2.RunEvent.FromString(row["payload"]))
    entries = await system.fetch("threads", "SELECT run_id, role FROM entries")
    logs = [system.logs[name].read_text() for name in ("engine", "threads")]
    retried = sum(log.count("database unavailable during") for log in logs)

    outcomes: dict[str, int] = {}
    problems: list[str] = []
    # One run row per request id, whatever the client retried.
    if sorted(by_request) != sorted(r.request_id for r in [*runs, *after]):
        problems.append(f"run rows {sorted(by_request)}")
    for client in [*runs, *after]:
        found = by_request.get(client.request_id, [])
        if len(found) != 1:
            problems.append(f"{client.request_id}: {len(found)} run rows")
            continue
        row = found[0]
        status, name = row["status"], client.request_id
        outcomes[status] = outcomes.get(status, 0) + 1
        # Ended, and a failure carries its cause.
        if status not in ("done", "failed") or (status == "failed" and not row["error"]):
            problems.append(f"{name}: ended {status!r} with error {row['error']!r}")
        # Stored events: 1..n, no gap, no repeat, one terminal event, last.
        run_events = stored.get(row["id"], [])
        sequences = [e.sequence for e in run_events]
        if sequences != list(range(1, len(sequences) + 1)):
            problems.append(f"{name}: stored sequences {sequences}")
        terminals = [kind for kind in map(_terminal, run_events) if kind]
        expected = "final" if status == "done" else "error"
        if terminals != [expected] or not run_events or _terminal(run_events[-1]) is None:
            problems.append(f"{name}: terminal events {terminals}, not one {expected!r} last")
        # The client received exactly what is stored (on its last attempt).
        if [e.SerializeToString() for e in client.events] != [e.SerializeToString() for e in run_events]:
            problems.append(
                f"{name}: client saw {[e.sequence for e in client.events]}, stored {sequences}, "
                f"client errors {client.errors}"
            )
        # One user entry and one assistant entry per run (at most, for a failed one).
        roles = sorted(e["role"] for e in entries if e["run_id"] == row["id"])
        if len(roles) != len(set(roles)) or (status == "done" and len(roles) != 2):
            problems.append(f"{name}: entry roles {roles}")
    problems += [
        f"{r.request_id}: not done after the restarts"
        for r in after
        if r.events and _terminal(r.events[-1]) != "final"
    ]
    # Memory and router are not retried inside: a run that met them down may
    # carry a notice (it went on without recall or routing). Reported only.
    every_event = [e for run_events in stored.values() for e in run_events]
    notices = sorted({e.notice.code for e in every_event if e.WhichOneof("kind") == "notice"})
    print(
        f"\n{RUNS + 2} runs, outcomes {outcomes}, notices {notices}, "
        f"2 restarts ({DOWN_SECONDS} s and 0.3 s down), "
        f"{retried} retry log lines, client StartRun attempts {[r.attempts for r in runs]}, "
        f"{time.monotonic() - restarted:.1f} s from the last restart to the end, "
        f"{time.monotonic() - began:.1f} s in all"
    )
    assert not problems, "\n".join(problems)
    # The restarts did hit work in flight: database operations were retried.
    assert retried > 0, logs[0][-3000:]
    # And the engine's wake-up listener lost its connection, then made it again.
    assert "wake-up listener's connection was lost" in logs[0], logs[0][-3000:]
