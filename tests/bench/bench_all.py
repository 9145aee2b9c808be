"""The whole benchmark suite in one command, and its report.

    scripts/bench.sh all                  # every benchmark, full size; docs/benchmarks.json and .md
    scripts/bench.sh all --smoke --out /tmp/b   # every benchmark, a few iterations each
    scripts/bench.sh report               # the markdown of docs/benchmarks.json, printed
    scripts/bench.sh report --write-docs  # ... and written into docs/benchmarks.md

``all`` runs, one after the other, each in a process of its own:

1. runs: tests/bench/bench_runs.py, the run path through the real processes
   and the in-process floor, SQLite and PostgreSQL, tracing off and on, at
   concurrency 1, 8 and 32, and the SSE fan-out (1,000 idle clients);
2. threads: tests/bench/bench_threads.py, appends/s and page reads on a
   1,000,000-entry thread, SQLite and PostgreSQL;
3. router: tests/bench/bench_router.py, Skill Router decisions over 1,000
   skills (hashing in process, MiniLM through the RPC);
4. memory: tests/bench/bench_memory.py, recall over 10,000 notes (MiniLM and
   hashing);
5. growth: tests/bench/bench_growth.py, CPU per run with little and with a
   lot of data around it (a long conversation, 100,000 notes, 10,000 skills,
   a 200,000-entry agent thread), against ratio targets.

Each writes its keys of ``<out>/benchmarks.json`` (runs: the top-level ones;
the others: ``threads``, ``router``, ``memory``, ``growth``) and keeps the others'. Then
the markdown of the whole file is printed; when ``<out>`` is docs/, it also
replaces the generated section of docs/benchmarks.md (between the
``<!-- results:begin -->`` and ``<!-- results:end -->`` markers)."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
STEPS = ("runs", "threads", "router", "memory", "growth")


class SuiteError(RuntimeError):
    pass


# Rendering: benchmarks.json -> markdown


def _header(part: dict[str, Any], what: str) -> list[str]:
    """Where a part's numbers come from: date, commit, machine, command."""
    lines = [f"{what}: measured {part.get('date', '(no date)')} at commit `{part.get('commit', '?')}`"]
    machine = part.get("machine")
    if machine:
        load = machine.get("load_avg_at_start", ["?"])[0]
        lines[0] += (
            f", {machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, "
            f"Python {machine.get('python', '?')}, load average {load} at the start"
        )
    elif "cpu_count" in part:
        lines[0] += f", {part['cpu_count']} cores"
    lines[0] += "."
    if part.get("command"):
        lines.append(f"Command: `{part['command']}`.")
    if (part.get("settings") or {}).get("smoke") or part.get("smoke"):
        lines.append("**A smoke run: its numbers are not measurements.**")
    return [" ".join(lines), ""]


def router_markdown(report: dict[str, Any]) -> str:
    lines = [
        f"{report['skills']:,} skills, {report['decisions']:,} decisions each.",
        "",
        "| Measure | p50 ms | p99 ms | Mean ms | Target p50 | Met |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in report["results"]:
        lines.append(
            f"| {r['measure']} | {r['p50_ms']:.3f} | {r['p99_ms']:.3f} | {r['mean_ms']:.3f} "
            f"| ≤ {r['target_p50_ms']:g} | {'yes' if r['met'] else 'no'} |"
        )
    return "\n".join(lines)


def memory_markdown(report: dict[str, Any]) -> str:
    lines = [
        "| Embedder | Notes | Queries | p50 ms | p99 ms | Target p50 | First recall ms | Met |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in report["results"]:
        met = "yes" if r["rpc"]["p50_ms"] <= r["target_p50_ms"] else "no"
        lines.append(
            f"| {r['embedder']} | {r['notes']:,} | {r['queries']} | {r['rpc']['p50_ms']:.3f} "
            f"| {r['rpc']['p99_ms']:.3f} | ≤ {r['target_p50_ms']:g} | {r['first_recall_ms']:.1f} | {met} |"
        )
    return "\n".join(lines)


def render(report: dict[str, Any]) -> str:
    """The markdown of a whole benchmarks.json: one section per benchmark
    present, each saying where its numbers come from."""
    from tests.bench import bench_runs, bench_threads

    out: list[str] = [
        "| Benchmark | Date (UTC) | Commit | Machine | Load average (start → end) | Command |",
        "|---|---|---|---|---|---|",
    ]
    parts = [("run path", report if "scenarios" in report else None)]
    parts += [(key, report.get(key)) for key in ("threads", "router", "memory", "peer", "growth", "profile")]
    for name, part in parts:
        if not part:
            continue
        machine = part.get("machine") or {}
        where = f"{part['cpu_count']} cores" if "cpu_count" in part else "(not recorded)"
        if machine:
            cpu, cores, python = machine.get("cpu"), machine.get("cores"), machine.get("python")
            where = f"{cpu}, {cores} cores, Python {python}"
        load = " → ".join(
            str(machine[k][0]) for k in ("load_avg_at_start", "load_avg_at_end") if machine.get(k)
        )
        smoke = " (smoke)" if (part.get("settings") or {}).get("smoke") or part.get("smoke") else ""
        date = str(part.get("date", "?")).replace("T", " ").removesuffix("+00:00")
        out.append(
            f"| {name}{smoke} | {date} | `{part.get('commit', '?')}` | {where} | {load or '(not recorded)'} "
            f"| `{part.get('command', '?')}` |"
        )
    out.append("")
    if "scenarios" in report:
        out += ["### Run path, floor, tracing, SSE fan-out (`scripts/bench.sh`)", ""]
        out += _header(report, "Run benchmark")
        out += [bench_runs.markdown(report), ""]
    if "threads" in report:
        out += ["### Threads (`scripts/bench.sh threads`)", ""]
        out += _header(report["threads"], "Threads benchmark")
        out += [bench_threads.markdown(report["threads"]).strip().replace("### ", "#### "), ""]
    if "router" in report:
        out += ["### Skill Router (`scripts/bench.sh router`)", ""]
        out += _header(report["router"], "Router benchmark")
        out += [router_markdown(report["router"]), ""]
    if "memory" in report:
        out += ["### Memory recall (`scripts/bench.sh memory`)", ""]
        out += _header(report["memory"], "Memory benchmark")
        out += [memory_markdown(report["memory"]), ""]
    if "peer" in report:
        from tests.bench import bench_peer

        out += ["### Side by side with LangGraph's server (`scripts/bench.sh peer`)", ""]
        out += _header(report["peer"], "Peer benchmark")
        out += [bench_peer.markdown(report["peer"]), ""]
    if "growth" in report:
        from tests.bench import bench_growth

        out += ["### Cost that does not grow with the work (`scripts/bench.sh growth`)", ""]
        out += _header(report["growth"], "Growth benchmark")
        out += [bench_growth.markdown(report["growth"]), ""]
    if "profile" in report:
        from tests.bench import bench_profile

        out += ["### Where a run's CPU goes (`scripts/bench.sh profile`)", ""]
        out += _header(report["profile"], "Profile")
        out += [bench_profile.markdown(report["profile"]), ""]
    return "\n".join(out).rstrip() + "\n"


def write_docs(text: str, path: Path = DOCS / "benchmarks.md") -> None:
    """Replaces what lies between the markers of ``path`` with ``text``."""
    doc = path.read_text()
    if doc.count(BEGIN) != 1 or doc.count(END) != 1 or doc.index(BEGIN) > doc.index(END):
        raise SuiteError(f"{path} needs one {BEGIN} and one {END} line, in that order")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{BEGIN}\n\n{text.strip()}\n\n{END}{tail}")


# Running the suite


def provenance(command: str) -> dict[str, Any]:
    """Date, commit, machine (load average at the start) and command of a
    benchmark about to run; ``finish`` adds the load average at the end."""
    from tests.bench.bench_runs import git_commit, machine

    date = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    return {"date": date, "commit": git_commit(), "machine": machine(), "command": command}


def finish(part: dict[str, Any]) -> dict[str, Any]:
    part["machine"]["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return part


def _run(argv: list[str]) -> float:
    """Runs one benchmark; returns its wall-clock seconds."""
    print(f"\n== {shlex.join(argv)}", file=sys.stderr, flush=True)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, check=False)
    if done.returncode != 0:
        raise SuiteError(f"{shlex.join(argv)} failed with exit code {done.returncode}")
    return time.perf_counter() - started


def merge_key(out: Path, key: str, value: dict[str, Any]) -> None:
    """Sets ``key`` of out/benchmarks.json, keeping the other benchmarks' keys."""
    path = out / "benchmarks.json"
    existing = json.loads(path.read_text()) if path.exists() else {}
    existing[key] = value
    path.write_text(json.dumps(existing, indent=2) + "\n")


def run_all(args: argparse.Namespace) -> dict[str, float]:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    smoke = ["--smoke"] if args.smoke else []
    command = os.environ.get("SWITCHBOARD_BENCH_COMMAND") or shlex.join(
        ["python", "-m", "tests.bench.bench_all", *args.argv]
    )
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="switchboard-bench-all-") as scratch:
        for step in args.steps:
            origin = provenance(command)
            if step == "runs":
                seconds[step] = _run(
                    ["tests.bench.bench_runs", *smoke, "--backends", args.backends, "--out", str(out)]
                )
            elif step == "threads":
                argv = ["tests.bench.bench_threads", *smoke, "--backends", args.backends, "--out", str(out)]
                seconds[step] = _run(argv)
            elif step == "router":
                file = Path(scratch) / "router.json"
                argv = ["tests.bench.bench_router", "--json", str(file)]
                seconds[step] = _run(argv + (["--smoke", "--embedder", "hashing"] if args.smoke else []))
                result = json.loads(file.read_text())
                merge_key(out, "router", {**result, **finish(origin), "smoke": args.smoke})
            elif step == "memory":
                seconds[step] = _run(["tests.bench.bench_memory", *smoke, "--out", scratch])
                results = json.loads((Path(scratch) / "memory_bench.json").read_text())["memory"]
                merge_key(out, "memory", {**finish(origin), "smoke": args.smoke, "results": results})
            elif step == "growth":
                seconds[step] = _run(["tests.bench.bench_growth", *smoke, "--out", str(out)])
    return seconds


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["report"]:
        report_main(argv[1:])
        return
    parser = argparse.ArgumentParser(prog="scripts/bench.sh all", description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="every benchmark's --smoke")
    parser.add_argument("--out", type=Path, default=DOCS, help="where benchmarks.json goes (default docs/)")
    parser.add_argument(
        "--steps", default=",".join(STEPS), help="runs,threads,router,memory,growth (default all)"
    )
    parser.add_argument("--backends", default="sqlite,postgres", help="of the runs and threads benchmarks")
    parser.add_argument(
        "--write-docs",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="write the tables into docs/benchmarks.md (default: when --out is docs/)",
    )
    args = parser.parse_args(argv)
    args.argv = argv
    args.steps = [s for s in args.steps.split(",") if s]
    if unknown := set(args.steps) - set(STEPS):
        parser.error(f"unknown steps: {', '.join(sorted(unknown))}")
    seconds = run_all(args)
    report = json.loads((args.out / "benchmarks.json").read_text())
    text = render(report)
    print("\n" + text)
    timing = ", ".join(f"{step} {s:.0f} s" for step, s in seconds.items())
    print(f"Took {timing}. Wrote {args.out / 'benchmarks.json'}.")
    write = args.write_docs if args.write_docs is not None else args.out.resolve() == DOCS.resolve()
    if write:
        write_docs(text)
        print(f"Wrote the results section of {DOCS / 'benchmarks.md'}.")


def report_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="scripts/bench.sh report", description="The markdown tables of a benchmarks.json."
    )
    parser.add_argument("--json", type=Path, default=DOCS / "benchmarks.json")
    parser.add_argument("--write-docs", action="store_true", help="also write them into docs/benchmarks.md")
    args = parser.parse_args(argv)
    text = render(json.loads(args.json.read_text()))
    print(text)
    if args.write_docs:
        write_docs(text)


if __name__ == "__main__":
    try:
        main()
    except SuiteError as error:
        sys.exit(f"bench: {error}")
