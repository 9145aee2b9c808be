"""The run benchmark: latency and throughput of an agent run, end to end
through the real processes (launcher, HTTP + SSE gateway, gRPC services) and
on the in-process floor (the same run logic and domain code in one process,
no network), on the same kind of database, in one invocation.

    scripts/bench.sh                   # the whole run matrix, 500 runs per level; docs/benchmarks.json
    scripts/bench.sh --smoke --out /tmp/bench            # every scenario, a few runs each (CI)
    scripts/bench.sh --backends sqlite --tracing off --concurrency 1,8 --sse-clients 0   # the old matrix
    scripts/bench.sh --runs 2000 --profile /tmp/prof     # py-spy on every process

The matrix: the distributed path on each backend (SQLite files; fresh
PostgreSQL databases on 127.0.0.1:5432, created and dropped here) with
tracing off and on (every process exporting with the SDK's
BatchSpanProcessor over OTLP/gRPC to a local receiver, tests/bench/otlp_sink.py),
at each concurrency level (1, 8, 32); the floor on each backend; and the SSE
fan-out: run latency on one gateway without, then with, 1,000 idle SSE
clients connected (tests/bench/sse_clients.py).

Each run posts one short message (the offline model answers in ~17 tokens) and
reads its events to the end; it records the time to the first event (the first
complete SSE ``event:`` block; the first event yielded in-process) and to the
``final`` event. Every level is warmed up first, unmeasured. At concurrency N,
N workers each do runs back to back on a conversation of their own."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import inspect
import json
import linecache
import math
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from tests.bench import mcp_wait
from tests.bench.sse_clients import gateway_gauges, held_runs, raise_fd_limit, side_process
from tests.bench.sse_read import StreamError, read_sse
from tests.processes import launcher_ready, start_launcher

ROOT = Path(__file__).resolve().parents[2]
USER = "bench"
MESSAGE = "What is the capital of France, in one short sentence?"
PATHS = ("distributed", "floor")
BACKENDS = ("sqlite", "postgres")
TRACING = ("off", "on")
EMBEDDERS = ("use-multilingual-v3", "hashing")
SERVICES = ("threads", "memory", "router", "engine")
ADMIN_URL = os.environ.get("SWITCHBOARD_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
READY_TIMEOUT = 120.0
STOP_GRACE = 20.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PROFILE_RATE = 100  # py-spy samples per second
# The keys of benchmarks.json this benchmark writes; a new run replaces them
# all (a key it did not measure this time is dropped, not left stale). The
# other benchmarks' keys (threads, router, memory) are kept.
RUN_KEYS = frozenset(
    {
        "date",
        "command",
        "commit",
        "machine",
        "settings",
        "scenarios",
        "profiles",
        "sql_per_run",
        "floor_calls",
        "ratios",
        "tracing",
        "tracing_overhead",
        "sse",
        "targets",
    }
)

# Issue 9's targets, on the distributed path with tracing off: (key, label,
# limit, "max" or "min"). Each backend measured gets its own rows (the
# PostgreSQL ones prefixed "postgres_"); the SSE row is for the gateway of the
# SSE scenario.
TARGETS = (
    ("first_event_p50_ms", "First SSE event p50 (c1)", 1.5, "max"),
    ("first_event_p99_ms", "First SSE event p99 (c1)", 3.0, "max"),
    ("full_run_p50_ms", "Full run p50 (c1)", 5.0, "max"),
    ("full_run_p99_ms", "Full run p99 (c1)", 10.0, "max"),
    ("tracing_adds_p50_ms", "Tracing on adds, full run p50 (c1, ms)", 2.0, "max"),
    ("runs_per_s_c8", "Throughput at c8 (runs/s)", 300.0, "min"),
    ("full_run_p99_c8_ms", "Full run p99 at c8", 60.0, "max"),
    ("ratio_first_event_p50_c1", "Distributed / floor, first event p50 (c1)", 4.0, "max"),
    ("ratio_full_run_p50_c1", "Distributed / floor, full run p50 (c1)", 4.0, "max"),
)
SSE_TARGET = ("sse_full_run_p99_rise_pct", "Run p99 rise with {clients:,} idle SSE clients (%)", 10.0, "max")


class BenchError(RuntimeError):
    pass


@dataclass(frozen=True)
class Sample:
    first_ms: float
    full_ms: float


# A run on the conversation of worker ``i``: run_once(i) -> Sample.
RunOnce = Callable[[int], Awaitable[Sample]]


# Statistics


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def summarise(samples: list[Sample], elapsed: float, concurrency: int) -> dict[str, Any]:
    firsts = [s.first_ms for s in samples]
    fulls = [s.full_ms for s in samples]
    return {
        "concurrency": concurrency,
        "runs": len(samples),
        "runs_per_s": round(len(samples) / elapsed, 1),
        "elapsed_s": round(elapsed, 3),
        "first_event": {
            "p50_ms": round(percentile(firsts, 50), 3),
            "p99_ms": round(percentile(firsts, 99), 3),
            "mean_ms": round(sum(firsts) / len(firsts), 3),
        },
        "full_run": {
            "p50_ms": round(percentile(fulls, 50), 3),
            "p99_ms": round(percentile(fulls, 99), 3),
            "mean_ms": round(sum(fulls) / len(fulls), 3),
        },
    }


# CPU accounting and processes (Linux /proc)


def _stat_fields(pid: int) -> list[str]:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()  # fields 3.. (after "pid (comm) ")


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU time of a process, all its threads."""
    fields = _stat_fields(pid)
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS


def module_name(pid: int) -> str | None:
    """``engine`` for a process ``python -m services.engine``; None otherwise or if gone."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return None
    if "-m" in argv and argv.index("-m") + 1 < len(argv):
        return argv[argv.index("-m") + 1].rsplit(".", 1)[-1]
    return None


def children(pid: int) -> dict[str, int]:
    """The launcher's children by name (threads, memory, router, engine, gateway)."""
    found: dict[str, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if int(_stat_fields(int(entry.name))[1]) != pid:
                continue
        except (OSError, ValueError, IndexError):
            continue
        name = module_name(int(entry.name))
        if name is not None:
            found[name] = int(entry.name)
    return found


class CpuMeter:
    """CPU time used by some processes and this one between start() and per_run()."""

    def __init__(self, pids: dict[str, int]) -> None:
        self._pids = pids
        self._before: dict[str, tuple[float, float]] = {}

    def _now(self) -> dict[str, tuple[float, float]]:
        own = os.times()
        return {
            **{name: cpu_seconds(pid) for name, pid in self._pids.items()},
            "bench": (own.user, own.system),
        }

    def start(self) -> None:
        self._before = self._now()

    def per_run(self, runs: int) -> dict[str, dict[str, float]]:
        """Milliseconds per run by process, all (user + system) and system only."""
        after = self._now()
        out: dict[str, dict[str, float]] = {"cpu_ms_per_run": {}, "cpu_sys_ms_per_run": {}}
        for name, (user, system) in after.items():
            user0, system0 = self._before[name]
            out["cpu_ms_per_run"][name] = round((user - user0 + system - system0) * 1000 / runs, 3)
            out["cpu_sys_ms_per_run"][name] = round((system - system0) * 1000 / runs, 3)
        for values in out.values():
            values["total"] = round(sum(values.values()), 3)
        return out


# Profiling (optional): py-spy on each process during the measured phases


class Profiler:
    """py-spy record (raw collapsed stacks) on each process until stop()."""

    def __init__(self, folder: Path, label: str, pids: dict[str, int]) -> None:
        self.folder, self.label, self.pids = folder, label, pids
        self._spies: list[subprocess.Popen[bytes]] = []
        self._started = 0.0
        self.duration = 0.0

    def path(self, name: str) -> Path:
        return self.folder / f"{self.label}-{name}.txt"

    def start(self) -> None:
        spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
        if spy is None:
            raise BenchError("--profile needs py-spy: .venv/bin/pip install py-spy")
        self.folder.mkdir(parents=True, exist_ok=True)
        for name, pid in self.pids.items():
            command = [
                spy,
                "record",
                "--pid",
                str(pid),
                "-r",
                str(PROFILE_RATE),
                "-f",
                "raw",
                "--full-filenames",
            ]
            command += ["-o", str(self.path(name))]
            self._spies.append(
                subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )
        time.sleep(0.5)  # py-spy attaches
        self._started = time.monotonic()

    def stop(self) -> None:
        self.duration = time.monotonic() - self._started
        for spy in self._spies:
            spy.send_signal(signal.SIGINT)  # py-spy writes its output on Ctrl-C
        for spy in self._spies:
            try:
                spy.wait(30)
            except subprocess.TimeoutExpired:
                spy.kill()
                spy.wait()


# Where a frame's time goes, by the file it runs in (first match wins).
CATEGORIES = (
    ("event loop C internals (task steps, callbacks, GC, uvloop)", ("Handle._run (", "Runner.run (")),
    ("aiosqlite (async bridge)", ("aiosqlite/",)),
    ("SQLAlchemy (ORM + Core)", ("sqlalchemy/",)),
    ("sqlmodel", ("sqlmodel/",)),
    ("greenlet", ("greenlet/",)),
    ("gRPC (grpc.aio + cython)", ("grpc/", "grpc_", "_cygrpc", "cygrpc", "grpcio")),
    ("protobuf + json_format", ("google/protobuf/",)),
    ("OpenTelemetry", ("opentelemetry/",)),
    ("SSE (sse_starlette)", ("sse_starlette/",)),
    ("uvicorn / h11 / httptools", ("uvicorn/", "h11/", "httptools/")),
    ("FastAPI / Starlette", ("fastapi/", "starlette/")),
    ("pydantic", ("pydantic/", "pydantic_core/")),
    ("anyio", ("anyio/",)),
    ("httpx / httpcore (client)", ("httpx/", "httpcore/")),
    ("tenacity", ("tenacity/",)),
    ("json", ("json/",)),
    ("logging", ("logging/",)),
    ("uuid", ("uuid.py",)),
    ("alembic", ("alembic/",)),
    ("switchboard code", ("services/", "gateway/", "tests/bench/")),
    ("asyncio event loop", ("asyncio/", "uvloop/", "selectors.py", "threading.py")),
)
# A thread whose innermost frame is one of these, on a blocking line, waits.
WAITERS = ("_connection_worker_thread", "EpollSelector.select", "Condition.wait", "Event.wait", "_worker")
BLOCKING = ("get(", "poll(", "acquire(", "wait(")
FRAME = re.compile(r"^(?P<function>.*) \((?P<file>.*):(?P<line>\d+)\)$")


def short(frame: str) -> str:
    """``func (/…/site-packages/pkg/mod.py:12)`` as ``func (pkg/mod.py:12)``."""
    match = FRAME.match(frame)
    if match is None:
        return frame
    file = match["file"]
    for marker in ("/site-packages/", f"{ROOT}/", "/lib/python3.11/", "/lib/python3.12/", "/lib/python3.13/"):
        if marker in file:
            file = file.split(marker, 1)[1]
            break
    return f"{match['function']} ({file}:{match['line']})"


def is_waiting(frame: str) -> bool:
    match = FRAME.match(frame)
    if match is None or match["function"] not in WAITERS:
        return False
    source = linecache.getline(match["file"], int(match["line"]))
    return any(call in source for call in BLOCKING)


def category(frame: str) -> str:
    for name, needles in CATEGORIES:
        if any(needle in frame for needle in needles):
            return name
    return "other"


def thread_category(leaf: str) -> str:
    """What a thread other than the event loop's is doing."""
    if "aiosqlite/" in leaf:
        return "sqlite3 C call (query, or sleeping in SQLite's busy handler)"
    if leaf.startswith("Thread.run ("):
        return "native thread (gRPC event engine)"
    return category(leaf)


def read_stacks(path: Path) -> Iterator[tuple[list[str], int]]:
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            yield stack.split(";"), int(count)


def profile_summary(path: Path, duration: float) -> dict[str, Any]:
    """Samples of threads that were not waiting, split between the event
    loop's thread (including SQLAlchemy's greenlets, which run on it) and
    other threads (aiosqlite's, one per connection); per category the share
    of the event loop's samples spent in it (self) and under it (inclusive);
    the top innermost frames; and the cores all that amounts to."""
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    others: Counter[str] = Counter()
    main = other = waiting = 0
    for frames, count in read_stacks(path):
        if not frames:
            continue
        if is_waiting(frames[-1]):
            waiting += count
            continue
        frames = [short(f) for f in frames]
        if frames[0].startswith("Thread._bootstrap"):  # a thread of its own
            other += count
            others[thread_category(frames[-1])] += count
            continue
        main += count
        for name in {category(f) for f in frames}:
            inclusive[name] += count
        own[category(frames[-1])] += count
        leaves[frames[-1]] += count
    rate = PROFILE_RATE * duration if duration else 0.0

    def share(count: int) -> float:
        return round(100 * count / main, 1) if main else 0.0

    return {
        "samples": main + other,
        "waiting_samples": waiting,
        "event_loop_busy": round(main / rate, 2) if rate else None,  # 1.0: one core, saturated
        "other_threads_busy": round(other / rate, 2) if rate else None,
        "other_threads": {name: round(c / rate, 2) if rate else c for name, c in others.most_common(4)},
        "self_pct": {name: share(c) for name, c in own.most_common()},
        "inclusive_pct": {name: share(c) for name, c in inclusive.most_common()},
        "top_self": [[frame, share(c)] for frame, c in leaves.most_common(15)],
    }


@contextmanager
def profiled(folder: Path | None, label: str, pids: dict[str, int], report: dict[str, Any]) -> Iterator[None]:
    if folder is None:
        yield
        return
    profiler = Profiler(folder, label, pids)
    profiler.start()
    try:
        yield
    finally:
        profiler.stop()
        report[label] = {
            name: profile_summary(profiler.path(name), profiler.duration)
            for name in pids
            if profiler.path(name).exists()
        }


# Driving runs


async def drive(run_once: RunOnce, concurrency: int, total: int) -> list[Sample]:
    """``total`` runs by ``concurrency`` workers, each back to back on its own conversation."""
    tickets = iter(range(total))

    async def worker(index: int) -> list[Sample]:
        return [await run_once(index) for _ in tickets]

    batches = await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return [sample for batch in batches for sample in batch]


def variant(backend: str, tracing: str) -> str:
    """The scenario-name suffix of a configuration: "" for SQLite with
    tracing off (the names of earlier runs), else "_postgres", "_tracing",
    "_postgres_tracing"."""
    return ("_postgres" if backend == "postgres" else "") + ("_tracing" if tracing == "on" else "")


async def measure(
    args: argparse.Namespace,
    report: dict[str, Any],
    path: str,
    config: tuple[str, str],
    concurrency: int,
    run_once: RunOnce,
    cpu_pids: dict[str, int],
    profile_pids: dict[str, int],
) -> int:
    """Warms up, then measures max(runs, concurrency) runs into
    report["scenarios"]["<path><variant>_c<N>"]. Returns the runs driven."""
    backend, tracing = config
    label = f"{path}{variant(backend, tracing)}_c{concurrency}"
    total = max(args.runs, concurrency)
    await drive(run_once, concurrency, args.warmup)
    meter = CpuMeter(cpu_pids)
    meter.start()
    with profiled(args.profile, label, profile_pids, report["profiles"]):
        started = time.perf_counter()
        samples = await drive(run_once, concurrency, total)
        elapsed = time.perf_counter() - started
    report["scenarios"][label] = {
        "path": path,
        "backend": backend,
        "tracing": tracing,
        **summarise(samples, elapsed, concurrency),
        **meter.per_run(total),
    }
    print(f"  {label}: done", file=sys.stderr, flush=True)
    return int(args.warmup) + total


# Databases


@asynccontextmanager
async def postgres_databases(prefix: str) -> AsyncIterator[dict[str, str]]:
    """A fresh database per service, ``<prefix>_<service>_<hex>`` on the
    server of ADMIN_URL (trust auth); dropped (WITH FORCE) after the block.
    Yields the asyncpg SQLAlchemy URL of each."""
    try:
        admin = await asyncpg.connect(ADMIN_URL, timeout=5)
    except (OSError, asyncpg.PostgresError) as exc:
        raise BenchError(
            f"PostgreSQL at {ADMIN_URL} is not reachable ({exc}); set SWITCHBOARD_BENCH_POSTGRES_URL, "
            "or leave PostgreSQL out with --backends sqlite"
        ) from exc
    base = ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://", 1)
    names = {service: f"{prefix}_{service}_{uuid.uuid4().hex[:8]}" for service in SERVICES}
    created: list[str] = []
    try:
        for name in names.values():
            await admin.execute(f'CREATE DATABASE "{name}"')
            created.append(name)
        await admin.close()
        yield {service: f"{base}/{name}" for service, name in names.items()}
    finally:
        if admin.is_closed():
            admin = await asyncpg.connect(ADMIN_URL, timeout=5)
        try:
            for name in created:
                await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


def embedder_env(embedder: str) -> dict[str, str]:
    return {"SWITCHBOARD_ROUTER_EMBEDDER": embedder, "SWITCHBOARD_MEMORY_EMBEDDER": embedder}


# The distributed path: the launcher's five processes, over HTTP + SSE

# The benchmark's one user runs at concurrency 32 and thousands of runs a
# minute: the per-user run quotas are set out of its reach, so every run still
# pays for the check (its counts under the user's lock) without being refused.
QUOTA_OUT_OF_REACH = 1_000_000
NO_QUOTAS = {
    "SWITCHBOARD_ENGINE_MAX_CONCURRENT_RUNS_PER_USER": str(QUOTA_OUT_OF_REACH),
    "SWITCHBOARD_ENGINE_RUNS_PER_MINUTE_PER_USER": str(QUOTA_OUT_OF_REACH),
}


@asynccontextmanager
async def launched(
    folder: Path, extra_env: dict[str, str]
) -> AsyncIterator[tuple[str, subprocess.Popen[bytes], Path]]:
    """The launcher on free ports with its SQLite files under ``folder``
    (or the databases ``extra_env`` names); stopped with SIGTERM, sent to its
    five processes at once rather than one after the other as the launcher
    would (nothing is in flight any more; killed after STOP_GRACE)."""
    raise_fd_limit()  # inherited by the gateway: 1,000 SSE clients need more than 1,024 descriptors
    log = folder / "launcher.log"
    # --no-auth: the same gateway work as the runs recorded before tokens existed.
    process = start_launcher(folder, {**os.environ, **NO_QUOTAS, **extra_env}, "--no-auth")
    kids: dict[str, int] = {}
    try:
        try:
            info = await asyncio.to_thread(launcher_ready, process, folder, READY_TIMEOUT)
        except RuntimeError as error:
            raise BenchError(str(error)) from error
        kids = children(process.pid)
        yield str(info["url"]), process, log
    finally:
        kids = kids or children(process.pid)
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            for name, pid in kids.items():
                if module_name(pid) == name:
                    os.kill(pid, signal.SIGTERM)
            try:
                await asyncio.to_thread(process.wait, STOP_GRACE)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                for name, pid in kids.items():  # never leave a service behind
                    if module_name(pid) == name:
                        os.kill(pid, signal.SIGKILL)


async def sse_run(client: httpx.AsyncClient, conversation: str, started: float | None = None) -> Sample:
    """One message posted and its SSE stream read to the end; times from
    ``started`` (a perf_counter reading; default: now)."""
    return await sse_post(
        client, f"/api/agent/conversations/{conversation}/messages", {"message": MESSAGE}, started
    )


async def sse_post(
    client: httpx.AsyncClient, path: str, body: dict[str, Any], started: float | None = None
) -> Sample:
    """A run started by POSTing ``body`` to ``path`` (a message, an ask),
    its SSE stream read to the final event; times from ``started``."""
    started = time.perf_counter() if started is None else started
    async with client.stream("POST", path, json=body) as response:
        if response.status_code != 200:
            raise BenchError(f"POST {path}: {response.status_code} {(await response.aread())[:500]!r}")
        try:
            times = await read_sse(response.aiter_lines(), final="final")
        except StreamError as error:
            raise BenchError(str(error)) from error
    return Sample((times.first - started) * 1000, (times.end - started) * 1000)


async def conversations_of(client: httpx.AsyncClient, count: int) -> list[str]:
    found = []
    for _ in range(count):
        response = await client.post("/api/agent/conversations", json={"title": "bench"})
        if response.status_code != 201:
            raise BenchError(f"create conversation: {response.status_code} {response.text}")
        found.append(response.json()["id"])
    return found


@dataclass
class System:
    """One configuration of the distributed path, up and running."""

    config: tuple[str, str]  # (backend, tracing)
    folder: Path
    url: str
    client: httpx.AsyncClient
    pids: dict[str, int]  # every process, for CPU accounting
    sse: bool  # the SSE scenario runs on it
    receiver: dict[str, Any]  # the OTLP receiver's port, then (once stopped) its counts
    runs_driven: int = 0

    @property
    def services(self) -> dict[str, int]:
        return {k: v for k, v in self.pids.items() if k in SERVICES or k == "gateway"}


@asynccontextmanager
async def system(
    args: argparse.Namespace, folder: Path, config: tuple[str, str], sse: bool
) -> AsyncIterator[System]:
    """The launcher for one (backend, tracing) configuration: on fresh
    PostgreSQL databases or SQLite files, exporting traces to a receiver of
    its own when tracing is on; with ``sse``, its engine offers the held
    runs' MCP tool (other runs are not offered it)."""
    backend, tracing = config
    env = {**embedder_env(args.embedder), **args.launcher_env}
    if sse:
        env.update(mcp_wait.engine_env())
    async with AsyncExitStack() as stack:
        if backend == "postgres":
            urls = await stack.enter_async_context(postgres_databases("sbbench_runs"))
            env |= {f"SWITCHBOARD_{service.upper()}_DATABASE_URL": url for service, url in urls.items()}
        receiver: dict[str, Any] = {}
        receiver_pid = 0
        if tracing == "on":
            # Entered before the launcher, so left after it: the services
            # flush their last spans as they stop.
            receiver, receiver_pid = await stack.enter_async_context(
                side_process("tests.bench.otlp_sink", [], folder / "otlp")
            )
            env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{receiver['port']}"
        url, launcher, _ = await stack.enter_async_context(launched(folder, env))
        pids = {"launcher": launcher.pid, **children(launcher.pid)}
        if receiver_pid:
            pids["otlp_receiver"] = receiver_pid
        limits = httpx.Limits(max_connections=128, max_keepalive_connections=128)
        client = await stack.enter_async_context(httpx.AsyncClient(base_url=url, limits=limits, timeout=60.0))
        yield System(config, folder, url, client, pids, sse, receiver)


@asynccontextmanager
async def all_at_once(managers: list[Any]) -> AsyncIterator[list[Any]]:
    """Enters async context managers concurrently, and leaves them so."""
    entered: list[Any] = []

    async def enter(manager: Any) -> Any:
        value = await manager.__aenter__()
        entered.append(manager)
        return value

    results = await asyncio.gather(*(enter(m) for m in managers), return_exceptions=True)
    try:
        for result in results:
            if isinstance(result, BaseException):
                raise result
        yield results
    finally:
        await asyncio.gather(*(m.__aexit__(None, None, None) for m in entered), return_exceptions=True)


async def bench_distributed(args: argparse.Namespace, report: dict[str, Any], up: System) -> None:
    """Every concurrency level on one system; then, on the system chosen
    for it, the SSE fan-out scenario."""
    for concurrency in args.concurrency:
        conversations = await conversations_of(up.client, concurrency)

        async def run_once(index: int, conversations: list[str] = conversations) -> Sample:
            return await sse_run(up.client, conversations[index])

        up.runs_driven += await measure(
            args, report, "distributed", up.config, concurrency, run_once, up.pids, up.services
        )
    if up.sse:
        up.runs_driven += await bench_sse(args, up.client, up.url, up.folder, up.pids, report)


def record_tracing(report: dict[str, Any], up: System) -> None:
    """The spans a stopped tracing-on system exported."""
    backend, tracing = up.config
    if tracing != "on":
        return
    final = up.receiver.get("final", {})
    spans = int(final.get("spans", 0))
    report["tracing"][backend] = {
        "exporter": "OTLP/gRPC, BatchSpanProcessor (SDK defaults), to tests/bench/otlp_sink.py",
        "runs": up.runs_driven,
        "spans_received": spans,
        "spans_per_run": round(spans / up.runs_driven, 1) if up.runs_driven else None,
        "by_service": final.get("by_service", {}),
    }


# The SSE fan-out: run latency on one gateway without, then with, idle SSE clients


async def bench_sse(
    args: argparse.Namespace,
    client: httpx.AsyncClient,
    url: str,
    folder: Path,
    pids: dict[str, int],
    report: dict[str, Any],
) -> int:
    """Runs at ``sse_concurrency``: half of ``sse_runs`` before the idle
    clients come, ``sse_runs`` while ``sse_clients`` of them are connected
    (following ``sse_held_runs`` runs that wait in a tool call), the other
    half after they left. Without = before + after, so that a drift of the
    machine over the scenario does not read as an effect. Returns the runs
    driven."""
    concurrency, total = args.sse_concurrency, max(args.sse_runs, args.sse_concurrency)
    half = max(1, total // 2, concurrency)
    conversations = await conversations_of(client, concurrency)

    async def run_once(index: int) -> Sample:
        return await sse_run(client, conversations[index])

    async def phase(runs: int) -> tuple[list[Sample], float, dict[str, dict[str, float]]]:
        meter = CpuMeter({k: v for k, v in pids.items() if k in ("gateway", "engine")})
        meter.start()
        started = time.perf_counter()
        samples = await drive(run_once, concurrency, runs)
        return samples, time.perf_counter() - started, meter.per_run(runs)

    async with held_runs(client, args.sse_held_runs) as held:
        await drive(run_once, concurrency, args.warmup)
        before = await gateway_gauges(client)
        samples_before, elapsed_before, cpu_without = await phase(half)
        clients = ["--url", url, "--runs", ",".join(held), "--clients", str(args.sse_clients)]
        async with side_process("tests.bench.sse_clients", clients, folder / "sse") as (ready, _):
            connected = await gateway_gauges(client)
            samples_with, elapsed_with, cpu_with = await phase(total)
            during = await gateway_gauges(client)
        # The clients left; wait until the gateway has let go of their streams.
        deadline = time.monotonic() + 30
        after = await gateway_gauges(client)
        while after.get("sse_clients", 0) > before.get("sse_clients", 0) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            after = await gateway_gauges(client)
        samples_after, elapsed_after, _ = await phase(half)
        after = await gateway_gauges(client)
    without = summarise(samples_before + samples_after, elapsed_before + elapsed_after, concurrency)
    with_ = summarise(samples_with, elapsed_with, concurrency)

    def rise(metric: str, stat: str) -> float:
        return round((float(with_[metric][stat]) / without[metric][stat] - 1) * 100, 1)

    def gauges(values: dict[str, float]) -> dict[str, float]:
        out = {k: v for k, v in values.items() if k != "rss_bytes"}
        out["rss_mb"] = round(values.get("rss_bytes", 0) / 2**20, 1)
        return out

    final = ready.get("final", {})
    report["sse"] = {
        "backend": args.backends[0],
        "tracing": args.tracing[0],
        "clients": args.sse_clients,
        "connected": ready["connected"],
        "failed": ready["failed"],
        "connect_s": ready["connect_s"],
        "ended_early": final.get("ended_early"),
        "held_runs": len(held),
        "concurrency": concurrency,
        "without": without,
        "with": with_,
        "full_run_p99_rise_pct": rise("full_run", "p99_ms"),
        "full_run_p50_rise_pct": rise("full_run", "p50_ms"),
        "first_event_p99_rise_pct": rise("first_event", "p99_ms"),
        "cpu_ms_per_run": {"without": cpu_without["cpu_ms_per_run"], "with": cpu_with["cpu_ms_per_run"]},
        "gateway": {
            "before": gauges(before),
            "connected": gauges(connected),
            "end_of_runs": gauges(during),
            "after": gauges(after),
        },
    }
    print("  sse: done", file=sys.stderr, flush=True)
    return int(args.warmup) + 2 * half + total


# The in-process floor: the same run logic, every service's domain code called directly


async def bench_floor(args: argparse.Namespace, folder: Path, report: dict[str, Any], backend: str) -> None:
    from services.engine.collaborators import Collaborators
    from services.engine.repository import RunsRepository
    from services.engine.runs import RunRequest
    from services.engine.server import open_run_service
    from services.engine.settings import EngineSettings
    from services.memory.server import open_servicers as open_memory
    from services.memory.settings import MemorySettings
    from services.router.server import open_servicer as open_router
    from services.router.settings import RouterSettings
    from services.shared.bootstrap import Closer, Drainer
    from services.shared.embeddings import EmbedderName
    from services.shared.telemetry import setup_telemetry
    from services.threads.server import open_servicer as open_threads
    from services.threads.settings import ThreadsSettings
    from switchboard.engine.v1 import engine_pb2
    from switchboard.threads.v1 import threads_service_pb2
    from tests.bench.in_process import InProcessTransport, LocalContext

    # As in the services without an OTLP endpoint: tracing off.
    setup_telemetry("bench-floor", "")
    data = folder / f"floor-{backend}"
    data.mkdir(parents=True, exist_ok=True)
    embedder = EmbedderName(args.embedder)

    closers: list[Closer] = []
    drainers: list[Drainer] = []
    async with AsyncExitStack() as stack:
        if backend == "postgres":
            url = await stack.enter_async_context(postgres_databases("sbbench_floor"))
        else:
            url = {service: f"sqlite+aiosqlite:///{data / (service + '.db')}" for service in SERVICES}
        try:
            threads, closing = await open_threads(ThreadsSettings(database_url=url["threads"]))
            closers += closing
            memory, closing = await open_memory(  # memory + pages
                MemorySettings(database_url=url["memory"], embedder=embedder)
            )
            closers += closing
            router, closing = await open_router(RouterSettings(database_url=url["router"], embedder=embedder))
            closers += closing
            runs, _, closing, drain = await open_run_service(
                EngineSettings(
                    database_url=url["engine"],
                    max_concurrent_runs_per_user=QUOTA_OUT_OF_REACH,
                    runs_per_minute_per_user=QUOTA_OUT_OF_REACH,
                ),
                Collaborators(
                    InProcessTransport(threads, memory.memory, memory.pages, memory.handoff, router)
                ),
            )
            closers += closing
            drainers.append(drain)

            async def run_once(index: int, conversations: list[str]) -> Sample:
                started = time.perf_counter()
                first = full = 0.0
                run_id = await runs.start(
                    RunRequest(
                        user=USER,
                        request_id=str(uuid.uuid4()),  # as the gateway does
                        conversation_id=conversations[index],
                        message=MESSAGE,
                        requested_model="auto",
                        surface=engine_pb2.SURFACE_CHAT,
                        forced_skills=[],
                    )
                )
                async for event in runs.follow(USER, run_id, 0):
                    now = time.perf_counter()
                    first = first or now
                    kind = event.WhichOneof("kind")
                    if kind == "final":
                        full = now
                    elif kind == "error":
                        raise BenchError(f"the run failed: {event.error.code} {event.error.message}")
                if not full:
                    raise BenchError("the run ended without a final event")
                return Sample((first - started) * 1000, (full - started) * 1000)

            for concurrency in args.concurrency:
                conversations = []
                for _ in range(concurrency):
                    response = await threads.CreateConversation(
                        threads_service_pb2.CreateConversationRequest(title="bench"),
                        LocalContext(USER),
                    )
                    conversations.append(response.conversation.id)

                async def run_in(index: int, conversations: list[str] = conversations) -> Sample:
                    return await run_once(index, conversations)

                await measure(
                    args, report, "floor", (backend, "off"), concurrency, run_in, {}, {"bench": os.getpid()}
                )

            if backend == args.backends[0]:
                # Not timed: the database work of one run, counted over a few more.
                report["sql_per_run"] = {"backend": backend, **await count_sql(run_in, min(args.runs, 50))}
                report["floor_calls"] = await time_calls(
                    run_in, min(args.runs, 100), {"collaborator": Collaborators, "engine_db": RunsRepository}
                )
        finally:
            # As a service stops: in-flight runs drain, then everything closes in reverse.
            for drain in drainers:
                await drain(STOP_GRACE)
            for close in reversed(closers):
                await close()


async def count_sql(run_once: RunOnce, runs: int) -> dict[str, float]:
    """Statements by verb and transactions (commits, rollbacks) per run, over
    every service's database (the floor calls the same domain code)."""
    import aiosqlite.core
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    counts: Counter[str] = Counter()

    def statement(_conn: Any, _cursor: Any, sql: str, *_: Any) -> None:
        counts[sql.lstrip().split(None, 1)[0].upper()] += 1

    def commit(_conn: Any) -> None:
        counts["commits"] += 1

    def rollback(_conn: Any) -> None:
        counts["rollbacks"] += 1

    hooks: list[tuple[str, Callable[..., None]]] = [
        ("before_cursor_execute", statement),
        ("commit", commit),
        ("rollback", rollback),
    ]
    for name, hook in hooks:
        event.listen(Engine, name, hook)
    # Every database call is a hand-off to a connection's thread and back.
    bridge = aiosqlite.core.Connection
    execute: Any = bridge._execute

    async def counted(self: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
        counts["aiosqlite_thread_calls"] += 1
        return await execute(self, fn, *args, **kwargs)

    bridge._execute = counted  # type: ignore[method-assign]
    try:
        await drive(run_once, 1, runs)
    finally:
        bridge._execute = execute  # type: ignore[method-assign]
        for name, hook in hooks:
            event.remove(Engine, name, hook)
    per_run = {key: round(value / runs, 2) for key, value in sorted(counts.items())}
    per_run["statements"] = round(sum(v for k, v in counts.items() if k.isupper()) / runs, 2)
    return per_run


async def time_calls(run_once: RunOnce, runs: int, classes: dict[str, type]) -> dict[str, dict[str, float]]:
    """Calls per run and mean duration of every public coroutine method of
    ``classes`` (the collaborators and the engine's repository), at c1. Calls
    made together (asyncio.gather) overlap, so durations add up to more than
    the run."""
    spent: dict[str, float] = defaultdict(float)
    calls: Counter[str] = Counter()
    saved: list[tuple[type, str, Any]] = []

    def timed(label: str, method: Any) -> Any:
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await method(*args, **kwargs)
            finally:
                spent[label] += time.perf_counter() - started
                calls[label] += 1

        return wrapper

    for prefix, cls in classes.items():
        for name, method in list(vars(cls).items()):
            if not name.startswith("_") and inspect.iscoroutinefunction(method):
                saved.append((cls, name, method))
                setattr(cls, name, timed(f"{prefix}.{name}", method))
    try:
        await drive(run_once, 1, runs)
    finally:
        for cls, name, method in saved:
            setattr(cls, name, method)
    return {
        label: {
            "calls": round(calls[label] / runs, 2),
            "mean_ms": round(spent[label] * 1000 / calls[label], 3),
        }
        for label in sorted(calls, key=lambda k: -spent[k])
    }


# Report


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)),
        "load_avg_at_start": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def git_commit() -> str:
    def git(*argv: str) -> str:
        return subprocess.run(
            ["git", "--no-optional-locks", *argv], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        return commit + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def ratios(scenarios: dict[str, Any], levels: list[int]) -> dict[str, float]:
    """Distributed / floor at p50, tracing off, per backend and level:
    ``first_event_p50_c1`` (SQLite), ``first_event_p50_postgres_c1``..."""
    out: dict[str, float] = {}
    for backend in BACKENDS:
        suffix = variant(backend, "off")
        for c in levels:
            dist, floor = scenarios.get(f"distributed{suffix}_c{c}"), scenarios.get(f"floor{suffix}_c{c}")
            if dist is None or floor is None:
                continue
            for metric in ("first_event", "full_run"):
                out[f"{metric}_p50{suffix}_c{c}"] = round(dist[metric]["p50_ms"] / floor[metric]["p50_ms"], 2)
    return out


def tracing_overhead(scenarios: dict[str, Any], levels: list[int]) -> dict[str, dict[str, Any]]:
    """What tracing on adds to the distributed path, per backend and level
    (``sqlite_c1``...): milliseconds at p50 and p99, CPU per run."""
    out: dict[str, dict[str, Any]] = {}
    for backend in BACKENDS:
        for c in levels:
            off = scenarios.get(f"distributed{variant(backend, 'off')}_c{c}")
            on = scenarios.get(f"distributed{variant(backend, 'on')}_c{c}")
            if off is None or on is None:
                continue
            row: dict[str, Any] = {"backend": backend, "concurrency": c}
            for metric in ("first_event", "full_run"):
                for stat in ("p50", "p99"):
                    row[f"{metric}_{stat}_off_ms"] = off[metric][f"{stat}_ms"]
                    row[f"{metric}_{stat}_on_ms"] = on[metric][f"{stat}_ms"]
                    row[f"{metric}_{stat}_added_ms"] = round(
                        on[metric][f"{stat}_ms"] - off[metric][f"{stat}_ms"], 3
                    )
            row["runs_per_s_off"], row["runs_per_s_on"] = off["runs_per_s"], on["runs_per_s"]
            row["cpu_ms_per_run_added"] = round(
                on["cpu_ms_per_run"]["total"] - off["cpu_ms_per_run"]["total"], 3
            )
            out[f"{backend}_c{c}"] = row
    return out


def _target(key: str, label: str, limit: float, kind: str, value: float | None) -> dict[str, Any]:
    met = None if value is None else (value <= limit if kind == "max" else value >= limit)
    # factor_off > 1: missed by that factor.
    off = None if value is None or value == 0 else round(value / limit if kind == "max" else limit / value, 2)
    return {"key": key, "target": label, "limit": limit, "kind": kind} | {
        "measured": value,
        "met": met,
        "factor_off": off,
    }


def targets(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 9's targets for each backend whose distributed path was measured
    (tracing off), and the SSE fan-out's."""
    scenarios, ratio = report["scenarios"], report.get("ratios", {})
    overhead = report.get("tracing_overhead", {})
    measured_backends = {s.get("backend", "sqlite") for s in scenarios.values() if s["path"] == "distributed"}
    out = []
    for backend in (b for b in BACKENDS if b in measured_backends):
        suffix = variant(backend, "off")
        c1, c8 = scenarios.get(f"distributed{suffix}_c1"), scenarios.get(f"distributed{suffix}_c8")
        measured = {
            "first_event_p50_ms": c1["first_event"]["p50_ms"] if c1 else None,
            "first_event_p99_ms": c1["first_event"]["p99_ms"] if c1 else None,
            "full_run_p50_ms": c1["full_run"]["p50_ms"] if c1 else None,
            "full_run_p99_ms": c1["full_run"]["p99_ms"] if c1 else None,
            "tracing_adds_p50_ms": overhead.get(f"{backend}_c1", {}).get("full_run_p50_added_ms"),
            "runs_per_s_c8": c8["runs_per_s"] if c8 else None,
            "full_run_p99_c8_ms": c8["full_run"]["p99_ms"] if c8 else None,
            "ratio_first_event_p50_c1": ratio.get(f"first_event_p50{suffix}_c1"),
            "ratio_full_run_p50_c1": ratio.get(f"full_run_p50{suffix}_c1"),
        }
        prefix, where = ("postgres_", ", PostgreSQL") if backend == "postgres" else ("", "")
        for key, label, limit, kind in TARGETS:
            out.append(_target(prefix + key, label + where, limit, kind, measured[key]))
    if "sse" in report:
        key, label, limit, kind = SSE_TARGET
        label = label.format(clients=report["sse"]["clients"])
        out.append(_target(key, label, limit, kind, report["sse"]["full_run_p99_rise_pct"]))
    return out


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def markdown(report: dict[str, Any]) -> str:
    """The run benchmark's tables, from its JSON (old reports, without
    backends, tracing or SSE, render too)."""
    lines = [
        "| Path | Backend | Tracing | Concurrency | Runs | First event p50 (ms) | First event p99 (ms) "
        "| Full run p50 (ms) | Full run p99 (ms) | Runs/s | CPU ms/run |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in report["scenarios"].values():
        lines.append(
            f"| {s['path']} | {s.get('backend', 'sqlite')} | {s.get('tracing', 'off')} | {s['concurrency']} "
            f"| {s['runs']} | {s['first_event']['p50_ms']:.2f} | {s['first_event']['p99_ms']:.2f} "
            f"| {s['full_run']['p50_ms']:.2f} | {s['full_run']['p99_ms']:.2f} | {s['runs_per_s']:.0f} "
            f"| {s['cpu_ms_per_run']['total']:.2f} |"
        )
    if report.get("ratios"):
        lines += ["", "| Distributed / floor (p50, tracing off) | Ratio |", "|---|---:|"]
        lines += [f"| {key} | {value:.2f}× |" for key, value in report["ratios"].items()]
    if report.get("tracing_overhead"):
        lines += [
            "",
            "| Tracing on adds (ms) | First event p50 | Full run p50 | Full run p99 | CPU ms/run "
            "| Runs/s off → on |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for key, t in report["tracing_overhead"].items():
            lines.append(
                f"| {key} | {t['first_event_p50_added_ms']:+.2f} | {t['full_run_p50_added_ms']:+.2f} "
                f"| {t['full_run_p99_added_ms']:+.2f} | {t['cpu_ms_per_run_added']:+.2f} "
                f"| {t['runs_per_s_off']:.0f} → {t['runs_per_s_on']:.0f} |"
            )
    for backend, t in report.get("tracing", {}).items():
        lines += [
            "",
            f"Tracing on, {backend}: {t['spans_received']:,} spans received over {t['runs']:,} runs "
            f"({t['spans_per_run']} per run; {t['exporter']}).",
        ]
    if "sse" in report:
        sse = report["sse"]
        gw = sse["gateway"]
        lines += [
            "",
            f"SSE fan-out ({sse['backend']}, runs at c{sse['concurrency']}): {sse['connected']} of "
            f"{sse['clients']} idle clients connected in {sse['connect_s']:.1f} s, following "
            f"{sse['held_runs']} held runs ({sse['failed']} failed, {sse['ended_early']} ended early).",
            "",
            "| SSE fan-out | Runs | First event p50 (ms) | First event p99 (ms) | Full run p50 (ms) "
            "| Full run p99 (ms) | Runs/s | Gateway + engine CPU ms/run |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for label, key in (("without idle clients", "without"), ("with idle clients", "with")):
            s, cpu = sse[key], sse["cpu_ms_per_run"][key]
            lines.append(
                f"| {label} | {s['runs']} | {s['first_event']['p50_ms']:.2f} "
                f"| {s['first_event']['p99_ms']:.2f} | {s['full_run']['p50_ms']:.2f} "
                f"| {s['full_run']['p99_ms']:.2f} | {s['runs_per_s']:.0f} "
                f"| {cpu.get('gateway', 0):.2f} + {cpu.get('engine', 0):.2f} |"
            )
        lines += [
            f"| rise | | | {sse['first_event_p99_rise_pct']:+.1f} % | {sse['full_run_p50_rise_pct']:+.1f} % "
            f"| {sse['full_run_p99_rise_pct']:+.1f} % | | |",
            "",
            "| Gateway | RSS (MB) | asyncio tasks | open fds | SSE streams |",
            "|---|---:|---:|---:|---:|",
        ]
        for label, key in (
            ("before the clients", "before"),
            ("clients connected", "connected"),
            ("after the runs, clients still connected", "end_of_runs"),
            ("after the clients left", "after"),
        ):
            g = gw[key]
            lines.append(
                f"| {label} | {g['rss_mb']:.1f} | {g.get('asyncio_tasks', 0):.0f} "
                f"| {g.get('open_fds', 0):.0f} | {g.get('sse_clients', 0):.0f} |"
            )
    # Issue 9's targets as they stand, also for reports older than some of them.
    lines += ["", "| Target | Limit | Measured | Met |", "|---|---:|---:|---|"]
    for t in targets(report):
        sign = "≤" if t["kind"] == "max" else "≥"
        met = "n/a" if t["met"] is None else ("yes" if t["met"] else f"no ({t['factor_off']}× off)")
        value = "not measured" if t["measured"] is None else t["measured"]
        lines.append(f"| {t['target']} | {sign} {t['limit']:g} | {value} | {met} |")
    names: list[str] = []
    for scenario in report["scenarios"].values():
        names += [n for n in scenario["cpu_ms_per_run"] if n not in names and n != "total"]
    names.append("total")
    lines += ["", "| CPU ms per run (of which system) | " + " | ".join(names) + " |"]
    lines += ["|---|" + "---:|" * len(names)]
    for key, scenario in report["scenarios"].items():
        cpu, sys_ = scenario["cpu_ms_per_run"], scenario["cpu_sys_ms_per_run"]
        cells = [f"{cpu[n]:.2f} ({sys_[n]:.2f})" if n in cpu else "" for n in names]
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    if "sql_per_run" in report:
        sql = dict(report["sql_per_run"])
        backend = sql.pop("backend", "sqlite")
        counts = ", ".join(f"{k} {v}" for k, v in sql.items())
        lines += ["", f"Database work per run (all four databases, floor, {backend}): {counts}"]
    if "floor_calls" in report:
        lines += ["", "| Floor call (c1) | Calls per run | Mean ms |", "|---|---:|---:|"]
        lines += [f"| {k} | {v['calls']} | {v['mean_ms']:.2f} |" for k, v in report["floor_calls"].items()]
    return "\n".join(lines)


def profile_markdown(profiles: dict[str, Any]) -> str:
    lines = []
    for label, processes in profiles.items():
        for name, summary in processes.items():
            if not summary.get("samples"):
                continue
            lines.append(
                f"\n### {label} / {name}: event loop busy {summary['event_loop_busy']} core, "
                f"other threads {summary['other_threads_busy']} ({summary['other_threads']})"
            )
            own = ", ".join(f"{k} {v}%" for k, v in list(summary["self_pct"].items())[:9])
            under = ", ".join(f"{k} {v}%" for k, v in list(summary["inclusive_pct"].items())[:12])
            lines += [f"- self: {own}", f"- inclusive: {under}", "- top self frames:"]
            lines += [f"  - {pct}% {frame}" for frame, pct in summary["top_self"][:10]]
    return "\n".join(lines)


# Command line


def _items(text: str, known: tuple[str, ...], parser: argparse.ArgumentParser, what: str) -> list[str]:
    items = [item for item in text.split(",") if item]
    if unknown := set(items) - set(known):
        parser.error(f"unknown {what}: {', '.join(sorted(unknown))}")
    if not items:
        parser.error(f"name at least one of the {what}")
    return items


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scripts/bench.sh", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=500, help="measured runs per level (default 500)")
    parser.add_argument("--warmup", type=int, default=50, help="unmeasured runs before each level")
    parser.add_argument("--concurrency", default="1,8,32", help="levels, comma-separated (default 1,8,32)")
    parser.add_argument("--paths", default=",".join(PATHS), help="distributed,floor (default both)")
    parser.add_argument("--backends", default=",".join(BACKENDS), help="sqlite,postgres (default both)")
    parser.add_argument(
        "--tracing", default=",".join(TRACING), help="off,on (default both; distributed only)"
    )
    parser.add_argument(
        "--embedder",
        choices=EMBEDDERS,
        default="use-multilingual-v3",
        help="of router and memory, both paths (default use-multilingual-v3)",
    )
    parser.add_argument(
        "--sse-clients",
        type=int,
        default=1000,
        help="idle SSE clients of the SSE scenario (default 1000; 0: none)",
    )
    parser.add_argument(
        "--sse-runs", type=int, help="runs measured with the clients connected (default --runs)"
    )
    parser.add_argument("--sse-concurrency", type=int, default=1, help="of those runs (default 1)")
    parser.add_argument("--sse-held-runs", type=int, default=4, help="held runs the idle clients follow")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="a quick check: 8 runs per level (at least the level), 2 warm-up, hashing embedders, "
        "100 SSE clients, PostgreSQL with tracing off only, every system started at once",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="where benchmarks.json goes")
    parser.add_argument("--profile", type=Path, help="py-spy every process during the measured phases")
    parser.add_argument(
        "--launcher-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra environment of the five processes, for experiments"
        " (e.g. SWITCHBOARD_ENGINE_DELTA_FLUSH_CHARS=64)",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.runs, args.warmup, args.embedder = 8, 2, "hashing"
        args.sse_clients, args.sse_held_runs = min(args.sse_clients, 100), min(args.sse_held_runs, 2)
    args.sse_runs = args.sse_runs or args.runs
    args.concurrency = [int(c) for c in args.concurrency.split(",") if c]
    args.paths = _items(args.paths, PATHS, parser, "paths")
    args.backends = _items(args.backends, BACKENDS, parser, "backends")
    args.tracing = _items(args.tracing, TRACING, parser, "tracing modes")
    if bad := [item for item in args.launcher_env if "=" not in item]:
        parser.error(f"--launcher-env takes KEY=VALUE, not {bad[0]!r}")
    args.launcher_env = dict(item.split("=", 1) for item in args.launcher_env)
    if args.runs < 1 or args.warmup < 0 or not args.concurrency or min(args.concurrency) < 1:
        parser.error("--runs must be >= 1, --warmup >= 0, concurrency levels >= 1")
    if args.sse_clients < 0 or args.sse_concurrency < 1 or args.sse_held_runs < 1:
        parser.error("--sse-clients must be >= 0, --sse-concurrency and --sse-held-runs >= 1")
    return args


async def bench(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    command = os.environ.get("SWITCHBOARD_BENCH_COMMAND") or shlex.join(
        ["python", "-m", "tests.bench.bench_runs", *argv]
    )
    configs = [(backend, tracing) for backend in args.backends for tracing in args.tracing]
    if args.smoke and {("sqlite", "on"), ("postgres", "off")} <= set(configs):
        # A launch costs ~15 s of CPU (five interpreters importing): the smoke
        # run covers each backend and each tracing mode, not every pair.
        configs.remove(("postgres", "on"))
    # The SSE scenario runs on the first configuration's gateway (SQLite,
    # tracing off by default).
    sse_config = configs[0] if args.sse_clients and "distributed" in args.paths else None
    report: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": command,
        "commit": git_commit(),
        "machine": machine(),
        "settings": {
            "runs": args.runs,
            "warmup": args.warmup,
            "concurrency": args.concurrency,
            "message": MESSAGE,
            "database": "SQLite files (WAL), one per service; PostgreSQL: a fresh database per service",
            "backends": args.backends,
            "tracing": args.tracing,
            "configs": [list(c) for c in configs],
            "embedder": args.embedder,
            "sse": {
                "clients": args.sse_clients,
                "runs": args.sse_runs,
                "concurrency": args.sse_concurrency,
                "held_runs": args.sse_held_runs,
                "config": list(sse_config) if sse_config else None,
            },
            "smoke": args.smoke,
            "launcher_env": args.launcher_env,
        },
        "scenarios": {},
        "profiles": {},
        "tracing": {},
    }
    folder = Path(tempfile.mkdtemp(prefix="switchboard-bench-", dir="/tmp"))
    try:
        if "distributed" in args.paths:
            systems = [
                system(args, folder / f"distributed-{b}-tracing-{t}", (b, t), sse=(b, t) == sse_config)
                for b, t in configs
            ]
            if args.smoke:
                # Start-up is most of a smoke run: every system starts (and
                # stops) at once, then each is measured in turn.
                async with all_at_once(systems) as ups:
                    for up in ups:
                        await bench_distributed(args, report, up)
                for up in ups:
                    record_tracing(report, up)
            else:
                for manager in systems:
                    async with manager as up:
                        await bench_distributed(args, report, up)
                    record_tracing(report, up)
        if "floor" in args.paths:
            for backend in args.backends:
                await bench_floor(args, folder, report, backend)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    report["machine"]["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    report["ratios"] = ratios(report["scenarios"], args.concurrency)
    report["tracing_overhead"] = tracing_overhead(report["scenarios"], args.concurrency)
    report["targets"] = targets(report)
    for key in ("profiles", "tracing", "tracing_overhead"):
        if not report[key]:
            del report[key]
    return report


def write(out: Path, report: dict[str, Any]) -> Path:
    """Writes the report into out/benchmarks.json, replacing every key of an
    earlier run benchmark (RUN_KEYS) and keeping the other benchmarks' keys."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "benchmarks.json"
    if path.exists():
        previous = json.loads(path.read_text())
        report = {**{k: v for k, v in previous.items() if k not in RUN_KEYS}, **report}
    path.write_text(json.dumps(report, indent=2) + "\n")
    return path


def header(report: dict[str, Any]) -> str:
    m = report["machine"]
    return (
        f"{report['date']}  commit {report['commit']}  {m['cpu']}, {m['cores']} cores, "
        f"Python {m['python']}, load average {m.get('load_avg_at_start', ['?'])[0]} at the start, "
        f"{m.get('load_avg_at_end', ['?'])[0]} at the end\n{report['command']}"
    )


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    # A SIGTERM (kill, pkill, a CI timeout) ends the benchmark as Ctrl-C does:
    # the systems it launched are stopped, not left running.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        report = asyncio.run(bench(args, argv))
    except KeyboardInterrupt:
        sys.exit("interrupted: the systems it launched are stopped")
    path = write(args.out, report)
    print(f"\n{header(report)}\n")
    print(markdown(report))
    if "profiles" in report and args.profile is not None:
        text = profile_markdown(report["profiles"])
        (args.profile / "profile-summary.md").write_text(text + "\n")
        print(text)
    print(f"\nWrote {path}")


if __name__ == "__main__":
    main()
