"""Run webhooks with real processes on one PostgreSQL: two engine replicas
and a gateway balancing over both, a real receiver in this process. Through
the HTTP API: a background run answers 202 and ends by webhook; refused URLs
are 400. Each run is delivered once whichever replica ends it; a `kill -9` of
the engine holding an attempt, then its restart, still delivers the run
exactly once (one success recorded, one webhook-id)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx
import pytest
import pytest_asyncio
from standardwebhooks import Webhook

from tests.fakes.webhook_receiver import WebhookReceiver, webhook_receiver
from tests.processes import backing_services, child_env, free_ports, process, wait_grpc_serving, wait_http_ok

# One system for the module (six processes): each test reads only its own runs.
pytestmark = [pytest.mark.postgres, pytest.mark.asyncio(loop_scope="module")]

TOKEN = "webhook-token"
ENGINES = ("engine-a", "engine-b")
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8GKYo="
# Longer than the module runs: only wake-ups move the engines.
NO_POLL_SECONDS = 600
# An attempt's time limit: a dead engine's claim expires this + 5 s after it was made.
ATTEMPT_TIMEOUT = 2.0


@dataclass
class Webhooks:
    gateway: str
    receiver: WebhookReceiver
    engine_database: str
    engines: dict[str, asyncio.subprocess.Process]
    start_engine: Callable[[str], Any]

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.gateway, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60
        )

    async def query(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        connection = await asyncpg.connect(self.engine_database.replace("+asyncpg", ""))
        try:
            return await connection.fetch(sql, *args)
        finally:
            await connection.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def webhooks(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Webhooks]:
    tmp_path = tmp_path_factory.mktemp("webhooks")
    ports = free_ports("threads", "memory", "router", *ENGINES, "gateway")
    with webhook_receiver() as receiver:
        async with AsyncExitStack() as stack:
            settings = {
                "SWITCHBOARD_ENGINE_WEBHOOK_SECRET": SECRET,
                "SWITCHBOARD_ENGINE_WEBHOOK_ALLOW_LOOPBACK": "true",
                "SWITCHBOARD_ENGINE_WEBHOOK_TIMEOUT": str(ATTEMPT_TIMEOUT),
                "SWITCHBOARD_ENGINE_WEBHOOK_BACKOFF_INITIAL": "0.1",
                "SWITCHBOARD_ENGINE_WEBHOOK_BACKOFF_MAX": "0.5",
                # Announcements, retry times and lease ends wake the workers: no poll in the test.
                "SWITCHBOARD_ENGINE_SAFETY_POLL_SECONDS": str(NO_POLL_SECONDS),
                "SWITCHBOARD_GATEWAY_ENGINE_ADDRESS": "ipv4:"
                + ",".join(f"127.0.0.1:{ports[name]}" for name in ENGINES),
                "SWITCHBOARD_GATEWAY_THREADS_ADDRESS": f"127.0.0.1:{ports['threads']}",
                "SWITCHBOARD_GATEWAY_TOKENS": f"{TOKEN}:alice",
            }
            urls, common = await stack.enter_async_context(
                backing_services(tmp_path, ports, "sbwebhooks", settings)
            )
            engines: dict[str, asyncio.subprocess.Process] = {}
            starts = 0

            async def start_engine(name: str) -> None:
                nonlocal starts
                starts += 1
                overrides = {
                    "SWITCHBOARD_ENGINE_PORT": str(ports[name]),
                    "SWITCHBOARD_ENGINE_INSTANCE_ID": name,
                }
                log = tmp_path / f"{name}-{starts}.log"
                engines[name] = await stack.enter_async_context(
                    process(
                        [sys.executable, "-m", "services.engine"], child_env({**common, **overrides}), log
                    )
                )
                await wait_grpc_serving(f"127.0.0.1:{ports[name]}", log)

            for name in ENGINES:
                await start_engine(name)
            env = child_env({**common, "SWITCHBOARD_GATEWAY_PORT": str(ports["gateway"])})
            log = tmp_path / "gateway.log"
            await stack.enter_async_context(process([sys.executable, "-m", "gateway"], env, log))
            gateway = f"http://127.0.0.1:{ports['gateway']}"
            await wait_http_ok(f"{gateway}/healthz", log)
            yield Webhooks(gateway, receiver, urls["engine"], engines, start_engine)


async def background_run(client: httpx.AsyncClient, url: str) -> str:
    created = await client.post("/api/agent/conversations", json={})
    assert created.status_code == 201, created.text
    answer = await client.post(
        f"/api/agent/conversations/{created.json()['id']}/messages",
        json={"message": "What is a webhook?", "background": True, "webhook_url": url},
    )
    assert answer.status_code == 202, answer.text
    body = answer.json()
    assert answer.headers["location"] == f"/api/agent/runs/{body['run_id']}"
    assert body["status"] == "running" and body["events"] == f"/api/agent/runs/{body['run_id']}/events"
    return str(body["run_id"])


async def settled(client: httpx.AsyncClient, run_id: str, timeout: float = 60.0) -> dict[str, Any]:
    """The run's deliveries once they are delivered or failed (polled)."""
    async with asyncio.timeout(timeout):
        while True:
            answer = await client.get(f"/api/agent/runs/{run_id}/deliveries")
            assert answer.status_code == 200, answer.text
            if answer.json()["state"] in ("delivered", "failed"):
                return dict(answer.json())
            await asyncio.sleep(0.1)


async def test_background_runs_end_by_webhook_once_each_across_replicas(webhooks: Webhooks) -> None:
    async with webhooks.client() as client:
        run_ids = await asyncio.gather(*(background_run(client, webhooks.receiver.url) for _ in range(8)))
        for run_id in run_ids:
            record = await settled(client, run_id)
            assert record["state"] == "delivered" and record["webhook_id"] == f"msg_{run_id}"
            assert [(d["attempt"], d["status_code"], d["error"]) for d in record["deliveries"]] == [
                (1, 200, "")
            ]
            assert isinstance(record["deliveries"][0]["duration_ms"], int)
            run = (await client.get(f"/api/agent/runs/{run_id}")).json()
            assert run["status"] == "done" and run["webhook_url"] == webhooks.receiver.url
    # Both replicas ran some of the runs; each run reached the receiver once.
    owners = await webhooks.query("SELECT DISTINCT instance_id FROM agent_runs")
    assert {row["instance_id"] for row in owners} == set(ENGINES)
    ids = {f"msg_{run_id}" for run_id in run_ids}
    mine = [r for r in webhooks.receiver.requests if r.headers["webhook-id"] in ids]
    assert sorted(r.headers["webhook-id"] for r in mine) == sorted(ids)
    for request in mine:
        run = Webhook(SECRET).verify(request.body, request.headers)["data"]["run"]
        assert request.headers["webhook-id"] == f"msg_{run['id']}" and run["status"] == "RUN_STATUS_DONE"


@pytest.mark.parametrize(
    "url", ["http://example.com/hook", "https://10.0.0.1/hook", "https://169.254.169.254/", "nope"]
)
async def test_a_refused_webhook_is_400_and_starts_nothing(webhooks: Webhooks, url: str) -> None:
    async with webhooks.client() as client:
        created = await client.post("/api/agent/conversations", json={})
        conversation = created.json()["id"]
        answer = await client.post(
            f"/api/agent/conversations/{conversation}/messages",
            json={"message": "hello", "background": True, "webhook_url": url},
        )
        assert answer.status_code == 400, answer.text
        assert "webhook_url" in answer.json()["error"]["message"]
        runs = await client.get(f"/api/agent/conversations/{conversation}/runs")
        assert runs.json()["runs"] == []


async def test_a_conversation_default_webhook_through_http(webhooks: Webhooks) -> None:
    async with webhooks.client() as client:
        conversation = (await client.post("/api/agent/conversations", json={})).json()["id"]
        path = f"/api/agent/conversations/{conversation}/webhook"
        assert (await client.get(path)).json() == {"webhook_url": ""}
        refused = await client.put(path, json={"webhook_url": "https://192.168.1.1/hook"})
        assert refused.status_code == 400 and "webhook_url" in refused.json()["error"]["message"]
        put = await client.put(path, json={"webhook_url": webhooks.receiver.url})
        assert put.status_code == 200 and put.json() == {"webhook_url": webhooks.receiver.url}
        assert (await client.get(path)).json() == {"webhook_url": webhooks.receiver.url}
        answer = await client.post(
            f"/api/agent/conversations/{conversation}/messages", json={"message": "hi", "background": True}
        )
        run_id = answer.json()["run_id"]
        record = await settled(client, run_id)
        assert record["webhook_url"] == webhooks.receiver.url and record["state"] == "delivered"
        assert (await client.get("/api/agent/agents/no-such-agent/webhook")).status_code == 404


async def test_kill_9_mid_attempt_then_restart_delivers_exactly_once(webhooks: Webhooks) -> None:
    before = len(webhooks.receiver.requests)
    webhooks.receiver.script = ["hang"]
    async with webhooks.client() as client:
        run_id = await background_run(client, webhooks.receiver.url)
        await webhooks.receiver.arrived(before + 1)
        # The engine whose worker holds the (hanging) attempt dies without a word.
        (row,) = await webhooks.query(
            "SELECT lease_owner, state FROM webhook_outbox WHERE run_id = $1", run_id
        )
        assert row["state"] == "pending" and row["lease_owner"] in ENGINES
        holder = str(row["lease_owner"])
        webhooks.engines[holder].kill()
        await webhooks.engines[holder].wait()
        await webhooks.start_engine(holder)
        record = await settled(client, run_id)
    # The receiver saw the abandoned attempt and the one that succeeded, under
    # one webhook-id; one attempt is recorded, and it is the success.
    requests = webhooks.receiver.wait_for(before + 2)[before:]
    assert [r.answer for r in requests] == ["hang", "ok"]
    assert {r.headers["webhook-id"] for r in requests} == {f"msg_{run_id}"}
    assert record["state"] == "delivered"
    assert [d["status_code"] for d in record["deliveries"]] == [200]
    rows = await webhooks.query("SELECT count(*) AS n FROM webhook_outbox WHERE run_id = $1", run_id)
    assert rows[0]["n"] == 1
