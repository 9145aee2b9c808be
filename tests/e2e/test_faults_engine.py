"""Engine faults against the real processes (threads, memory, router, a
gateway and the engine, on SQLite files or fresh PostgreSQL databases):

* ``kill -9`` of the engine while one run streams from a slow model (the fake
  OpenAI server, tests/fakes/llm_server.py) and another waits on a slow MCP
  tool call (tests/fakes/mcp_server.py), 10 times per backend: after each
  restart (same instance id, same database) both runs are `failed`
  "interrupted", their SSE clients get that terminal event through the
  gateway, the agent thread and the conversation are free at once (a new ask
  and a new message are answered without queueing behind a dead run), and no
  killed engine's MCP server lives on;
* SIGTERM with runs in flight: health turns NOT_SERVING at once, probes and
  new calls are refused, a run that can finish within the grace finishes, the
  other is settled "interrupted" by the engine itself (its client told), none
  is left `running` when the process exits (0);
* 50 concurrent asks for one agent, 20 times on PostgreSQL and 10 on
  SQLite: one live agent thread, one provider session (a CLI agent's native
  session, tests/fakes/agent_cli.py), and the asks take turns on the thread.

Restarting the engine 20 times would cost 20 interpreter start-ups (about
5 s each here, mostly imports: grpc, SQLAlchemy, the MCP, OpenAI and
Anthropic SDKs). So every engine process is forked from a *zygote* that did
the imports once and nothing else (no event loop, no channel, no thread):
each child then runs ``python -m services.engine``'s own ``main`` from the
start, its settings read from its environment — a separate process that
serves in about half a second, and is killed for real."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.healthcheck import check
from services.shared.identity import user_metadata
from switchboard.engine.v1 import engine_pb2, engine_service_pb2, engine_service_pb2_grpc
from switchboard.threads.v1 import threads_pb2, threads_service_pb2, threads_service_pb2_grpc
from tests.databases import BACKENDS, give_back_database, take_database
from tests.e2e.sse import SseEvent, read_events
from tests.fakes.llm_server import FakeServer, openai_app, serve
from tests.processes import child_env, free_ports

ROOT = Path(__file__).resolve().parents[2]
AGENT_CLI = ROOT / "tests" / "fakes" / "agent_cli.py"
USER = "alice"
TOKEN = "faults-token"
INSTANCE = "faults-engine"
# Per backend (so twice that in all): each kill lands while one run streams
# and another waits on a tool call.
KILLS = 10
# A 7-word answer with 2 s between words: the kill lands mid-stream.
SLOW_STREAM = "slow:2"
# A tool call that takes a minute: the kill (or the shutdown grace) lands mid-call.
SLOW_TOOL = 'tool:mcp__slow__sleep:{"seconds": 60}'
# The engine's runs get 80 % of it to finish after SIGTERM.
SHUTDOWN_GRACE = 5.0
CONCURRENT_ASKS = 50
# More on PostgreSQL, whose engine writes on several connections at once (a
# race there once let two asks work on one thread); SQLite has one writer.
# SWITCHBOARD_FAULT_REPETITIONS=N runs N on each backend (the 100:
# see docs/reliability.md for the command and its figures).
_REPEAT = os.environ.get("SWITCHBOARD_FAULT_REPETITIONS")
REPETITIONS = (
    {"sqlite": int(_REPEAT), "postgres": int(_REPEAT)} if _REPEAT else {"sqlite": 10, "postgres": 20}
)
EXIT_MARK = "faults-engine exit status"
# The services package first, as in ``python -m services.engine``: it turns
# gRPC's fork handlers off before grpc is loaded (this module loads grpc
# before it), so the engines start their MCP servers and CLI agents as they
# do in production.
ZYGOTE = "import services; from tests.e2e.test_faults_engine import _zygote; _zygote()"
STARTED = engine_pb2.STEP_STATUS_STARTED
MODELS = [
    *(
        {"id": f"offline-{p}", "provider": "offline", "model": f"switchboard-offline-{p}", "profile": p}
        for p in ("fast", "balanced", "strong")
    ),
    {"id": "slow-model", "provider": "slow", "model": "slow-x", "profile": "balanced"},
    {"id": "tool-model", "provider": "tooly", "model": "tool-x", "profile": "balanced"},
    {"id": "agent-model", "provider": "agent", "model": "agent-x", "profile": "balanced"},
]


# The zygote: imports the engine once, then forks one engine per request.


def _zygote() -> None:
    """Reads one JSON line per engine to start ({"env": {...}, "log": path}),
    forks it, answers its pid; exits when its standard input closes."""
    from services.engine.providers import anthropic, cli, offline, openai  # noqa: F401
    from services.engine.server import MIGRATIONS, build_server
    from services.engine.settings import EngineSettings
    from services.shared.bootstrap import main

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # engines are reaped as they exit
    print("ready", flush=True)
    for line in sys.stdin:
        spec = json.loads(line)
        pid = os.fork()
        if pid:
            print(pid, flush=True)
            continue
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the engine waits for its own children
        out = os.open(spec["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.environ.update(spec["env"])
        sys.argv = ["services.engine"]
        status = 1
        try:
            main(EngineSettings, build_server, MIGRATIONS)
            status = 0
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # noqa: BLE001 - reported in the log, as an interpreter would
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.write(2, f"{EXIT_MARK} {status}\n".encode())
            os._exit(status)


# The system


def _blocking(coroutine: Any) -> Any:
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def _wait(ready: Callable[[], bool], what: str, log: Path, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if ready():
                return
        time.sleep(0.05)
    raise AssertionError(f"{what} was not ready in {timeout:g} s:\n{log.read_text()[-3000:]}")


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def _serving(address: str) -> Callable[[], bool]:
    return lambda: check(address, "", 1.0) == "SERVING"


def _running(pidfd: int) -> bool:
    """Whether the process behind ``pidfd`` still runs (its pidfd turns
    readable when it exits)."""
    return not select.select([pidfd], [], [], 0)[0]


@dataclass
class Stack:
    backend: str
    folder: Path
    gateway: str
    engine_address: str
    threads_address: str
    engine_env: dict[str, str]
    engine_database: str
    slow: FakeServer
    tool: FakeServer
    zygote: subprocess.Popen[bytes]
    # The running engine as a pidfd: the zygote reaps engines as they exit,
    # and a signal by pid could reach a later process given the same pid
    # (another test's service: pids wrap at 32768 here).
    engine: int = -1
    starts: list[float] = field(default_factory=list)

    @property
    def engine_log(self) -> Path:
        return self.folder / "engine.log"

    def start_engine(self) -> None:
        """Forks an engine (same instance id, same database) and waits until it serves."""
        assert self.zygote.stdin is not None and self.zygote.stdout is not None
        began = time.monotonic()
        spec = {"env": self.engine_env, "log": str(self.engine_log)}
        self.zygote.stdin.write(json.dumps(spec).encode() + b"\n")
        self.zygote.stdin.flush()
        pid = int(self.zygote.stdout.readline())
        if self.engine >= 0:
            os.close(self.engine)
        self.engine = os.pidfd_open(pid)  # at once: it cannot have exited and its pid be reused yet
        _wait(_serving(self.engine_address), "the engine", self.engine_log)
        self.starts.append(time.monotonic() - began)

    def signal_engine(self, signum: int) -> None:
        signal.pidfd_send_signal(self.engine, signum)

    def wait_engine_gone(self, timeout: float) -> None:
        engine = self.engine
        _wait(lambda: not _running(engine), "the end of the engine", self.engine_log, timeout)

    def kill_engine(self) -> None:
        self.signal_engine(signal.SIGKILL)
        self.wait_engine_gone(10)

    def stop_engine(self) -> None:
        if self.engine >= 0 and _running(self.engine):
            self.signal_engine(signal.SIGTERM)
            try:
                self.wait_engine_gone(30)
            except AssertionError:
                self.signal_engine(signal.SIGKILL)
        if self.engine >= 0:
            os.close(self.engine)
            self.engine = -1

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.gateway, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)

    async def runs(self) -> dict[str, tuple[str, str | None]]:
        """Every run's (status, error), read from the engine's database (the
        engine itself may be down)."""
        query = "SELECT id, status, error FROM agent_runs"
        if self.backend == "sqlite":

            def read() -> list[tuple[str, str, str | None]]:
                with contextlib.closing(sqlite3.connect(self.engine_database)) as connection:
                    return connection.execute(query).fetchall()

            rows = await asyncio.to_thread(read)
        else:
            connection = await asyncpg.connect(self.engine_database.replace("+asyncpg", ""))
            try:
                rows = [tuple(row) for row in await connection.fetch(query)]
            finally:
                await connection.close()
        return {row[0]: (row[1], row[2]) for row in rows}


def _popen(argv: list[str], env: dict[str, str], log: Path, **options: Any) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, **options)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module", params=BACKENDS)
def stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    backend = request.param
    folder = tmp_path_factory.mktemp(f"faults-{backend}")
    data = folder / "data"
    data.mkdir()
    (folder / "cli-state").mkdir()
    with ExitStack() as exits:
        # The zygote's imports overlap the other services' start-up.
        zygote = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE],
            cwd=ROOT,
            env=child_env({}),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        # Run last first: stdin closed (the zygote ends), waited for, its stdout closed.
        exits.callback(lambda: zygote.stdout and zygote.stdout.close())
        exits.callback(zygote.wait, 30)
        exits.callback(lambda: zygote.stdin and zygote.stdin.close())
        slow = exits.enter_context(serve(openai_app))
        tool = exits.enter_context(serve(openai_app))
        urls: dict[str, str] = {}
        if backend == "postgres":
            for service in ("threads", "memory", "router", "engine"):
                urls[service] = _blocking(take_database(f"sbfaults_{service}", service))
                exits.callback(_blocking, give_back_database(urls[service], service))
        ports = free_ports("threads", "memory", "router", "engine", "gateway")
        address = {name: f"127.0.0.1:{port}" for name, port in ports.items()}
        common = {
            "SWITCHBOARD_DATA_DIR": str(data),
            **{f"SWITCHBOARD_{name.upper()}_DATABASE_URL": url for name, url in urls.items()},
            "SWITCHBOARD_MEMORY_EMBEDDER": "hashing",
            "SWITCHBOARD_ROUTER_EMBEDDER": "hashing",
            "SWITCHBOARD_ROUTER_ARBITRATION_ENABLED": "false",
            "SWITCHBOARD_ROUTER_MODELS_JSON": json.dumps(MODELS),
        }
        for name in ("threads", "memory", "router"):
            env = child_env({**common, f"SWITCHBOARD_{name.upper()}_PORT": str(ports[name])})
            process = _popen([sys.executable, "-m", f"services.{name}"], env, folder / f"{name}.log")
            exits.callback(_stop, process)
        for name in ("threads", "memory", "router"):
            _wait(_serving(address[name]), name, folder / f"{name}.log")
        gateway_env = {
            "SWITCHBOARD_GATEWAY_PORT": str(ports["gateway"]),
            **{f"SWITCHBOARD_GATEWAY_{n.upper()}_ADDRESS": address[n] for n in ("engine", "threads")},
            **{f"SWITCHBOARD_GATEWAY_{n.upper()}_ADDRESS": address[n] for n in ("memory", "router")},
            "SWITCHBOARD_GATEWAY_TOKENS": f"{TOKEN}:{USER}",
            # A broken run stream is reopened every 0.5 s, for 5 s at most.
            "SWITCHBOARD_GATEWAY_STREAM_RESUME_SECONDS": "5",
        }
        gateway = _popen([sys.executable, "-m", "gateway"], child_env(gateway_env), folder / "gateway.log")
        exits.callback(_stop, gateway)
        # The CLI agent keeps its sessions in a folder: resuming an unknown one fails.
        cli = [
            sys.executable,
            str(AGENT_CLI),
            "--context-from",
            "stdin",
            "--state",
            str(folder / "cli-state"),
        ]
        providers = [
            {"name": "slow", "kind": "openai", "base_url": f"{slow.url}/v1", "api_key_env": "FAKE_KEY"},
            {"name": "tooly", "kind": "openai", "base_url": f"{tool.url}/v1", "api_key_env": "FAKE_KEY"},
            {
                "name": "agent",
                "kind": "cli",
                "command": [*cli, "{prompt}"],
                "context_strategy": "stdin",
                "resume_args": ["--resume", "{session_id}"],
                "timeout": 30,
            },
        ]
        mcp = {
            "name": "slow",
            "command": sys.executable,
            "args": ["-m", "tests.fakes.mcp_server"],
            "cwd": str(ROOT),
            "call_timeout": 120,
            # Tells this system's MCP servers from other tests' (see _mcp_servers_alive).
            "env": {"FAULTS_STACK": folder.name},
        }
        engine_env = {
            **common,
            "FAKE_KEY": "sk-fake",
            "SWITCHBOARD_ENGINE_PORT": str(ports["engine"]),
            "SWITCHBOARD_ENGINE_INSTANCE_ID": INSTANCE,
            "SWITCHBOARD_ENGINE_THREADS_ADDRESS": address["threads"],
            "SWITCHBOARD_ENGINE_MEMORY_ADDRESS": address["memory"],
            "SWITCHBOARD_ENGINE_ROUTER_ADDRESS": address["router"],
            "SWITCHBOARD_ENGINE_PROVIDERS_JSON": json.dumps(providers),
            "SWITCHBOARD_ENGINE_MCP_SERVERS_JSON": json.dumps([mcp]),
            "SWITCHBOARD_ENGINE_SHUTDOWN_GRACE": str(SHUTDOWN_GRACE),
            # One user crowds an agent with 50 asks at once, again and again:
            # the per-user run quotas (tests/e2e/test_quotas.py) are off here.
            "SWITCHBOARD_ENGINE_MAX_CONCURRENT_RUNS_PER_USER": "0",
            "SWITCHBOARD_ENGINE_RUNS_PER_MINUTE_PER_USER": "0",
            # A restarted engine's first routing call on a loaded machine can
            # miss the 1 s production deadline; the ask then goes on with the
            # fallback model, which swaps the agent's provider. The kills are
            # what is tested here (tests/e2e/test_dependency_faults.py covers
            # a run without the router).
            "SWITCHBOARD_ENGINE_ROUTER_TIMEOUT": "10",
        }
        engine_database = urls.get("engine") or str(data / "engine.db")
        assert zygote.stdout is not None
        assert zygote.stdout.readline() == b"ready\n", "the engine zygote did not start"
        built = Stack(
            backend,
            folder,
            f"http://127.0.0.1:{ports['gateway']}",
            address["engine"],
            address["threads"],
            engine_env,
            engine_database,
            slow,
            tool,
            zygote,
        )
        built.start_engine()
        exits.callback(built.stop_engine)
        _wait(
            lambda: httpx.get(f"{built.gateway}/healthz").status_code == 200,
            "gateway",
            folder / "gateway.log",
        )
        yield built


# Clients


def _stream(
    stack: Stack, path: str, body: dict[str, Any], seen: Callable[[SseEvent], bool], flag: threading.Event
) -> list[SseEvent]:
    """POSTs a run and reads its SSE stream to the end; sets ``flag`` on the
    first event ``seen`` accepts."""
    events: list[SseEvent] = []
    try:
        with stack.client() as client, client.stream("POST", path, json=body) as response:
            assert response.status_code == 200, response.read()
            for event in read_events(response):
                events.append(event)
                if seen(event):
                    flag.set()
    finally:
        flag.set()  # never leave the test waiting on a stream that ended early
    return events


def _is_delta(event: SseEvent) -> bool:
    return event.event == "delta"


def _is_tool_call(event: SseEvent) -> bool:
    return event.event == "step" and event.data["key"] == "tools.mcp" and event.data["status"] == "started"


def _sequences(events: list[SseEvent]) -> list[int]:
    return [int(event.id) for event in events if event.id is not None]


def _interrupted(events: list[SseEvent]) -> str:
    """Checks that a stream ended on the persisted INTERRUPTED event with no
    gap or duplicate; returns the run id."""
    terminal = events[-1]
    assert (terminal.event, terminal.data.get("code")) == ("error", "INTERRUPTED"), events[-3:]
    assert terminal.id is not None, "the terminal event is the stored one, not a gateway notice"
    seen = _sequences(events)
    assert seen == list(range(1, len(seen) + 1)), seen
    return str(events[0].data["run_id"])


def _run_record(stack: Stack, run_id: str) -> dict[str, Any]:
    with stack.client() as client:
        response = client.get(f"/api/agent/runs/{run_id}")
        assert response.status_code == 200, response.text
        return dict(response.json())


async def _events(call: Any) -> list[engine_pb2.RunEvent]:
    return [response.event async for response in call]


async def _follow_ups(stack: Stack, agent: str, conversation: str) -> None:
    """A new ask on the agent's thread and a new message on the conversation
    (straight to the engine) both run at once: never queued behind a dead run."""
    async with grpc.aio.insecure_channel(stack.engine_address) as channel:
        engine = engine_service_pb2_grpc.EngineServiceStub(channel)
        ask = engine_service_pb2.AskAgentRequest(
            requester="main", target_agent_id=agent, message="still there?"
        )
        message = engine_service_pb2.StartRunRequest(
            conversation_id=conversation, message="and now?", requested_model="offline-fast"
        )
        for events in await asyncio.gather(
            # wait_for_ready: the engine may have just restarted on this address.
            _events(engine.AskAgent(ask, metadata=user_metadata(USER), timeout=60, wait_for_ready=True)),
            _events(engine.StartRun(message, metadata=user_metadata(USER), timeout=60, wait_for_ready=True)),
        ):
            assert events[-1].WhichOneof("kind") == "final", events[-1]
            assert not [e for e in events if e.WhichOneof("kind") == "step" and e.step.key == "queued"]


async def _no_run_left_running(stack: Stack) -> dict[str, tuple[str, str | None]]:
    runs = await stack.runs()
    assert not [run_id for run_id, (status, _) in runs.items() if status == "running"], runs
    return runs


def _mcp_servers_alive(stack: Stack) -> int:
    """This system's MCP server processes still running."""
    marker = f"FAULTS_STACK={stack.folder.name}".encode()
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                running = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
                if running and marker in (entry / "environ").read_bytes().split(b"\0"):
                    count += 1
    return count


# 1. kill -9


async def _threads_of_agent_and_conversation(stack: Stack, agent: str, model: str) -> str:
    """Creates the agent (on the slow model) and a conversation allowed the
    slow MCP server; returns the conversation's id."""
    with stack.client() as client:
        created = client.post("/api/agent/agents", json={"id": agent, "model": model})
        assert created.status_code == 201, created.text
        allowed = {"workspace": False, "mcp_servers": ["slow"]}
        conversation = client.post("/api/agent/conversations", json={"allowed_sources": allowed})
        assert conversation.status_code == 201, conversation.text
        return str(conversation.json()["id"])


@pytest.mark.timeout(300)
async def test_kill_9_mid_stream_and_mid_tool_call_settles_both_runs_and_frees_their_threads(
    stack: Stack,
) -> None:
    """Each cycle: an ask streaming slowly on an agent's thread and a message
    waiting on a slow MCP tool on a conversation, both followed over SSE
    through the gateway; kill -9; restart."""
    conversation = await _threads_of_agent_and_conversation(stack, "streamer", "slow-model")
    # Both threads work before any kill (and this engine has its MCP server up).
    await _follow_ups(stack, "streamer", conversation)
    assert _mcp_servers_alive(stack) == 1

    settled: list[str] = []
    kill_times: list[float] = []
    pool = ThreadPoolExecutor(max_workers=2)
    try:
        for cycle in range(KILLS):
            stack.slow.script.steps.append(SLOW_STREAM)
            stack.tool.script.steps.append(SLOW_TOOL)
            streaming, calling = threading.Event(), threading.Event()
            ask: Future[list[SseEvent]] = pool.submit(
                _stream, stack, "/api/agent/agents/streamer/asks",
                {"message": f"tell me slowly, take {cycle}", "requester": "main"}, _is_delta, streaming,
            )  # fmt: skip
            tool: Future[list[SseEvent]] = pool.submit(
                _stream, stack, f"/api/agent/conversations/{conversation}/messages",
                {"message": f"look it up, take {cycle}", "model": "tool-model"}, _is_tool_call, calling,
            )  # fmt: skip
            for flag in (streaming, calling):
                assert await asyncio.to_thread(flag.wait, 60), f"cycle {cycle}: no run reached its slow part"
            assert not ask.done() and not tool.done(), "a run ended before the kill"
            began = time.monotonic()
            await asyncio.to_thread(stack.kill_engine)
            await asyncio.to_thread(stack.start_engine)
            # The clients' streams resume through the gateway while new work
            # on both threads runs at once (and starts this engine's MCP server).
            follow_ups = _follow_ups(stack, "streamer", conversation)
            resumed = asyncio.gather(asyncio.wrap_future(ask), asyncio.wrap_future(tool), follow_ups)
            asked, tooled, _ = await asyncio.wait_for(resumed, 60)
            kill_times.append(time.monotonic() - began)
            # The kill landed mid-stream (text shown, no answer) and mid-call (no tool result).
            assert [e for e in asked if e.event == "delta"] and not [e for e in asked if e.event == "final"]
            assert not [e for e in tooled if e.event == "action"]
            for run_id in (_interrupted(asked), _interrupted(tooled)):
                record = await asyncio.to_thread(_run_record, stack, run_id)
                assert (record["status"], record["error"]) == ("failed", "interrupted"), record
                settled.append(run_id)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)

    assert len(settled) == 2 * KILLS == len(set(settled))
    runs = await _no_run_left_running(stack)
    assert [runs[run_id] for run_id in settled] == [("failed", "interrupted")] * len(settled)
    # One live provider session on the streamer's thread, kept across the kills.
    async with grpc.aio.insecure_channel(stack.threads_address) as channel:
        threads = threads_service_pb2_grpc.ThreadsServiceStub(channel)
        thread = await threads.EnsureAgentThread(
            threads_service_pb2.EnsureAgentThreadRequest(target_agent_id="streamer"),
            metadata=user_metadata(USER),
        )
        assert not thread.created
        request = threads_service_pb2.ListProviderSessionsRequest(
            agent_thread_id=thread.thread.id, include_released=True
        )
        sessions = (await threads.ListProviderSessions(request, metadata=user_metadata(USER))).sessions
        assert [(s.provider_id, s.HasField("release_time")) for s in sessions] == [("slow", False)]
    # A killed engine's MCP server (its tool call in flight) does not outlive
    # it: only the live engine's is left.
    alone = lambda: _mcp_servers_alive(stack) == 1  # noqa: E731
    await asyncio.to_thread(_wait, alone, "the MCP servers of killed engines to exit", stack.engine_log, 20)
    print(
        f"\n[{stack.backend}] {KILLS} kill -9: {len(settled)} runs killed ({KILLS} mid-stream, "
        f"{KILLS} mid-tool-call) and settled `failed` interrupted; engine start median "
        f"{_median(stack.starts):.2f} s; kill to both terminal events and both follow-ups answered: "
        f"median {_median(kill_times):.2f} s, max {max(kill_times):.2f} s"
    )


# 2. SIGTERM


@pytest.mark.timeout(120)
async def test_sigterm_turns_health_not_serving_and_settles_every_run_in_flight(stack: Stack) -> None:
    """SIGTERM while a run waits on a 60 s tool call and another streams an
    answer that ends within the grace."""
    conversation_id = await _threads_of_agent_and_conversation(stack, "drained", "slow-model")
    # A run that cannot end within the grace (a 60 s tool call), then one that
    # can (7 words 0.4 s apart: 2.4 s left when its first word is shown, and
    # the runs get 4 s).
    stack.tool.script.steps.append(SLOW_TOOL)
    stack.slow.script.steps.append("slow:0.4")
    streaming, calling = threading.Event(), threading.Event()
    arrivals: dict[str, float] = {}

    def timed(name: str, *args: Any) -> list[SseEvent]:
        events = _stream(stack, *args)
        arrivals[name] = time.monotonic()
        return events

    pool = ThreadPoolExecutor(max_workers=2)
    tool = pool.submit(
        timed, "tool", f"/api/agent/conversations/{conversation_id}/messages",
        {"message": "a long lookup", "model": "tool-model"}, _is_tool_call, calling,
    )  # fmt: skip
    assert await asyncio.to_thread(calling.wait, 60), "the tool call did not start"
    ask = pool.submit(
        timed, "ask", "/api/agent/agents/drained/asks", {"message": "drain me", "requester": "main"},
        _is_delta, streaming,
    )  # fmt: skip
    pool.shutdown(wait=False)
    assert await asyncio.to_thread(streaming.wait, 60), "the answer did not start"
    assert not ask.done() and not tool.done()

    async with grpc.aio.insecure_channel(stack.engine_address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        watch = health.Watch(health_pb2.HealthCheckRequest(service=""), timeout=60)
        assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
        sigterm = time.monotonic()
        stack.signal_engine(signal.SIGTERM)
        while (await asyncio.wait_for(watch.read(), 5)).status == health_pb2.HealthCheckResponse.SERVING:
            pass
        not_serving = time.monotonic()
        watch.cancel()
        # A poll (a load balancer's probe) no longer finds it serving either.
        try:
            polled = await asyncio.to_thread(check, stack.engine_address, "", 1.0)
        except grpc.RpcError as error:
            polled = error.code().name  # refused: as good as NOT_SERVING to a probe
        assert polled != "SERVING"
        # New work is refused while the runs in flight drain.
        engine = engine_service_pb2_grpc.EngineServiceStub(channel)
        request = engine_service_pb2.AskAgentRequest(
            requester="main", target_agent_id="drained", message="late"
        )
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await engine.AskAgent(request, metadata=user_metadata(USER), timeout=5).read()
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE

    await asyncio.to_thread(stack.wait_engine_gone, SHUTDOWN_GRACE + 20)
    exited = time.monotonic()
    # Both clients got their terminal event from the draining engine (it is
    # down now, and the gateway gives up after 5 s with an event of its own).
    asked, tooled = ask.result(30), tool.result(30)
    # Health said NOT_SERVING before the run that could finish had finished
    # (how soon is printed below: a wall-clock bound would only measure the
    # machine's load).
    assert not_serving < arrivals["ask"]
    assert asked[-1].event == "final" and asked[-1].id is not None, asked[-3:]
    # The tool call outlived the grace: settled "interrupted" by the engine itself.
    run_id = _interrupted(tooled)
    log = stack.engine_log.read_text()
    assert f"{EXIT_MARK} 0" in log.splitlines()[-1], log[-3000:]
    runs = await _no_run_left_running(stack)  # read while the engine is down
    assert runs[run_id] == ("failed", "interrupted")
    assert runs[asked[0].data["run_id"]] == ("done", None)

    await asyncio.to_thread(stack.start_engine)
    async with grpc.aio.insecure_channel(stack.engine_address) as channel:
        engine = engine_service_pb2_grpc.EngineServiceStub(channel)
        request = engine_service_pb2.GetRunRequest(run_id=run_id)
        got = await engine.GetRun(request, metadata=user_metadata(USER), timeout=10, wait_for_ready=True)
    assert (got.run.status, got.run.error) == (engine_pb2.RUN_STATUS_FAILED, "interrupted")
    await _follow_ups(stack, "drained", conversation_id)
    print(
        f"\n[{stack.backend}] SIGTERM: NOT_SERVING after {not_serving - sigterm:.3f} s (a probe: {polled}), "
        f"draining run done after {arrivals['ask'] - sigterm:.2f} s, exit after {exited - sigterm:.2f} s"
    )


# 3. Concurrent asks


@dataclass
class Ask:
    events: list[engine_pb2.RunEvent] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return self.events[0].run_id if self.events else ""

    @property
    def terminal(self) -> engine_pb2.RunEvent | None:
        last = self.events[-1] if self.events else None
        return last if last is not None and last.WhichOneof("kind") in ("final", "error") else None

    @property
    def answered(self) -> bool:
        return self.terminal is not None and self.terminal.HasField("final")

    def steps(self, key: str) -> list[engine_pb2.RunEvent]:
        return [e for e in self.events if e.WhichOneof("kind") == "step" and e.step.key == key]

    def worked(self) -> tuple[float, float] | None:
        """When it left the queue (its first step on the thread) and ended,
        by the engine's clock; None if it never left the queue."""
        context = self.steps("context")
        if not context or self.terminal is None:
            return None
        return context[0].create_time.ToNanoseconds() / 1e9, self.terminal.create_time.ToNanoseconds() / 1e9


async def _crowd(
    engine: engine_service_pb2_grpc.EngineServiceStub,
    threads: threads_service_pb2_grpc.ThreadsServiceStub,
    agent: str,
) -> tuple[int, int]:
    """50 concurrent asks for a new agent, each cancelled as soon as it says
    it is queued (the asks that find the thread free go on to their answers).
    Checks one thread, one provider session, and that no two asks ever worked
    on the thread at the same time. Returns (answered, cancelled)."""
    spec = threads_pb2.Agent(id=agent, model="agent-model")
    await threads.CreateAgent(
        threads_service_pb2.CreateAgentRequest(agent=spec), metadata=user_metadata(USER)
    )
    asks = [Ask() for _ in range(CONCURRENT_ASKS)]

    async def one(ask: Ask, index: int) -> None:
        request = engine_service_pb2.AskAgentRequest(
            requester=f"asker{index}", target_agent_id=agent, message=f"question {index}?"
        )
        call = engine.AskAgent(request, metadata=user_metadata(USER), timeout=120, wait_for_ready=True)
        async for response in call:
            event = response.event
            ask.events.append(event)
            if event.HasField("step") and event.step.key == "queued" and event.step.status == STARTED:
                cancel = engine_service_pb2.CancelRunRequest(run_id=ask.run_id)
                await engine.CancelRun(cancel, metadata=user_metadata(USER), timeout=30)

    await asyncio.wait_for(asyncio.gather(*(one(ask, i) for i, ask in enumerate(asks))), 120)

    # One live thread: every ask ran on it.
    assert len({a.events[0].run_started.conversation_id for a in asks}) == 1
    thread = await threads.EnsureAgentThread(
        threads_service_pb2.EnsureAgentThreadRequest(target_agent_id=agent), metadata=user_metadata(USER)
    )
    assert not thread.created and thread.thread.id == asks[0].events[0].run_started.conversation_id
    # Taking turns: no ask left the queue before the one working had ended.
    spans = sorted(span for a in asks if (span := a.worked()) is not None)
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:], strict=False)), spans
    # One provider session ever bound on the thread.
    listed = await threads.ListProviderSessions(
        threads_service_pb2.ListProviderSessionsRequest(
            agent_thread_id=thread.thread.id, include_released=True
        ),
        metadata=user_metadata(USER),
    )
    (session,) = listed.sessions
    assert session.provider_id == "agent" and not session.HasField("release_time")
    finals = [a.terminal.final.text for a in asks if a.terminal is not None and a.answered]
    others = [a.terminal for a in asks if a.terminal is not None and not a.answered]
    assert len(finals) + len(others) == CONCURRENT_ASKS
    assert finals
    assert {e.error.code for e in others} <= {"CANCELLED"}
    # The first answer started the CLI's native session; every later one resumed it.
    resumed = f"resumed {session.native_session_id}. "
    assert sum(not text.startswith(resumed) for text in finals) == 1, finals
    # Each answer right after its question on the thread.
    entries = await threads.ListEntries(
        threads_service_pb2.ListEntriesRequest(thread_id=thread.thread.id, page_size=200),
        metadata=user_metadata(USER),
    )
    rows = list(entries.entries)
    answers = [i for i, e in enumerate(rows) if e.role == threads_pb2.ROLE_ASSISTANT]
    # (An ask cancelled just after it wrote its answer has an answer too.)
    assert {rows[i].run_id for i in answers} >= {a.run_id for a in asks if a.answered}
    for i in answers:
        assert i > 0 and rows[i - 1].correlation_id == rows[i].correlation_id
    return len(finals), len(others)


@pytest.mark.timeout(300)
async def test_concurrent_asks_for_one_agent_share_one_thread_and_one_session(stack: Stack) -> None:
    """50 concurrent asks for one agent, 20 times on PostgreSQL and 10 on
    SQLite, each time for a new agent so that its thread and its session are
    created in the race, not found. The asks of one agent take turns by design
    (a queued ask looks every 0.1 s whether its turn has come, and an answer
    takes about 0.5 s here), so 100 x 50 answers would take about 40 minutes.
    Instead an ask that reports it is queued is cancelled at once: the race is
    over by then (whoever found the thread free is working, and must be alone,
    on the one session)."""
    began = time.monotonic()
    answered = cancelled = 0
    async with (
        grpc.aio.insecure_channel(stack.engine_address) as engine_channel,
        grpc.aio.insecure_channel(stack.threads_address) as threads_channel,
    ):
        engine = engine_service_pb2_grpc.EngineServiceStub(engine_channel)
        threads = threads_service_pb2_grpc.ThreadsServiceStub(threads_channel)
        prefix = uuid.uuid4().hex[:6]
        for repetition in range(REPETITIONS[stack.backend]):
            counts = await _crowd(engine, threads, f"crowd-{prefix}-{repetition}")
            answered, cancelled = answered + counts[0], cancelled + counts[1]
    runs = await _no_run_left_running(stack)
    assert sum(status == "cancelled" for status, _ in runs.values()) >= cancelled
    print(
        f"\n[{stack.backend}] {REPETITIONS[stack.backend]} x {CONCURRENT_ASKS} concurrent asks, one thread "
        f"and one session each time: {answered} answered, {cancelled} cancelled while queued, "
        f"in {time.monotonic() - began:.1f} s"
    )
