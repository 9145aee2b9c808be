"""Switchboard and LangGraph's server side by side, on the same workload
driven by the same client.

    scripts/bench.sh peer                                  # 200 runs per level; docs/benchmarks.json and .md
    scripts/bench.sh peer --smoke --out /tmp/peer          # a few runs each: checks it works
    scripts/bench.sh peer --runs 500 --concurrency 1,8,32 --jobs-per-worker 1,10,32

The peer runs from a virtualenv of its own, created once under
``.bench/peer-venv`` (pip, pinned versions: PEER_PINS), as ``langgraph dev``
(in-memory runtime) serving tests/bench/peer/graph.py: one node whose fake
chat model streams 20 tokens. Switchboard runs as its launcher's five
processes on SQLite files with the offline model (tests/bench/bench_runs.py
starts it).

A run, on either: create a conversation (a LangGraph thread), post one
message (a LangGraph run with ``stream_mode`` messages-tuple), read the SSE
stream to its end (tests/bench/sse_read.py). Its latencies are timed from
the start of the run (the create included) to the first complete SSE event
and to the end: Switchboard's ``final`` event, the peer's stream closing (it
sends no final event). At concurrency N, N workers do runs back to back;
every level is warmed up first, unmeasured. Server CPU per run is the user
+ system time of the server's whole process tree (/proc) over the measured
runs, divided by the runs. The peer runs once per ``--n-jobs-per-worker``
setting, one server at a time."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import httpx

from tests.bench import bench_all, bench_hops
from tests.bench.bench_runs import (
    MESSAGE,
    BenchError,
    Sample,
    conversations_of,
    cpu_seconds,
    drive,
    git_commit,
    machine,
    percentile,
    sse_run,
    system,
)
from tests.bench.sse_read import StreamError, read_sse
from tests.processes import free_port, process, wait_http_ok

ROOT = Path(__file__).resolve().parents[2]
PEER_PINS = ("langgraph-cli[inmem]==0.4.40", "langgraph-api==0.16.7")
PEER_VENV = ROOT / ".bench" / "peer-venv"
PEER_GRAPH = ROOT / "tests" / "bench" / "peer"
PEER_TOKENS = 20  # what the peer's fake model streams (tests/bench/peer/graph.py)
READY_TIMEOUT = 180.0
# The targets, as ratios measured in one run on one machine: Switchboard's
# server CPU per run at most 1.5× the peer's and its runs/s at least twice
# the peer's best setting, at c8 and at c32; its c1 p50 at most 1/20 of the
# peer's; its CPU per run at most 1.5× the run's fixed pieces (hops, priced
# just after); PostgreSQL at most 1.2× SQLite in CPU per run.
CPU_GOAL = 1.5
THROUGHPUT_GOAL = 2.0
LATENCY_GOAL = 20.0
PIECES_GOAL = 1.5
POSTGRES_GOAL = 1.2
GOAL_LEVELS = ("c8", "c32")


# The peer's virtualenv


def peer_venv(venv: Path = PEER_VENV) -> Path:
    """The ``langgraph`` command of a virtualenv holding PEER_PINS; creates
    or completes it with pip when it does not record those pins yet."""
    marker = venv / "switchboard-pins.txt"
    wanted = "\n".join(PEER_PINS) + "\n"
    if marker.exists() and marker.read_text() == wanted and (venv / "bin" / "langgraph").exists():
        return venv / "bin" / "langgraph"
    if not (venv / "bin" / "python").exists():
        print(f"creating the peer's virtualenv in {venv}", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    print(f"pip install {' '.join(PEER_PINS)}", file=sys.stderr, flush=True)
    done = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *PEER_PINS], check=False)
    if done.returncode != 0:
        raise BenchError(f"pip could not install {', '.join(PEER_PINS)} into {venv}")
    marker.write_text(wanted)
    return venv / "bin" / "langgraph"


def peer_version(venv: Path = PEER_VENV) -> dict[str, str]:
    """The installed versions of the peer's main packages."""
    script = (
        "import importlib.metadata as m, json, platform; print(json.dumps({p: m.version(p) for p in "
        "('langgraph-cli', 'langgraph-api', 'langgraph', 'langgraph-runtime-inmem')} "
        "| {'python': platform.python_version()}))"
    )
    done = subprocess.run([str(venv / "bin" / "python"), "-c", script], capture_output=True, text=True)
    return dict(json.loads(done.stdout)) if done.returncode == 0 else {}


# Process trees and their CPU (/proc)


def process_tree(root: int) -> list[int]:
    """``root`` and every descendant of it alive now."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(text[text.rindex(")") + 2 :].split()[1])
        parents.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += parents.get(pid, [])
    return found


def tree_cpu(root: int) -> dict[int, float]:
    """User + system CPU seconds of each process of ``root``'s tree."""
    out: dict[int, float] = {}
    for pid in process_tree(root):
        with suppress(OSError, ValueError, IndexError):
            out[pid] = sum(cpu_seconds(pid))
    return out


def cpu_ms_per_run(before: dict[int, float], after: dict[int, float], runs: int) -> float:
    """The tree's CPU between two readings, per run; a process that started in
    between counts from zero (one that ended in between is lost: a server's
    processes live as long as it does)."""
    spent = sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())
    return round(spent * 1000 / runs, 3)


def started_at(pid: int) -> int | None:
    """When a process started (clock ticks since boot), None if it is gone:
    with its pid, what tells it from a later process given the same pid."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(text[text.rindex(")") + 2 :].split()[19])


def kill_tree(processes: dict[int, int | None]) -> None:
    """SIGKILL whatever of ``processes`` (pid: started_at) is still the same
    process and alive: the leftover children of a server this benchmark started."""
    for pid, started in processes.items():
        if started is not None and started_at(pid) == started:
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


# One run, on either server


RunOnce = Callable[[int], Awaitable[Sample]]


async def switchboard_run(client: httpx.AsyncClient) -> Sample:
    started = time.perf_counter()
    conversation = (await conversations_of(client, 1))[0]
    return await sse_run(client, conversation, started)


async def peer_run(client: httpx.AsyncClient) -> Sample:
    started = time.perf_counter()
    created = await client.post("/threads", json={})
    if created.status_code != 200:
        raise BenchError(f"peer POST /threads: {created.status_code} {created.text[:500]}")
    body = {
        "assistant_id": "agent",
        "input": {"messages": [{"role": "user", "content": MESSAGE}]},
        "stream_mode": ["messages-tuple"],
    }
    path = f"/threads/{created.json()['thread_id']}/runs/stream"
    async with client.stream("POST", path, json=body) as response:
        if response.status_code != 200:
            raise BenchError(f"peer POST {path}: {response.status_code} {(await response.aread())[:500]!r}")
        try:
            times = await read_sse(response.aiter_lines())
        except StreamError as error:
            raise BenchError(f"peer: {error}") from error
    tokens = sum(kind.startswith("messages") for kind in times.kinds)
    if tokens < PEER_TOKENS:
        raise BenchError(
            f"peer: {tokens} message events, not the model's {PEER_TOKENS} tokens: {times.kinds}"
        )
    return Sample((times.first - started) * 1000, (times.end - started) * 1000)


def summary(samples: list[Sample], elapsed: float, concurrency: int, cpu_ms: float) -> dict[str, Any]:
    firsts, ends = [s.first_ms for s in samples], [s.full_ms for s in samples]
    return {
        "concurrency": concurrency,
        "runs": len(samples),
        "runs_per_s": round(len(samples) / elapsed, 1),
        "elapsed_s": round(elapsed, 3),
        "first_event": {
            "p50_ms": round(percentile(firsts, 50), 3),
            "p95_ms": round(percentile(firsts, 95), 3),
        },
        "end": {"p50_ms": round(percentile(ends, 50), 3), "p95_ms": round(percentile(ends, 95), 3)},
        "server_cpu_ms_per_run": cpu_ms,
    }


async def measure_levels(
    args: argparse.Namespace, run_once: RunOnce, server: int, label: str
) -> dict[str, dict[str, Any]]:
    """Every concurrency level on one server: warm-up, then the measured runs."""
    out: dict[str, dict[str, Any]] = {}
    for concurrency in args.concurrency:
        total = max(args.runs, concurrency)
        await drive(run_once, concurrency, max(args.warmup, concurrency))
        before = tree_cpu(server)
        started = time.perf_counter()
        samples = await drive(run_once, concurrency, total)
        elapsed = time.perf_counter() - started
        cpu = cpu_ms_per_run(before, tree_cpu(server), total)
        out[f"c{concurrency}"] = summary(samples, elapsed, concurrency, cpu)
        print(f"  {label} c{concurrency}: {out[f'c{concurrency}']['runs_per_s']} runs/s", file=sys.stderr)
    return out


def client_for(url: str) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=128, max_keepalive_connections=128)
    return httpx.AsyncClient(base_url=url, limits=limits, timeout=120.0)


async def bench_switchboard(
    args: argparse.Namespace, folder: Path, backend: str = "sqlite"
) -> dict[str, dict[str, Any]]:
    async with system(args, folder / f"switchboard-{backend}", (backend, "off"), sse=False) as up:

        async def run_once(_: int) -> Sample:
            return await switchboard_run(up.client)

        return await measure_levels(args, run_once, up.pids["launcher"], "switchboard")


@asynccontextmanager
async def peer_server(langgraph: Path, jobs: int, folder: Path) -> AsyncIterator[tuple[str, int]]:
    """``langgraph dev`` on a free port with ``jobs`` per worker, serving a
    copy of the peer graph (it writes its state beside it); yields its URL and
    pid, stops it (and any process it left) after the block."""
    work = folder / f"peer-jobs-{jobs}"
    shutil.copytree(PEER_GRAPH, work, ignore=shutil.ignore_patterns("__pycache__"))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {
        "PATH": f"{langgraph.parent}{os.pathsep}{env.get('PATH', '')}",
        "PYTHONUNBUFFERED": "1",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",  # no network at all: nothing reported home
        "LANGSMITH_TRACING": "false",
        "LANGCHAIN_TRACING_V2": "false",
    }
    argv = [str(langgraph), "dev", "--no-browser", "--no-reload", "--server-log-level", "WARNING"]
    argv += ["--host", "127.0.0.1"]
    argv += ["--port", str(port), "--n-jobs-per-worker", str(jobs), "--config", "langgraph.json"]
    children: dict[int, int | None] = {}
    try:
        async with process(argv, env, work / "server.log", cwd=work) as child:
            url = f"http://127.0.0.1:{port}"
            try:
                await wait_http_ok(f"{url}/ok", work / "server.log", READY_TIMEOUT)
            except AssertionError as error:
                raise BenchError(f"the peer did not come up: {error}") from error
            children = {pid: started_at(pid) for pid in process_tree(child.pid)[1:]}
            yield url, child.pid
    finally:
        kill_tree(children)


async def bench_peer(args: argparse.Namespace, folder: Path, langgraph: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for jobs in args.jobs_per_worker:
        async with peer_server(langgraph, jobs, folder) as (url, pid), client_for(url) as client:

            async def run_once(_: int, client: httpx.AsyncClient = client) -> Sample:
                return await peer_run(client)

            out[f"jobs{jobs}"] = {
                "n_jobs_per_worker": jobs,
                **await measure_levels(args, run_once, pid, f"peer jobs={jobs}"),
            }
    return out


# The comparison


def levels(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in results.items() if k.startswith("c") and isinstance(v, dict)}


def compare(
    switchboard: dict[str, Any],
    peer: dict[str, Any],
    postgres: dict[str, Any] | None = None,
    pieces_ms: float | None = None,
) -> dict[str, Any]:
    """Per concurrency level, Switchboard against the peer's best setting at
    that level (the most runs/s): throughput Switchboard ÷ peer, latencies
    and CPU per run peer ÷ Switchboard (so above 1 is Switchboard ahead
    everywhere). Then the targets (ratio_goals)."""
    by_level: dict[str, Any] = {}
    for level, ours in levels(switchboard).items():
        theirs = [(name, setting[level]) for name, setting in peer.items() if level in setting]
        if not theirs:
            continue
        name, best = max(theirs, key=lambda item: item[1]["runs_per_s"])
        by_level[level] = {
            "peer_setting": name,
            "runs_per_s": round(ours["runs_per_s"] / best["runs_per_s"], 2),
            "first_event_p50": round(best["first_event"]["p50_ms"] / ours["first_event"]["p50_ms"], 1),
            "end_p50": round(best["end"]["p50_ms"] / ours["end"]["p50_ms"], 1),
            "end_p95": round(best["end"]["p95_ms"] / ours["end"]["p95_ms"], 1),
            "server_cpu_per_run": round(best["server_cpu_ms_per_run"] / ours["server_cpu_ms_per_run"], 1)
            if ours["server_cpu_ms_per_run"] > 0
            else None,
        }
    goals = ratio_goals(switchboard, peer, by_level, postgres or {}, pieces_ms)
    return {"by_level": by_level, "goals": goals}


def _goal(goal: str, ours: str, theirs: str, factor: float, met: bool) -> dict[str, Any]:
    return {"goal": goal, "switchboard": ours, "peer": theirs, "factor": round(factor, 2), "met": met}


def ratio_goals(
    switchboard: dict[str, Any],
    peer: dict[str, Any],
    by_level: dict[str, Any],
    postgres: dict[str, Any],
    pieces_ms: float | None,
) -> list[dict[str, Any]]:
    """Each target with both sides and the factor (ours ÷ theirs for costs,
    theirs ÷ ours for latency, ours ÷ theirs for throughput)."""
    goals = []
    for level in GOAL_LEVELS:
        if level not in by_level or level not in switchboard:
            continue
        ours = switchboard[level]
        best = peer[by_level[level]["peer_setting"]][level]
        cpu = ours["server_cpu_ms_per_run"] / best["server_cpu_ms_per_run"]
        goals.append(
            _goal(
                f"server CPU per run at {level}: ≤ {CPU_GOAL:g}× the peer's",
                f"{ours['server_cpu_ms_per_run']:.2f} ms",
                f"{best['server_cpu_ms_per_run']:.2f} ms ({by_level[level]['peer_setting']})",
                cpu,
                cpu <= CPU_GOAL,
            )
        )
        theirs = max((s[level] for s in peer.values() if level in s), key=lambda r: r["runs_per_s"])
        speed = ours["runs_per_s"] / theirs["runs_per_s"]
        goals.append(
            _goal(
                f"runs/s at {level}: ≥ {THROUGHPUT_GOAL:g}× the peer's best setting",
                f"{ours['runs_per_s']:.1f}",
                f"{theirs['runs_per_s']:.1f}",
                speed,
                speed >= THROUGHPUT_GOAL,
            )
        )
    peer_c1 = [(name, s["c1"]) for name, s in peer.items() if "c1" in s]
    if "c1" in switchboard and peer_c1:
        name, their_c1 = min(peer_c1, key=lambda item: item[1]["end"]["p50_ms"])
        ours_c1 = switchboard["c1"]["end"]["p50_ms"]
        factor = their_c1["end"]["p50_ms"] / ours_c1
        goals.append(
            _goal(
                f"c1 end p50: ≤ 1/{LATENCY_GOAL:g} of the peer's",
                f"{ours_c1:.2f} ms",
                f"{their_c1['end']['p50_ms']:.2f} ms ({name})",
                factor,
                factor >= LATENCY_GOAL,
            )
        )
    if pieces_ms and "c8" in switchboard:
        factor = switchboard["c8"]["server_cpu_ms_per_run"] / pieces_ms
        goals.append(
            _goal(
                f"fixed pieces at c8: server CPU per run ≤ {PIECES_GOAL:g}× what hops prices them",
                f"{switchboard['c8']['server_cpu_ms_per_run']:.2f} ms",
                f"{pieces_ms:.2f} ms (hops)",
                factor,
                factor <= PIECES_GOAL,
            )
        )
    for level in GOAL_LEVELS:
        if level in postgres and level in switchboard:
            factor = postgres[level]["server_cpu_ms_per_run"] / switchboard[level]["server_cpu_ms_per_run"]
            goals.append(
                _goal(
                    f"PostgreSQL CPU per run at {level}: ≤ {POSTGRES_GOAL:g}× SQLite's",
                    f"{postgres[level]['server_cpu_ms_per_run']:.2f} ms",
                    f"{switchboard[level]['server_cpu_ms_per_run']:.2f} ms (Switchboard, SQLite)",
                    factor,
                    factor <= POSTGRES_GOAL,
                )
            )
    return goals


def markdown(report: dict[str, Any]) -> str:
    """The side-by-side table, the ratios and the goals, from the "peer" key."""
    lines = [
        "| Server | Setting | Concurrency | Runs | First event p50 (ms) | First event p95 (ms) "
        "| End p50 (ms) | End p95 (ms) | Runs/s | Server CPU ms/run |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = [("Switchboard", "SQLite, offline model", report["switchboard"])]
    if report.get("switchboard_postgres"):
        rows.append(("Switchboard", "PostgreSQL, offline model", report["switchboard_postgres"]))
    rows += [
        ("LangGraph dev", f"--n-jobs-per-worker {s['n_jobs_per_worker']}", s) for s in report["peer"].values()
    ]
    for server, setting, results in rows:
        for r in levels(results).values():
            lines.append(
                f"| {server} | {setting} | {r['concurrency']} | {r['runs']} "
                f"| {r['first_event']['p50_ms']:.2f} | {r['first_event']['p95_ms']:.2f} "
                f"| {r['end']['p50_ms']:.2f} | {r['end']['p95_ms']:.2f} "
                f"| {r['runs_per_s']:.1f} | {r['server_cpu_ms_per_run']:.2f} |"
            )
    comparison = report.get("comparison") or compare(
        report["switchboard"], report["peer"], report.get("switchboard_postgres"), report.get("hops_total_ms")
    )
    lines += [
        "",
        "| Concurrency | Peer's best setting | Runs/s (Switchboard ÷ peer) "
        "| First event p50 (peer ÷ Switchboard) | End p50 (peer ÷ Switchboard) "
        "| End p95 (peer ÷ Switchboard) | Server CPU/run (peer ÷ Switchboard) |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for level, r in comparison["by_level"].items():
        cpu = "" if r["server_cpu_per_run"] is None else f"{r['server_cpu_per_run']}×"
        lines.append(
            f"| {level.removeprefix('c')} | {r['peer_setting']} | {r['runs_per_s']}× "
            f"| {r['first_event_p50']}× | {r['end_p50']}× | {r['end_p95']}× | {cpu} |"
        )
    lines += ["", "| Target | Switchboard | Against | Factor | Met |", "|---|---|---|---:|---|"]
    for g in comparison["goals"]:
        met = "yes" if g["met"] else "no"
        lines.append(f"| {g['goal']} | {g['switchboard']} | {g['peer']} | {g['factor']}× | {met} |")
    return "\n".join(lines)


# Command line


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scripts/bench.sh peer", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="measured runs per level (default 200)")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured runs before each level")
    parser.add_argument("--concurrency", default="1,8,32", help="levels, comma-separated (default 1,8,32)")
    parser.add_argument(
        "--jobs-per-worker",
        default="1,10,32",
        help="the peer's --n-jobs-per-worker settings (default 1,10,32)",
    )
    parser.add_argument(
        "--embedder",
        default="use-multilingual-v3",
        choices=("use-multilingual-v3", "hashing"),
        help="Switchboard's router and memory embedder (default: the run benchmark's)",
    )
    parser.add_argument(
        "--backends", default="sqlite,postgres", help="Switchboard's databases (default sqlite,postgres)"
    )
    parser.add_argument(
        "--hops-calls",
        type=int,
        default=2000,
        help="calls per piece of scripts/bench.sh hops, priced after the runs (0: not priced)",
    )
    parser.add_argument("--smoke", action="store_true", help="8 runs per level, 2 warm-up, hashing embedder")
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="where benchmarks.json goes")
    parser.add_argument(
        "--venv", type=Path, default=PEER_VENV, help="the peer's virtualenv (default .bench/)"
    )
    parser.add_argument(
        "--write-docs",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="write the tables into docs/benchmarks.md (default: when --out is docs/)",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.runs, args.warmup, args.embedder = 8, 2, "hashing"
        args.hops_calls = min(args.hops_calls, 50)
    args.backends = [b for b in args.backends.split(",") if b]
    if not args.backends or set(args.backends) - {"sqlite", "postgres"} or args.backends[0] != "sqlite":
        parser.error("--backends: sqlite first, then optionally postgres")
    try:
        args.concurrency = [int(c) for c in args.concurrency.split(",") if c]
        args.jobs_per_worker = [int(j) for j in args.jobs_per_worker.split(",") if j]
    except ValueError:
        parser.error("--concurrency and --jobs-per-worker take comma-separated whole numbers")
    if args.runs < 1 or args.warmup < 0 or not args.concurrency or min(args.concurrency) < 1:
        parser.error("--runs must be >= 1, --warmup >= 0, concurrency levels >= 1")
    if not args.jobs_per_worker or min(args.jobs_per_worker) < 1:
        parser.error("--jobs-per-worker settings must be >= 1")
    args.launcher_env = {}  # what tests.bench.bench_runs.system() reads
    return args


async def bench(args: argparse.Namespace, command: str) -> dict[str, Any]:
    langgraph = await asyncio.to_thread(peer_venv, args.venv)
    report: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": command,
        "commit": git_commit(),
        "machine": machine(),
        "settings": {
            "runs": args.runs,
            "warmup": args.warmup,
            "concurrency": args.concurrency,
            "jobs_per_worker": args.jobs_per_worker,
            "message": MESSAGE,
            "switchboard": f"launcher, SQLite files, offline model, tracing off, embedder {args.embedder}",
            "peer": f"langgraph dev (in-memory), one-node graph, fake model streaming {PEER_TOKENS} tokens",
            "peer_pins": list(PEER_PINS),
            "peer_versions": peer_version(args.venv),
            "smoke": args.smoke,
        },
    }
    folder = Path(tempfile.mkdtemp(prefix="switchboard-bench-peer-", dir="/tmp"))
    try:
        report["switchboard"] = await bench_switchboard(args, folder)
        if "postgres" in args.backends:
            report["switchboard_postgres"] = await bench_switchboard(args, folder, "postgres")
        report["peer"] = await bench_peer(args, folder, langgraph)
        if args.hops_calls:
            # The run's fixed pieces, priced back to back with the runs.
            hops = await asyncio.to_thread(bench_hops.main, ["--calls", str(args.hops_calls)])
            report["hops_total_ms"] = hops["run_total_ms"]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    report["machine"]["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    report["comparison"] = compare(
        report["switchboard"], report["peer"], report.get("switchboard_postgres"), report.get("hops_total_ms")
    )
    return report


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    command = os.environ.get("SWITCHBOARD_BENCH_COMMAND") or shlex.join(
        ["python", "-m", "tests.bench.bench_peer", *argv]
    )
    report = asyncio.run(bench(args, command))
    args.out.mkdir(parents=True, exist_ok=True)
    bench_all.merge_key(args.out, "peer", report)
    load = report["machine"]["load_avg_at_start"][0], report["machine"]["load_avg_at_end"][0]
    print(f"\n{report['date']}  commit {report['commit']}  load average {load[0]} → {load[1]}\n{command}\n")
    print(markdown(report))
    print(f"\nWrote {args.out / 'benchmarks.json'}")
    write = args.write_docs if args.write_docs is not None else args.out.resolve() == bench_all.DOCS.resolve()
    if write:
        bench_all.write_docs(bench_all.render(json.loads((args.out / "benchmarks.json").read_text())))
        print(f"Wrote the results section of {bench_all.DOCS / 'benchmarks.md'}")


if __name__ == "__main__":
    try:
        main()
    except BenchError as error:
        sys.exit(f"bench peer: {error}")
