"""Several replicas on one PostgreSQL, as real processes: two engines and two
gateways (each gateway balancing over both engines, as a headless Service
would), one threads, memory and router. A stream moves between gateways with
Last-Event-ID; a `kill -9` of one engine settles its runs (and only its runs)
"interrupted" by lease expiry, and every waiting SSE client gets a terminal
event through the surviving engine. A stream that follows the other
engine's run moves on wake-ups (the safety poll is out of reach), even when
the listeners' connections are cut."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack
from dataclasses import dataclass

import asyncpg
import grpc
import httpx
import pytest
import pytest_asyncio

from services.shared.identity import user_metadata
from switchboard.engine.v1 import engine_pb2, engine_service_pb2, engine_service_pb2_grpc
from switchboard.threads.v1 import threads_pb2, threads_service_pb2, threads_service_pb2_grpc
from tests.e2e.sse import SseEvent, read_events
from tests.processes import backing_services, child_env, free_ports, process, wait_grpc_serving, wait_http_ok

# One stack of processes for the module: the tests leave each other's rows
# alone (each reads only the runs it started), and the one that kills an
# engine runs last.
pytestmark = [pytest.mark.postgres, pytest.mark.asyncio(loop_scope="module")]

TOKEN = "replica-token"
ENGINES = ("engine-a", "engine-b")
LEASE_SECONDS = 2.0
# Offline model pace: a run of this test streams for a few seconds (a few
# dozen tokens), long enough to be mid-answer when a gateway or an engine goes.
TOKEN_DELAY = 0.05


@dataclass
class Replicas:
    gateways: list[str]
    engine_processes: dict[str, asyncio.subprocess.Process]
    engine_database: str
    engine_addresses: list[str]
    threads_address: str

    def client(self, gateway: int) -> httpx.Client:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        return httpx.Client(base_url=self.gateways[gateway], headers=headers, timeout=60)

    async def query(self, sql: str, *args: object) -> list[asyncpg.Record]:
        connection = await asyncpg.connect(self.engine_database.replace("+asyncpg", ""))
        try:
            return await connection.fetch(sql, *args)
        finally:
            await connection.close()

    async def runs(self) -> list[asyncpg.Record]:
        return await self.query("SELECT id, instance_id, status, error FROM agent_runs")

    async def cut_listeners(self, application_name: str) -> int:
        """Terminates the wake-up listener connections of that name; how many."""
        rows = await self.query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = $1 AND datname = current_database()",
            application_name,
        )
        return len(rows)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def replicas(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Replicas]:
    tmp_path = tmp_path_factory.mktemp("replicas")
    ports = free_ports("threads", "memory", "router", *ENGINES, "gw1", "gw2")
    engines_target = "ipv4:" + ",".join(f"127.0.0.1:{ports[name]}" for name in ENGINES)
    async with AsyncExitStack() as stack:
        settings = {
            "SWITCHBOARD_ENGINE_LEASE_SECONDS": str(LEASE_SECONDS),
            "SWITCHBOARD_ENGINE_OFFLINE_TOKEN_DELAY": str(TOKEN_DELAY),
            "SWITCHBOARD_GATEWAY_ENGINE_ADDRESS": engines_target,
            "SWITCHBOARD_GATEWAY_THREADS_ADDRESS": f"127.0.0.1:{ports['threads']}",
            "SWITCHBOARD_GATEWAY_TOKENS": f"{TOKEN}:alice",
            "SWITCHBOARD_GATEWAY_STREAM_RESUME_SECONDS": "30",
            # Longer than the module runs: a stream following the other
            # engine's run moves on its writer's announcements alone.
            "SWITCHBOARD_ENGINE_SAFETY_POLL_SECONDS": "600",
        }
        urls, common = await stack.enter_async_context(
            backing_services(tmp_path, ports, "sbreplicas", settings)
        )
        engine_processes = {}
        for name in ENGINES:
            overrides = {"SWITCHBOARD_ENGINE_PORT": str(ports[name]), "SWITCHBOARD_ENGINE_INSTANCE_ID": name}
            log = tmp_path / f"{name}.log"
            argv = [sys.executable, "-m", "services.engine"]
            engine_processes[name] = await stack.enter_async_context(
                process(argv, child_env({**common, **overrides}), log)
            )
            await wait_grpc_serving(f"127.0.0.1:{ports[name]}", log)
        gateways = []
        for name in ("gw1", "gw2"):
            env = child_env({**common, "SWITCHBOARD_GATEWAY_PORT": str(ports[name])})
            log = tmp_path / f"{name}.log"
            await stack.enter_async_context(process([sys.executable, "-m", "gateway"], env, log))
            gateways.append(f"http://127.0.0.1:{ports[name]}")
            await wait_http_ok(f"{gateways[-1]}/healthz", log)
        yield Replicas(
            gateways,
            engine_processes,
            urls["engine"],
            [f"127.0.0.1:{ports[name]}" for name in ENGINES],
            f"127.0.0.1:{ports['threads']}",
        )


def start_conversation(client: httpx.Client) -> str:
    created = client.post("/api/agent/conversations", json={})
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def stream_run(client: httpx.Client, conversation: str, text: str) -> Iterator[SseEvent]:
    with client.stream(
        "POST", f"/api/agent/conversations/{conversation}/messages", json={"message": text}
    ) as r:
        assert r.status_code == 200, r.read()
        yield from read_events(r)


def sequences(events: list[SseEvent]) -> list[int]:
    return [int(event.id) for event in events if event.id is not None]


async def test_a_stream_started_on_one_gateway_resumes_on_the_other(replicas: Replicas) -> None:
    def run() -> tuple[list[SseEvent], list[SseEvent]]:
        with replicas.client(0) as first, replicas.client(1) as second:
            conversation = start_conversation(first)
            head: list[SseEvent] = []
            for event in stream_run(first, conversation, "tell me about replicas and leases"):
                head.append(event)
                if event.event == "delta":
                    break  # the browser tab goes away mid-answer
            run_id = head[0].data["run_id"]
            last = str(sequences(head)[-1])
            with second.stream(
                "GET", f"/api/agent/runs/{run_id}/events", headers={"Last-Event-ID": last}
            ) as r:
                assert r.status_code == 200
                tail = list(read_events(r))
            return head, tail

    head, tail = await asyncio.to_thread(run)
    seen = sequences(head) + sequences(tail)
    assert seen == list(range(1, len(seen) + 1)), seen  # no gap, no duplicate
    assert tail[-1].event == "final"
    assert "".join(e.data["text"] for e in head + tail if e.event == "delta")


async def test_a_stream_following_the_other_engine_survives_its_listener_being_cut(
    replicas: Replicas,
) -> None:
    """engine-b follows engine-a's run on wake-ups alone (no safety poll
    within the module). Both engines' listener connections are terminated
    mid-run: each reconnects and wakes its waiters, and the stream goes on to
    the end with every event, once, in order."""
    with replicas.client(0) as client:
        conversation = await asyncio.to_thread(start_conversation, client)
    async with (
        grpc.aio.insecure_channel(replicas.engine_addresses[0]) as channel_a,
        grpc.aio.insecure_channel(replicas.engine_addresses[1]) as channel_b,
    ):
        engine_a = engine_service_pb2_grpc.EngineServiceStub(channel_a)
        engine_b = engine_service_pb2_grpc.EngineServiceStub(channel_b)
        started = engine_a.StartRun(
            engine_service_pb2.StartRunRequest(
                conversation_id=conversation, message="tell me about listeners"
            ),
            metadata=user_metadata("alice"),
            timeout=60,
        )
        first = (await anext(aiter(started))).event
        watch = engine_b.WatchRun(
            engine_service_pb2.WatchRunRequest(run_id=first.run_id),
            metadata=user_metadata("alice"),
            timeout=60,
        )
        followed = [(await anext(aiter(watch))).event]
        assert await replicas.cut_listeners("engine wakeups") == 2
        followed += [response.event async for response in watch]
        executed = [first, *[response.event async for response in started]]
    assert [e.sequence for e in followed] == list(range(1, len(executed) + 1))
    assert [e.SerializeToString() for e in followed] == [e.SerializeToString() for e in executed]
    assert followed[-1].WhichOneof("kind") == "final"


async def test_concurrent_asks_through_both_engines_share_one_thread_and_one_session(
    replicas: Replicas,
) -> None:
    """One shared thread per agent, at scale: asks for one agent arriving on two engine replicas
    at once land on its one live thread, queue there (each answer right after
    its question), and bind one live provider session."""
    earlier = {row["id"] for row in await replicas.runs()}
    async with grpc.aio.insecure_channel(replicas.threads_address) as threads_channel:
        threads = threads_service_pb2_grpc.ThreadsServiceStub(threads_channel)
        agent = threads_pb2.Agent(id="qa", model="offline-fast")
        await threads.CreateAgent(
            threads_service_pb2.CreateAgentRequest(agent=agent), metadata=user_metadata("alice")
        )
        channels = [grpc.aio.insecure_channel(address) for address in replicas.engine_addresses]
        try:
            engines = [engine_service_pb2_grpc.EngineServiceStub(channel) for channel in channels]

            async def ask(index: int) -> list[engine_pb2.RunEvent]:
                request = engine_service_pb2.AskAgentRequest(
                    requester=f"agent{index}", target_agent_id="qa", message=f"status of task {index}?"
                )
                call = engines[index % 2].AskAgent(request, metadata=user_metadata("alice"), timeout=120)
                return [response.event async for response in call]

            results = await asyncio.gather(*(ask(index) for index in range(6)))
        finally:
            for channel in channels:
                await channel.close()
        assert all(events[-1].WhichOneof("kind") == "final" for events in results)
        asks = [row for row in await replicas.runs() if row["id"] not in earlier]
        assert len(asks) == 6
        assert {row["instance_id"] for row in asks} == set(ENGINES)  # both engines ran asks
        thread = await threads.EnsureAgentThread(
            threads_service_pb2.EnsureAgentThreadRequest(target_agent_id="qa"),
            metadata=user_metadata("alice"),
        )
        assert not thread.created  # the asks made it; one thread
        listed = await threads.ListEntries(
            threads_service_pb2.ListEntriesRequest(thread_id=thread.thread.id, page_size=100),
            metadata=user_metadata("alice"),
        )
        entries = list(listed.entries)
        assert len(entries) == 12
        for question, answer in zip(entries[::2], entries[1::2], strict=True):
            assert question.correlation_id == answer.correlation_id
            assert answer.sequence == question.sequence + 1
        sessions = await threads.ListProviderSessions(
            threads_service_pb2.ListProviderSessionsRequest(agent_thread_id=thread.thread.id),
            metadata=user_metadata("alice"),
        )
        assert len(sessions.sessions) == 1


async def running_by_engine(replicas: Replicas) -> dict[str, set[str]]:
    """The ids of the runs each engine holds running now."""
    running = [row for row in await replicas.runs() if row["status"] == "running"]
    return {name: {row["id"] for row in running if row["instance_id"] == name} for name in ENGINES}


async def test_kill_9_of_one_engine_settles_only_its_runs_and_every_client_gets_a_terminal_event(
    replicas: Replicas,
) -> None:
    loop = asyncio.get_running_loop()
    pool = ThreadPoolExecutor(max_workers=8)

    def client_run(index: int) -> list[SseEvent]:
        with replicas.client(index % 2) as client:
            return list(stream_run(client, start_conversation(client), f"request {index} about leases"))

    killed = replicas.engine_processes["engine-a"]
    pending: list[asyncio.Future[list[SseEvent]]] = []
    by_engine: dict[str, set[str]] = {}
    index = 0
    # A run lasts a fraction of a second: engine-a's may all end between the
    # read that saw them and the freeze. Then it is let go and more runs start.
    for _ in range(5):
        # Start runs until both engines hold at least one running run.
        for _ in range(12):
            pending.append(loop.run_in_executor(pool, client_run, index))
            index += 1
            await asyncio.sleep(0.3)
            by_engine = await running_by_engine(replicas)
            if all(by_engine.values()) and len(pending) >= 4:
                break
        assert all(by_engine.values()), f"runs did not spread over both engines: {by_engine}"
        # Frozen first, so that the runs it holds are read while none of them can
        # end: a run finishing between the read and the kill would be done, not
        # interrupted.
        killed.send_signal(signal.SIGSTOP)
        by_engine = await running_by_engine(replicas)
        if by_engine["engine-a"]:
            break
        killed.send_signal(signal.SIGCONT)
    assert by_engine["engine-a"], "engine-a's runs all ended before it was frozen, five times"
    killed.kill()  # SIGKILL: no drain, no lease release
    streams = await asyncio.wait_for(asyncio.gather(*pending), timeout=60)
    pool.shutdown()

    rows = {row["id"]: row for row in await replicas.runs()}
    assert not [row for row in rows.values() if row["status"] == "running"]
    for run_id in by_engine["engine-a"]:
        assert (rows[run_id]["status"], rows[run_id]["error"]) == ("failed", "interrupted")
    for run_id in by_engine["engine-b"]:
        assert rows[run_id]["status"] == "done"
    for events in streams:
        run_id = events[0].data["run_id"]
        terminal = events[-1]
        assert terminal.id is not None, "the terminal event is the persisted one, not a gateway notice"
        seen = sequences(events)
        assert seen == list(range(1, len(seen) + 1)), seen
        if rows[run_id]["instance_id"] == "engine-a" and rows[run_id]["status"] == "failed":
            assert (terminal.event, terminal.data["code"]) == ("error", "INTERRUPTED")
        else:
            assert terminal.event == "final"
