"""The system as real processes on PostgreSQL through PgBouncer in
transaction mode (Debian's, started here: tests/pgbouncer.py): two engine
replicas behind one gateway that balances over both, threads, memory and
router; every service's database URL names the pooler and turns prepared
statements off, its LISTEN URL names PostgreSQL itself. The pooler lends
each database fewer server connections than one service's pool opens, so
the services' transactions take turns on shared server connections."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass

import asyncpg
import httpx
import pytest
import pytest_asyncio

from tests.databases import ADMIN_URL, SERVICES, fetch_rows
from tests.e2e.sse import SseEvent, read_events
from tests.pgbouncer import POOL_SIZE, PgBouncer, pgbouncer
from tests.processes import backing_services, child_env, free_ports, process, wait_grpc_serving, wait_http_ok

pytestmark = [pytest.mark.postgres, pytest.mark.asyncio(loop_scope="module")]

TOKEN = "pooled-token"
ENGINES = ("engine-a", "engine-b")
RUNS = 8


@dataclass
class PooledSystem:
    gateway: str
    pooler: PgBouncer
    databases: dict[str, str]  # service -> its PostgreSQL URL (not the pooler's)

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.gateway, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)

    async def runs(self) -> list[asyncpg.Record]:
        return await fetch_rows(self.databases["engine"], "SELECT id, instance_id, status FROM agent_runs")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pooled(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[PooledSystem]:
    tmp_path = tmp_path_factory.mktemp("pgbouncer")
    ports = free_ports("threads", "memory", "router", *ENGINES, "gateway")
    engines_target = "ipv4:" + ",".join(f"127.0.0.1:{ports[name]}" for name in ENGINES)
    settings = {
        "SWITCHBOARD_GATEWAY_ENGINE_ADDRESS": engines_target,
        "SWITCHBOARD_GATEWAY_THREADS_ADDRESS": f"127.0.0.1:{ports['threads']}",
        "SWITCHBOARD_GATEWAY_TOKENS": f"{TOKEN}:alice",
    }
    with pgbouncer(ADMIN_URL) as pooler:
        async with AsyncExitStack() as stack:
            urls, common = await stack.enter_async_context(
                backing_services(tmp_path, ports, "sbpooled", settings, pooler)
            )
            for name in ENGINES:
                overrides = {
                    "SWITCHBOARD_ENGINE_PORT": str(ports[name]),
                    "SWITCHBOARD_ENGINE_INSTANCE_ID": name,
                }
                log = tmp_path / f"{name}.log"
                argv = [sys.executable, "-m", "services.engine"]
                await stack.enter_async_context(process(argv, child_env({**common, **overrides}), log))
                await wait_grpc_serving(f"127.0.0.1:{ports[name]}", log)
            env = child_env({**common, "SWITCHBOARD_GATEWAY_PORT": str(ports["gateway"])})
            log = tmp_path / "gateway.log"
            await stack.enter_async_context(process([sys.executable, "-m", "gateway"], env, log))
            gateway = f"http://127.0.0.1:{ports['gateway']}"
            await wait_http_ok(f"{gateway}/healthz", log)
            yield PooledSystem(gateway, pooler, urls)


def run_and_replay(system: PooledSystem, index: int) -> tuple[list[SseEvent], list[SseEvent]]:
    """A run of a new conversation, streamed to its end; then its events
    read again from the start (served from the database, by whichever
    engine the gateway's call lands on)."""
    with system.client() as client:
        created = client.post("/api/agent/conversations", json={})
        assert created.status_code == 201, created.text
        conversation = created.json()["id"]
        message = {"message": f"Résume l'étape {index} du déploiement"}
        with client.stream("POST", f"/api/agent/conversations/{conversation}/messages", json=message) as r:
            assert r.status_code == 200, r.read()
            streamed = list(read_events(r))
        run_id = streamed[0].data["run_id"]
        with client.stream("GET", f"/api/agent/runs/{run_id}/events") as r:
            assert r.status_code == 200, r.read()
            replayed = list(read_events(r))
    return streamed, replayed


def persisted(events: list[SseEvent]) -> list[tuple[str | None, str, dict[str, object]]]:
    return [(event.id, event.event, event.data) for event in events if event.id is not None]


async def test_concurrent_runs_on_two_engines_through_the_pooler_stream_and_replay_whole(
    pooled: PooledSystem,
) -> None:
    """Runs started at once on both replicas: each stream is whole and in
    order, and reads back the same from the database. The pooler was in the
    path of every service, and multiplexed: more client connections logged
    in to the engine's database than the server connections it opened."""
    results = await asyncio.gather(*(asyncio.to_thread(run_and_replay, pooled, i) for i in range(RUNS)))
    for streamed, replayed in results:
        numbered = [int(event.id) for event in streamed if event.id is not None]
        assert numbered == list(range(1, len(numbered) + 1)), numbered  # no gap, no duplicate
        assert streamed[-1].event == "final", streamed[-1]
        assert "".join(e.data["text"] for e in streamed if e.event == "delta")
        assert persisted(replayed) == persisted(streamed)
    rows = await pooled.runs()
    assert len(rows) == RUNS and {row["status"] for row in rows} == {"done"}
    assert {row["instance_id"] for row in rows} == set(ENGINES)  # both replicas ran runs
    for service in SERVICES:
        database = pooled.databases[service].rsplit("/", 1)[1]
        assert pooled.pooler.logins(database) >= 1, service
        assert 1 <= pooled.pooler.server_connections(database) <= POOL_SIZE, service
    engine_database = pooled.databases["engine"].rsplit("/", 1)[1]
    assert pooled.pooler.logins(engine_database) > POOL_SIZE
