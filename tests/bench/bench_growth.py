"""The growth benchmark: what a run costs does not grow with the data around
it. CPU per run of every server process (gateway, engine, threads, memory,
router, from /proc) with little data around the run and with a lot, on one
launched system (SQLite files, the offline model, the hashing embedder).

    scripts/bench.sh growth                        # 100 runs per side; docs/benchmarks.json
    scripts/bench.sh growth --smoke --out /tmp/b   # smaller data, 10 runs per side
    scripts/bench.sh growth --cases notes --profile /tmp/prof   # py-spy every process

The cases (small against big, the target a ratio of CPU per run, big / small):

- chat: a message at turn 1 of a conversation (a fresh conversation per run)
  against turns 500, 501... of one conversation whose earlier turns were
  written into the threads database (≤ 1.2×);
- notes: a message in a project of 10 notes against one of 100,000, each run
  in a fresh conversation (≤ 1.3×);
- skills: a message routed over the default catalog (23 skills) against a
  catalog of 10,000, each run in a fresh conversation (≤ 1.3×);
- ask: AskAgent on an agent whose thread is empty against one whose thread
  holds 200,000 entries (≤ 1.2×);
- page: the agent view's first page as the web page reads it (500 entries,
  newest first) on a thread of one page against the 200,000-entry thread
  (≤ 1.2×). An empty thread's page reads nothing, so the small thread holds
  the page it returns: what differs is only what lies beyond it.

Data is written straight into the services' SQLite files while they run
(sqlite3 / SQLAlchemy Core executemany, then the revision the services check
bumped, as a write through the RPC would): note vectors are the hashing
embedder's, skill vectors too (stored as the router stores them, so no
reindex). Each pair is measured back to back on the same system, in blocks
small, big, big, small (half the runs each), so that a drift of the machine
does not read as growth; the catalog is one per system, so skills go small,
big, small with the 10,000 skills added and removed in between. Each side is
warmed up first, unmeasured, and the servers left to settle (idle), so that
a one-time cost (building the recall index of 100,000 notes takes seconds)
is not counted as the runs'."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import secrets
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from services.shared.identity import user_metadata
from switchboard.threads.v1 import threads_service_pb2, threads_service_pb2_grpc
from tests.bench.bench_all import finish, merge_key, provenance
from tests.bench.bench_memory import QUERIES
from tests.bench.bench_runs import (
    EMBEDDERS,
    MESSAGE,
    BenchError,
    CpuMeter,
    System,
    conversations_of,
    cpu_seconds,
    percentile,
    profiled,
    sse_post,
    system,
)
from tests.bench.bench_threads import seed_sqlite
from tests.bench.growth_seed import USER, catalog_size, seed_notes, seed_skills, seed_turns, unseed_skills

ROOT = Path(__file__).resolve().parents[2]
CASES = ("chat", "notes", "skills", "ask", "page")
# (label, target ratio big / small)
TARGETS = {
    "chat": ("Chat run, turn 1 → turn {big:,}", 1.2),
    "notes": ("Chat run, project of {small:,} → {big:,} notes", 1.3),
    "skills": ("Chat run, catalog of {small:,} → {big:,} skills", 1.3),
    "ask": ("AskAgent, thread of {small:,} → {big:,} entries", 1.2),
    "page": ("Agent view page of 500, thread of {small:,} → {big:,} entries", 1.2),
}
WEB_PAGE = 500  # the web page's first read of an agent's thread (gateway/static/js/agents.js)
NOTES_MESSAGE = QUERIES[0]  # a question the notes answer, so recall has work to do
SKILLS_MESSAGE = "Please draft the budget forecast for the board."  # words of the generated skills


@dataclass
class Side:
    """One side of a pair: a call that does one run (or read) of it."""

    label: str
    size: int
    call: Callable[[], Awaitable[None]]
    runs: int = 0
    cpu_ms: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    wall_ms: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        per_run = {name: round(ms / self.runs, 3) for name, ms in self.cpu_ms.items()}
        return {
            "label": self.label,
            "size": self.size,
            "runs": self.runs,
            "cpu_ms_per_run": round(sum(per_run.values()), 3),
            "cpu_ms_per_run_by_process": per_run,
            "wall_p50_ms": round(percentile(self.wall_ms, 50), 3),
        }


# Measuring


async def block(
    args: argparse.Namespace, up: System, side: Side, runs: int, label: str, profiles: Any
) -> None:
    """``runs`` calls back to back, their servers' CPU added to the side's."""
    meter = CpuMeter(up.services)
    meter.start()
    with profiled(args.profile, label, up.services, profiles):
        for _ in range(runs):
            started = time.perf_counter()
            await side.call()
            side.wall_ms.append((time.perf_counter() - started) * 1000)
    per_run = meter.per_run(runs)["cpu_ms_per_run"]
    for name in up.services:
        side.cpu_ms[name] += per_run[name] * runs
    side.runs += runs


async def warm(args: argparse.Namespace, side: Side) -> None:
    for _ in range(args.warmup):
        await side.call()


QUIET_CPU_S = 0.025  # of all servers over QUIET_WINDOW_S: 5% of a core
QUIET_WINDOW_S = 0.5
SETTLE_TIMEOUT_S = 180.0


async def settle(up: System) -> None:
    """Waits until the servers are idle, so that a one-time cost a warm-up
    started and left running (the recall index of 100,000 notes takes
    seconds to build, longer than the engine waits for it) is not counted
    as the measured runs'."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S

    def used() -> float:
        return sum(sum(cpu_seconds(pid)) for pid in up.services.values())

    while time.monotonic() < deadline:
        before = used()
        await asyncio.sleep(QUIET_WINDOW_S)
        if used() - before < QUIET_CPU_S:
            return
    raise BenchError(f"the servers were still busy {SETTLE_TIMEOUT_S:.0f} s after the warm-up")


def result(key: str, small: Side, big: Side) -> dict[str, Any]:
    label, target = TARGETS[key]
    s, b = small.summary(), big.summary()
    ratio = round(b["cpu_ms_per_run"] / s["cpu_ms_per_run"], 3) if s["cpu_ms_per_run"] else None
    print(f"  {key}: {s['cpu_ms_per_run']:.2f} → {b['cpu_ms_per_run']:.2f} ms", file=sys.stderr, flush=True)
    return {
        "label": label.format(small=small.size, big=big.size),
        "small": s,
        "big": b,
        "ratio": ratio,
        "target": target,
        "met": None if ratio is None else ratio <= target,
    }


async def paired(
    args: argparse.Namespace, up: System, key: str, small: Side, big: Side, profiles: Any
) -> dict[str, Any]:
    """Small, big, big, small: half the runs per block."""
    await warm(args, small)
    await warm(args, big)
    await settle(up)
    first, second = args.runs // 2, args.runs - args.runs // 2
    for i, (side, runs) in enumerate(((small, first), (big, first), (big, second), (small, second))):
        if runs:
            await block(args, up, side, runs, f"{key}_{i}_{'big' if side is big else 'small'}", profiles)
    return result(key, small, big)


# The cases


def data(up: System) -> Path:
    """Where the launched system keeps its SQLite files."""
    return up.folder / "data"


def chat_side(up: System, label: str, size: int, conversations: list[str], body: dict[str, Any]) -> Side:
    """Runs each in the next of ``conversations`` (one alone: every run goes on in it)."""
    turn = iter(conversations) if len(conversations) > 1 else itertools.repeat(conversations[0])

    async def call() -> None:
        await sse_post(up.client, f"/api/agent/conversations/{next(turn)}/messages", body)

    return Side(label, size, call)


async def fresh(args: argparse.Namespace, up: System, sides: int = 1) -> list[list[str]]:
    """A fresh conversation for every run of each side (warm-up included,
    and one spare: the skills case's unmeasured run)."""
    each = args.runs + args.warmup + 1
    made = await conversations_of(up.client, sides * each)
    return [made[i * each : (i + 1) * each] for i in range(sides)]


async def case_chat(args: argparse.Namespace, up: System, profiles: Any) -> dict[str, Any]:
    (firsts,) = await fresh(args, up)
    [long] = await conversations_of(up.client, 1)
    # The warm-up turns come before the measured ones: the first measured is turn --turns.
    earlier = max(0, args.turns - 1 - args.warmup)
    await asyncio.to_thread(seed_turns, data(up), long, earlier)
    body = {"message": MESSAGE}
    small = chat_side(up, "turn 1", 1, firsts, body)
    big = chat_side(up, f"turn {args.turns}+", args.turns, [long], body)
    return await paired(args, up, "chat", small, big, profiles)


async def project(up: System, project_id: str) -> str:
    response = await up.client.post(
        "/api/agent/projects", json={"id": project_id, "display_name": project_id}
    )
    if response.status_code != 201:
        raise BenchError(f"create project: {response.status_code} {response.text}")
    return project_id


async def case_notes(args: argparse.Namespace, up: System, profiles: Any) -> dict[str, Any]:
    few, many = await project(up, "growth-few-notes"), await project(up, "growth-many-notes")
    await asyncio.to_thread(seed_notes, data(up), few, args.notes_small, args.embedder)
    print(f"  notes: seeding {args.notes:,}", file=sys.stderr, flush=True)
    await asyncio.to_thread(seed_notes, data(up), many, args.notes, args.embedder)
    small_runs, big_runs = await fresh(args, up, 2)
    small = chat_side(
        up,
        f"{args.notes_small:,} notes",
        args.notes_small,
        small_runs,
        {"message": NOTES_MESSAGE, "project_id": few},
    )
    big = chat_side(
        up, f"{args.notes:,} notes", args.notes, big_runs, {"message": NOTES_MESSAGE, "project_id": many}
    )
    return await paired(args, up, "notes", small, big, profiles)


async def case_skills(args: argparse.Namespace, up: System, profiles: Any) -> dict[str, Any]:
    """Small, big, small: the catalog is the system's, so the big one is
    added between the small blocks and removed after."""
    default = catalog_size(data(up))
    small_runs, big_runs = await fresh(args, up, 2)
    body = {"message": SKILLS_MESSAGE}
    small = chat_side(up, f"{default:,} skills", default, small_runs, body)
    big = chat_side(up, f"{args.skills:,} skills", args.skills, big_runs, body)
    first, second = args.runs // 2, args.runs - args.runs // 2
    await warm(args, small)
    await settle(up)
    await block(args, up, small, first, "skills_0_small", profiles)
    print(f"  skills: seeding {args.skills:,}", file=sys.stderr, flush=True)
    await asyncio.to_thread(seed_skills, data(up), args.skills, args.embedder)
    await warm(args, big)  # the first route rebuilds the index
    await settle(up)
    await block(args, up, big, args.runs, "skills_1_big", profiles)
    await asyncio.to_thread(unseed_skills, data(up))
    await small.call()  # the index rebuilt at the default catalog again, unmeasured
    await settle(up)
    await block(args, up, small, second, "skills_2_small", profiles)
    return result("skills", small, big)


async def agent_thread(up: System, agent_id: str, stub: threads_service_pb2_grpc.ThreadsServiceStub) -> str:
    """An agent registered through the gateway, and its live thread."""
    response = await up.client.post("/api/agent/agents", json={"id": agent_id, "display_name": agent_id})
    if response.status_code != 201:
        raise BenchError(f"create agent: {response.status_code} {response.text}")
    reply = await stub.EnsureAgentThread(
        threads_service_pb2.EnsureAgentThreadRequest(target_agent_id=agent_id),
        metadata=user_metadata(USER),
        timeout=30,
    )
    return str(reply.thread.id)


async def case_agent(args: argparse.Namespace, up: System, profiles: Any) -> dict[str, Any]:
    """AskAgent on an empty thread and on a big one; then the web page's
    first read of each agent's view."""
    port = json.loads((up.folder / "ready.json").read_text())["ports"]["threads"]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = threads_service_pb2_grpc.ThreadsServiceStub(channel)
        empty = await agent_thread(up, "growth-empty", stub)
        del empty  # asks fill it
        one_page = await agent_thread(up, "growth-one-page", stub)
        big = await agent_thread(up, "growth-big", stub)
    threads_db = data(up) / "threads.db"
    await asyncio.to_thread(seed_sqlite, threads_db, one_page, "growth-one-page", WEB_PAGE)
    print(f"  agent: seeding {args.entries:,}", file=sys.stderr, flush=True)
    await asyncio.to_thread(seed_sqlite, threads_db, big, "growth-big", args.entries)

    def ask(agent: str, label: str, size: int) -> Side:
        async def call() -> None:
            await sse_post(
                up.client, f"/api/agent/agents/{agent}/asks", {"message": MESSAGE, "requester": "user"}
            )

        return Side(label, size, call)

    def page(agent: str, label: str, size: int) -> Side:
        async def call() -> None:
            response = await up.client.get(
                f"/api/agent/agents/{agent}/entries", params={"descending": "true", "page_size": WEB_PAGE}
            )
            if response.status_code != 200 or len(response.json()["entries"]) != WEB_PAGE:
                raise BenchError(f"agent view of {agent}: {response.status_code} {response.text[:300]}")

        return Side(label, size, call)

    asks = await paired(
        args,
        up,
        "ask",
        ask("growth-empty", "empty thread", 0),
        ask("growth-big", f"{args.entries:,} entries", args.entries),
        profiles,
    )
    pages = await paired(
        args,
        up,
        "page",
        page("growth-one-page", f"{WEB_PAGE} entries", WEB_PAGE),
        page("growth-big", f"{args.entries:,} entries", args.entries),
        profiles,
    )
    return {"ask": asks, "page": pages}


# Report


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "| Case | Small | Big | CPU ms/run, small | CPU ms/run, big | Ratio | Target | Met |",
        "|---|---|---|---:|---:|---:|---:|---|",
    ]
    for c in report["cases"].values():
        met = "n/a" if c["met"] is None else ("yes" if c["met"] else "no")
        ratio = "n/a" if c["ratio"] is None else f"{c['ratio']:.2f}×"
        small, big = c["small"], c["big"]
        lines.append(
            f"| {c['label']} | {small['label']} | {big['label']} | {small['cpu_ms_per_run']:.2f} "
            f"| {big['cpu_ms_per_run']:.2f} | {ratio} | ≤ {c['target']:g}× | {met} |"
        )
    names = sorted({n for c in report["cases"].values() for n in c["small"]["cpu_ms_per_run_by_process"]})
    lines += ["", "| CPU ms/run by process, small → big | " + " | ".join(names) + " |"]
    lines += ["|---|" + "---:|" * len(names)]
    for key, c in report["cases"].items():
        small, big = c["small"]["cpu_ms_per_run_by_process"], c["big"]["cpu_ms_per_run_by_process"]
        lines.append(f"| {key} | " + " | ".join(f"{small[n]:.2f} → {big[n]:.2f}" for n in names) + " |")
    return "\n".join(lines)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scripts/bench.sh growth", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100, help="measured runs per side (default 100)")
    parser.add_argument("--warmup", type=int, default=10, help="unmeasured runs per side first")
    parser.add_argument("--cases", default=",".join(CASES), help=f"some of {','.join(CASES)} (default all)")
    parser.add_argument("--turns", type=int, default=500, help="the long conversation's turn (default 500)")
    parser.add_argument("--notes", type=int, default=100_000, help="notes of the big project")
    parser.add_argument("--notes-small", type=int, default=10, help="notes of the small project")
    parser.add_argument("--skills", type=int, default=10_000, help="skills of the big catalog")
    parser.add_argument("--entries", type=int, default=200_000, help="entries of the big agent thread")
    parser.add_argument("--embedder", choices=EMBEDDERS, default="hashing", help="of router and memory")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="a quick check: 10 runs, 2 warm-up, 50 turns, 2,000 notes, 500 skills, 5,000 entries",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="where benchmarks.json goes")
    parser.add_argument("--profile", type=Path, help="py-spy every process during the measured blocks")
    args = parser.parse_args(argv)
    if args.smoke:
        args.runs, args.warmup = 10, 2
        args.turns, args.notes, args.skills, args.entries = 50, 2_000, 500, 5_000
    args.cases = [c for c in args.cases.split(",") if c]
    if unknown := set(args.cases) - set(CASES):
        parser.error(f"unknown cases: {', '.join(sorted(unknown))}")
    if args.runs < 2 or args.warmup < 1 or args.turns < 2 or args.entries < WEB_PAGE:
        parser.error(f"--runs >= 2, --warmup >= 1, --turns >= 2, --entries >= {WEB_PAGE}")
    args.launcher_env = {}
    return args


async def bench(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    command = os.environ.get("SWITCHBOARD_BENCH_COMMAND") or shlex.join(
        ["python", "-m", "tests.bench.bench_growth", *argv]
    )
    # One key for the services and this process, so that it may call the
    # threads service itself (EnsureAgentThread) as the launcher's user.
    os.environ.setdefault("SWITCHBOARD_IDENTITY_KEY", secrets.token_urlsafe(32))
    report: dict[str, Any] = {
        **provenance(command),
        "settings": {
            "runs": args.runs,
            "warmup": args.warmup,
            "smoke": args.smoke,
            "embedder": args.embedder,
            "database": "SQLite files (WAL), one per service",
            "model": "offline",
            "turns": args.turns,
            "notes": [args.notes_small, args.notes],
            "skills": args.skills,
            "entries": args.entries,
            "blocks": "small, big, big, small (skills: small, big, small)",
        },
        "cases": {},
        "profiles": {},
    }
    folder = Path(tempfile.mkdtemp(prefix="switchboard-bench-growth-", dir="/tmp"))
    cases: dict[str, Callable[[argparse.Namespace, System, Any], Awaitable[dict[str, Any]]]] = {
        "chat": case_chat,
        "notes": case_notes,
        "skills": case_skills,
    }
    try:
        async with system(args, folder / "system", ("sqlite", "off"), sse=False) as up:
            for key in args.cases:
                if key in cases:
                    report["cases"][key] = await cases[key](args, up, report["profiles"])
            if {"ask", "page"} & set(args.cases):
                both = await case_agent(args, up, report["profiles"])
                report["cases"].update({k: v for k, v in both.items() if k in args.cases})
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    finish(report)
    if not report["profiles"]:
        del report["profiles"]
    return report


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # the system it launched is stopped
    try:
        report = asyncio.run(bench(args, argv))
    except KeyboardInterrupt:
        sys.exit("interrupted: the system it launched is stopped")
    args.out.mkdir(parents=True, exist_ok=True)
    merge_key(args.out, "growth", report)
    m = report["machine"]
    print(
        f"\n{report['date']}  commit {report['commit']}  {m['cpu']}, {m['cores']} cores, "
        f"Python {m['python']}\n{report['command']}\n"
    )
    print(markdown(report))
    print(f"\nWrote the growth key of {args.out / 'benchmarks.json'}")


if __name__ == "__main__":
    main()
