"""The cost of many replicas on one PostgreSQL (docs/scaling.md).

For each replica count (1, 2, 4 and 8 by default) it starts that many
gateways and engines, and two each of threads, memory and router, as real
processes on one PostgreSQL, and measures what does not depend on the
number of cores (this machine has two, so throughput cannot grow here):

- the latency a cross-replica stream adds: every event of a run as a
  WatchRun on the engine that executes it sees it, and as one on every other
  engine sees it; the difference is what hearing about another replica's
  work costs (none with one replica);
- cancellation across replicas: CancelRun on an engine that does not
  execute the run, until the terminal event reaches the executing engine's
  stream;
- the idle cost of open streams: CPU per process and PostgreSQL transactions
  per second over a quiet window, first with no stream open, then with
  ``--streams`` SSE clients spread over the gateways, following runs held
  open in a tool call (tests/bench/mcp_wait.py);
- connections per process: its established sockets to the database port
  (PostgreSQL's, or PgBouncer's), and the server's own count
  (pg_stat_activity) per database.

Each count is measured with the services on PostgreSQL directly, then
through PgBouncer in transaction mode (Debian's, started here:
tests/pgbouncer.py).

    scripts/bench.sh scale [--replicas 1,2,4,8] [--streams 1000] [--window 10]
                           [--poolers none,pgbouncer] [--smoke] [--out DIR]

Merges a "scale" key into benchmarks.json and prints one table per count."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import grpc
import httpx

from services.shared.identity import user_metadata
from switchboard.engine.v1 import engine_service_pb2, engine_service_pb2_grpc
from tests.bench import mcp_wait
from tests.bench.bench_all import merge_key
from tests.bench.bench_runs import cpu_seconds
from tests.bench.sse_clients import held_runs, raise_fd_limit, side_process
from tests.databases import SERVICES, postgres_database
from tests.pgbouncer import PgBouncer, pgbouncer
from tests.processes import child_env, free_ports, process, wait_grpc_serving, wait_http_ok

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "scale-token"
USER = "alice"
BACKING = ("threads", "memory", "router")
BACKING_REPLICAS = 2
# The offline model's pace: a run streams a few dozen tokens over a couple of
# seconds, so that most of its events are written after every watcher is on.
TOKEN_DELAY = 0.04
# Events delivered within this long of the watchers' start are their replay
# of what was already written, not live events.
REPLAY_SETTLE = 0.3
DB_PORT = 5432
ADMIN_URL = os.environ.get("SWITCHBOARD_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
# Server connections PgBouncer opens per database: what every replica of the
# service shares, whatever their count.
POOLER_SIZE = 10


@dataclass
class Stack:
    """One deployment: its processes by name ("engine-3", "gateway-0",
    "threads-1"...), the engines' gRPC addresses, the gateways' URLs and
    the four databases."""

    pids: dict[str, int] = field(default_factory=dict)
    engines: dict[str, str] = field(default_factory=dict)
    gateways: list[str] = field(default_factory=list)
    databases: dict[str, str] = field(default_factory=dict)

    def role_of(self, name: str) -> str:
        return name.rsplit("-", 1)[0]


def targets(addresses: list[str]) -> str:
    """A gRPC target that balances over ``addresses`` (round robin is the
    services' client policy), as a headless Service would."""
    return "ipv4:" + ",".join(addresses)


@asynccontextmanager
async def deployment(
    folder: Path, replicas: int, extra: Mapping[str, str], pooler: PgBouncer | None = None
) -> AsyncIterator[Stack]:
    """``replicas`` gateways and engines and BACKING_REPLICAS of each backing
    service on one PostgreSQL (four databases of their own), all started at
    once; stopped, and the databases given back, when the block ends. With a
    ``pooler``, the services reach their databases through it (transaction
    mode, no named prepared statements) and PostgreSQL directly only to
    LISTEN."""
    names = [f"{s}-{i}" for s in BACKING for i in range(BACKING_REPLICAS)]
    names += [f"engine-{i}" for i in range(replicas)] + [f"gateway-{i}" for i in range(replicas)]
    ports = free_ports(*names)
    stack = Stack()
    async with AsyncExitStack() as exits:
        for service in SERVICES:
            stack.databases[service] = await exits.enter_async_context(
                postgres_database(f"sbscale_{service}", service)
            )
        backing = {
            s: targets([f"127.0.0.1:{ports[f'{s}-{i}']}" for i in range(BACKING_REPLICAS)]) for s in BACKING
        }
        engines = [f"127.0.0.1:{ports[f'engine-{i}']}" for i in range(replicas)]
        databases: dict[str, str] = {}
        for service, url in stack.databases.items():
            variable = f"SWITCHBOARD_{service.upper()}_DATABASE"
            databases[f"{variable}_URL"] = url if pooler is None else pooler.url(url)
            if pooler is not None:
                databases[f"{variable}_PREPARED_STATEMENTS"] = "false"
                databases[f"{variable}_LISTEN_URL"] = url
        common = {
            **databases,
            "SWITCHBOARD_MEMORY_EMBEDDER": "hashing",
            "SWITCHBOARD_ROUTER_EMBEDDER": "hashing",
            **{f"SWITCHBOARD_ENGINE_{s.upper()}_ADDRESS": target for s, target in backing.items()},
            **{f"SWITCHBOARD_GATEWAY_{s.upper()}_ADDRESS": target for s, target in backing.items()},
            "SWITCHBOARD_GATEWAY_ENGINE_ADDRESS": targets(engines),
            "SWITCHBOARD_GATEWAY_TOKENS": f"{TOKEN}:{USER}",
            "SWITCHBOARD_ENGINE_OFFLINE_TOKEN_DELAY": str(TOKEN_DELAY),
            **mcp_wait.engine_env(),
            **extra,
        }

        async def start(name: str) -> None:
            service = stack.role_of(name)
            module = "gateway" if service == "gateway" else f"services.{service}"
            env = {**common, f"SWITCHBOARD_{service.upper()}_PORT": str(ports[name])}
            if service == "engine":
                env["SWITCHBOARD_ENGINE_INSTANCE_ID"] = name
            log = folder / f"{name}.log"
            child = await exits.enter_async_context(
                process([sys.executable, "-m", module], child_env(env), log)
            )
            stack.pids[name] = child.pid
            if service == "gateway":
                url = f"http://127.0.0.1:{ports[name]}"
                await wait_http_ok(f"{url}/healthz", log, timeout=180)
            else:
                await wait_grpc_serving(f"127.0.0.1:{ports[name]}", log, timeout=180)

        # The backing services first (the engines check them at start), then the rest together.
        await asyncio.gather(*(start(n) for n in names if stack.role_of(n) in BACKING))
        await asyncio.gather(*(start(n) for n in names if stack.role_of(n) not in BACKING))
        stack.engines = {f"engine-{i}": address for i, address in enumerate(engines)}
        stack.gateways = [f"http://127.0.0.1:{ports[f'gateway-{i}']}" for i in range(replicas)]
        yield stack


# What the database says


async def executor_of(stack: Stack, run_id: str) -> str:
    """The engine (its instance id) that executes ``run_id``."""
    connection = await asyncpg.connect(stack.databases["engine"].replace("+asyncpg", ""))
    try:
        for _ in range(200):
            found = await connection.fetchval("SELECT instance_id FROM agent_runs WHERE id = $1", run_id)
            if found:
                return str(found)
            await asyncio.sleep(0.01)
    finally:
        await connection.close()
    raise RuntimeError(f"run {run_id} has no executing engine")


async def database_counters(stack: Stack) -> dict[str, dict[str, int]]:
    """Per database: transactions so far (commits and rollbacks) and the
    server's connections to it now."""
    names = {url.rsplit("/", 1)[-1].split("?")[0]: service for service, url in stack.databases.items()}
    connection = await asyncpg.connect(stack.databases["engine"].replace("+asyncpg", ""))
    try:
        await connection.execute("SELECT pg_stat_clear_snapshot()")
        rows = await connection.fetch(
            "SELECT datname, xact_commit + xact_rollback AS xacts,"
            " (SELECT count(*) FROM pg_stat_activity a WHERE a.datname = d.datname) AS connections"
            " FROM pg_stat_database d WHERE datname = ANY($1::text[])",
            list(names),
        )
    finally:
        await connection.close()
    return {
        names[r["datname"]]: {"xacts": int(r["xacts"]), "connections": int(r["connections"])} for r in rows
    }


def database_sockets(pid: int, port: int) -> int:
    """The process's established TCP connections to ``port`` (its database
    connections: the pool's and any listener's)."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        return 0
    count = 0
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            remote_port = int(parts[2].rsplit(":", 1)[1], 16)
            if remote_port == port and parts[3] == "01" and parts[9] in inodes:
                count += 1
    return count


# Measurements


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


async def start_run(client: httpx.AsyncClient, text: str) -> tuple[str, asyncio.Task[None]]:
    """A run started through a gateway; its id and the task reading its
    stream to the end (so the gateway keeps it as any client would)."""
    created = await client.post("/api/agent/conversations", json={})
    created.raise_for_status()
    path = f"/api/agent/conversations/{created.json()['id']}/messages"
    started: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def read() -> None:
        async with client.stream("POST", path, json={"message": text}, timeout=120) as response:
            async for line in response.aiter_lines():
                if line.startswith("data:") and not started.done():
                    started.set_result(json.loads(line[5:])["run_id"])

    reader = asyncio.create_task(read())
    return await asyncio.wait_for(started, 60), reader


async def watch(stub: engine_service_pb2_grpc.EngineServiceStub, run_id: str) -> dict[int, float]:
    """When each event of ``run_id`` reached this engine's WatchRun (by sequence)."""
    seen: dict[int, float] = {}
    request = engine_service_pb2.WatchRunRequest(run_id=run_id, after_sequence=0)
    async for response in stub.WatchRun(request, metadata=user_metadata(USER), timeout=120):
        seen[response.event.sequence] = time.perf_counter()
    return seen


async def stream_latency(
    stack: Stack, stubs: dict[str, Any], client: httpx.AsyncClient, runs: int
) -> dict[str, Any]:
    """Per live event, how much later an engine that does not execute the
    run delivers it than the one that does."""
    added: list[float] = []
    for index in range(runs):
        run_id, reader = await start_run(client, f"Explain replica number {index} and its leases in detail.")
        executor = await executor_of(stack, run_id)
        begun = time.perf_counter()
        seen = await asyncio.gather(*(watch(stub, run_id) for stub in stubs.values()))
        await reader
        by_engine = dict(zip(stubs, seen, strict=True))
        local = by_engine[executor]
        for name, events in by_engine.items():
            if name == executor:
                continue
            for sequence, at in events.items():
                if sequence in local and local[sequence] > begun + REPLAY_SETTLE:
                    added.append((at - local[sequence]) * 1000)
    if not added:
        return {"events": 0}
    return {
        "events": len(added),
        "p50_ms": round(percentile(added, 0.5), 2),
        "p99_ms": round(percentile(added, 0.99), 2),
        "mean_ms": round(statistics.fmean(added), 2),
    }


async def cancel_latency(
    stack: Stack, stubs: dict[str, Any], client: httpx.AsyncClient, samples: int
) -> dict[str, Any]:
    """CancelRun on another engine than the executor, until the executor's
    stream of the run ends."""
    took: list[float] = []
    async with held_runs(client, samples) as held:
        for run_id in held:
            executor = await executor_of(stack, run_id)
            other = next(name for name in stubs if name != executor)
            ended = asyncio.Event()

            async def follow(
                run_id: str = run_id, executor: str = executor, ended: asyncio.Event = ended
            ) -> None:
                await watch(stubs[executor], run_id)
                ended.set()

            follower = asyncio.create_task(follow())
            await asyncio.sleep(REPLAY_SETTLE)
            begun = time.perf_counter()
            await stubs[other].CancelRun(
                engine_service_pb2.CancelRunRequest(run_id=run_id), metadata=user_metadata(USER), timeout=30
            )
            await asyncio.wait_for(ended.wait(), 60)
            took.append((time.perf_counter() - begun) * 1000)
            await follower
    return {
        "samples": len(took),
        "p50_ms": round(percentile(took, 0.5), 1),
        "max_ms": round(max(took), 1),
    }


async def quiet_window(stack: Stack, seconds: float) -> dict[str, Any]:
    """CPU per process and transactions per second per database over
    ``seconds`` in which nothing but what is open goes on."""
    cpu0 = {name: sum(cpu_seconds(pid)) for name, pid in stack.pids.items()}
    db0 = await database_counters(stack)
    started = time.perf_counter()
    await asyncio.sleep(seconds)
    elapsed = time.perf_counter() - started
    cpu1 = {name: sum(cpu_seconds(pid)) for name, pid in stack.pids.items()}
    db1 = await database_counters(stack)
    by_role: dict[str, list[float]] = {}
    for name in stack.pids:
        by_role.setdefault(stack.role_of(name), []).append((cpu1[name] - cpu0[name]) / elapsed * 100)
    replicas_of = {role: len(values) for role, values in by_role.items()}
    return {
        "seconds": round(elapsed, 1),
        "cpu_pct_per_replica": {role: round(statistics.fmean(v), 2) for role, v in by_role.items()},
        "xacts_per_s_per_replica": {
            service: round(
                (db1[service]["xacts"] - db0[service]["xacts"]) / elapsed / replicas_of[service], 1
            )
            for service in SERVICES
            if service in db1 and service in db0
        },
        "server_connections": {
            service: db1[service]["connections"] for service in SERVICES if service in db1
        },
    }


async def idle_cost(
    stack: Stack, client: httpx.AsyncClient, folder: Path, streams: int, window: float, db_port: int
) -> dict[str, Any]:
    """The quiet window with no stream, then with ``streams`` SSE clients
    spread evenly over the gateways (following a few held runs)."""
    quiet = await quiet_window(stack, window)
    held_count = max(2, len(stack.gateways))
    async with held_runs(client, held_count) as held, AsyncExitStack() as clients:
        share = streams // len(stack.gateways)
        ready: list[dict[str, Any]] = []
        for index, url in enumerate(stack.gateways):
            count = share + (1 if index < streams % len(stack.gateways) else 0)
            argv = [
                "--url",
                url,
                "--runs",
                ",".join(held),
                "--clients",
                str(count),
                "--header",
                f"Authorization:Bearer {TOKEN}",
            ]
            info, _ = await clients.enter_async_context(
                side_process("tests.bench.sse_clients", argv, folder / f"sse-{index}")
            )
            ready.append(info)
        await asyncio.sleep(2)  # the replays are over; only what stays open goes on
        streaming = await quiet_window(stack, window)
    connections = {name: database_sockets(pid, db_port) for name, pid in stack.pids.items()}
    by_role: dict[str, list[int]] = {}
    for name, count in connections.items():
        by_role.setdefault(stack.role_of(name), []).append(count)
    return {
        "streams": sum(int(r["connected"]) for r in ready),
        "failed": sum(int(r["failed"]) for r in ready),
        "no_streams": quiet,
        "with_streams": streaming,
        "database_sockets_per_replica": {role: max(v) for role, v in by_role.items()},
    }


async def measure(
    args: argparse.Namespace, replicas: int, folder: Path, pooler: PgBouncer | None
) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    async with deployment(folder, replicas, {}, pooler) as stack:
        up = time.perf_counter() - started
        print(
            f"  {replicas} replicas: {len(stack.pids)} processes up in {up:.0f} s",
            file=sys.stderr,
            flush=True,
        )
        headers = {"Authorization": f"Bearer {TOKEN}"}
        channels = {name: grpc.aio.insecure_channel(address) for name, address in stack.engines.items()}
        stubs = {name: engine_service_pb2_grpc.EngineServiceStub(c) for name, c in channels.items()}
        try:
            async with httpx.AsyncClient(base_url=stack.gateways[0], headers=headers, timeout=60) as client:
                result: dict[str, Any] = {"processes": len(stack.pids), "start_s": round(up, 1)}
                if replicas > 1:
                    result["cross_replica_stream"] = await stream_latency(
                        stack, stubs, client, args.latency_runs
                    )
                    result["cross_replica_cancel"] = await cancel_latency(
                        stack, stubs, client, args.cancel_samples
                    )
                db_port = DB_PORT if pooler is None else pooler.port
                result["idle"] = await idle_cost(stack, client, folder, args.streams, args.window, db_port)
        finally:
            for channel in channels.values():
                await channel.close()
    return result


def table(results: dict[str, dict[str, Any]]) -> str:
    lines = [
        "| replicas | stream added p50 / p99 ms | cancel p50 ms | gateway CPU % idle / streams "
        "| engine CPU % idle / streams | engine xacts/s idle / streams | DB sockets gw / engine |",
        "|---|---|---|---|---|---|---|",
    ]
    for count, r in sorted(results.items(), key=lambda item: int(item[0])):
        if "error" in r:
            lines.append(f"| {count} | {r['error'][:120]} | | | | | |")
            continue
        stream = r.get("cross_replica_stream", {})
        cancel = r.get("cross_replica_cancel", {})
        idle = r["idle"]
        quiet, busy = idle["no_streams"], idle["with_streams"]
        sockets = idle["database_sockets_per_replica"]

        def pair(key: str, role: str, quiet: dict[str, Any] = quiet, busy: dict[str, Any] = busy) -> str:
            return f"{quiet[key].get(role)} / {busy[key].get(role)}"

        stream_ms = f"{stream.get('p50_ms', '–')} / {stream.get('p99_ms', '–')}"
        lines.append(
            f"| {count} | {stream_ms} | {cancel.get('p50_ms', '–')} "
            f"| {pair('cpu_pct_per_replica', 'gateway')} | {pair('cpu_pct_per_replica', 'engine')} "
            f"| {pair('xacts_per_s_per_replica', 'engine')} "
            f"| {sockets.get('gateway', 0)} / {sockets.get('engine', 0)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--replicas", default="1,2,4,8", help="replica counts of the gateway and the engine")
    parser.add_argument(
        "--streams", type=int, default=1000, help="open SSE streams, spread over the gateways"
    )
    parser.add_argument("--window", type=float, default=10.0, help="seconds of each quiet window")
    parser.add_argument("--latency-runs", type=int, default=5)
    parser.add_argument("--cancel-samples", type=int, default=8)
    parser.add_argument(
        "--poolers", default="none,pgbouncer", help="none: PostgreSQL directly; pgbouncer: through PgBouncer"
    )
    parser.add_argument("--smoke", action="store_true", help="1 and 2 replicas, 40 streams, short windows")
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.replicas, args.streams, args.window, args.latency_runs, args.cancel_samples = (
            "1,2",
            40,
            2.0,
            1,
            2,
        )
    counts = [int(c) for c in args.replicas.split(",")]
    poolers = args.poolers.split(",")
    if not counts or min(counts) < 1 or args.streams < 0 or args.window <= 0:
        parser.error("--replicas must be counts of at least 1; --streams >= 0; --window > 0")
    if not set(poolers) <= {"none", "pgbouncer"}:
        parser.error("--poolers: none, pgbouncer")
    raise_fd_limit()
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"sb-scale-{os.getpid()}"
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for pooler_name in poolers:
        results[pooler_name] = {}
        with contextlib.ExitStack() as exits:
            pooler = None if pooler_name == "none" else exits.enter_context(pgbouncer(ADMIN_URL, POOLER_SIZE))
            for count in counts:
                try:
                    measured = asyncio.run(measure(args, count, folder / f"{pooler_name}-{count}", pooler))
                except Exception as error:  # noqa: BLE001 - a count that cannot be deployed is a result too
                    measured = {"error": f"{type(error).__name__}: {error}"}
                results[pooler_name][str(count)] = measured
                print(f"{pooler_name}:", file=sys.stderr)
                print(table({str(count): measured}), file=sys.stderr, flush=True)
    for pooler_name, by_count in results.items():
        print(
            f"\n{'PostgreSQL directly' if pooler_name == 'none' else 'through PgBouncer'}:\n{table(by_count)}"
        )
    command = os.environ.get("SWITCHBOARD_BENCH_COMMAND", "python -m tests.bench.bench_scale")
    if not args.smoke:
        merge_key(args.out, "scale", {"command": command, "token_delay_s": TOKEN_DELAY, "results": results})


if __name__ == "__main__":
    main()
