"""Where a run's CPU goes: py-spy samples the five processes while the run
benchmark drives chat runs at concurrency 8 (SQLite, tracing off), and the
samples become one self-time table by library and one by Switchboard's own
functions, each share being of the whole run's server CPU (a process's
share of its own samples, times its share of the run's CPU). Anything above
3 % of a run is worth a look. Merges a "profile" key into benchmarks.json.

    scripts/bench.sh profile [--runs 400] [--concurrency 8] [--smoke] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from tests.bench import bench_all, bench_runs

SERVICES = ("gateway", "engine", "threads", "memory", "router")
TOP = 15
WORTH_A_LOOK = 3.0  # percent of a run


def own_function(frame: str) -> bool:
    """A frame of Switchboard's code (after bench_runs.short)."""
    return " (services/" in frame or " (gateway/" in frame


def waiting(frame: str) -> bool:
    """Blocked, not working: the event loop's waits, or a thread's poll."""
    return bench_runs.is_waiting(frame) or "(selectors.py:" in frame


def shares(folder: Path, label: str, cpu: dict[str, float]) -> dict[str, Any]:
    """Self time per library and per own function, as % of the run's server CPU."""
    total = sum(cpu.get(name, 0.0) for name in SERVICES)
    libraries: Counter[str] = Counter()
    functions: Counter[str] = Counter()
    for name in SERVICES:
        path = folder / f"{label}-{name}.txt"
        if not path.exists() or not total:
            continue
        stacks = [(frames, count) for frames, count in bench_runs.read_stacks(path) if frames]
        busy = [(frames, count) for frames, count in stacks if not waiting(frames[-1])]
        samples = sum(count for _, count in busy)
        if not samples:
            continue
        weight = 100.0 * cpu.get(name, 0.0) / total / samples
        for frames, count in busy:
            leaf = bench_runs.short(frames[-1])
            own_thread = frames[0].startswith("Thread._bootstrap")  # not the event loop's
            kind = bench_runs.thread_category(leaf) if own_thread else bench_runs.category(leaf)
            libraries[kind] += count * weight
            # Own time: samples whose innermost frame is ours.
            if own_function(leaf):
                functions[f"{name}: {leaf}"] += count * weight
    return {
        "by_library": {k: round(v, 1) for k, v in libraries.most_common()},
        "by_function": {k: round(v, 1) for k, v in functions.most_common(TOP)},
    }


def markdown(report: dict[str, Any]) -> str:
    cpu = report["cpu_ms_per_run"]
    lines = [
        "| Process | " + " | ".join(SERVICES) + " | total |",
        "|---|" + "---:|" * (len(SERVICES) + 1),
        "| CPU ms per run | "
        + " | ".join(f"{cpu.get(n, 0.0):.2f}" for n in SERVICES)
        + f" | {cpu['total']:.2f} |",
        "",
        "| Library (self time) | % of a run |",
        "|---|---:|",
    ]
    lines += [f"| {name} | {share} |" for name, share in report["by_library"].items()]
    lines += ["", "| Switchboard function (self time) | % of a run |", "|---|---:|"]
    lines += [f"| `{name}` | {share} |" for name, share in report["by_function"].items()]
    above = [name for name, share in report["by_function"].items() if share > WORTH_A_LOOK]
    lines += [
        "",
        f"Own functions above {WORTH_A_LOOK:g} % of a run: {', '.join(above) if above else 'none'}.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="scripts/bench.sh profile", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--smoke", action="store_true", help="40 runs, hashing embedder")
    parser.add_argument("--out", type=Path, default=bench_all.DOCS, help="where benchmarks.json goes")
    args = parser.parse_args(argv)
    command = os.environ.get("SWITCHBOARD_BENCH_COMMAND") or shlex.join(
        ["python", "-m", "tests.bench.bench_profile", *argv]
    )
    runs = 40 if args.smoke else args.runs
    label = f"distributed_c{args.concurrency}"
    with tempfile.TemporaryDirectory(prefix="switchboard-profile-") as scratch:
        folder, out = Path(scratch) / "stacks", Path(scratch) / "out"
        bench_runs.main(
            [
                *(["--embedder", "hashing"] if args.smoke else []),
                *("--runs", str(runs), "--warmup", "20", "--concurrency", str(args.concurrency)),
                *("--backends", "sqlite", "--tracing", "off", "--paths", "distributed", "--sse-clients", "0"),
                *("--profile", str(folder), "--out", str(out)),
            ]
        )
        run_report = json.loads((out / "benchmarks.json").read_text())
        cpu = run_report["scenarios"][label]["cpu_ms_per_run"]
        report = {
            "date": run_report["date"],
            "commit": run_report.get("commit"),
            "machine": run_report.get("machine"),
            "command": command,
            "settings": {"runs": runs, "concurrency": args.concurrency, "smoke": args.smoke},
            "cpu_ms_per_run": cpu,
            **shares(folder, label, cpu),
        }
    args.out.mkdir(parents=True, exist_ok=True)
    bench_all.merge_key(args.out, "profile", report)
    print(markdown(report))
    if args.out.resolve() == bench_all.DOCS.resolve():
        bench_all.write_docs(bench_all.render(json.loads((args.out / "benchmarks.json").read_text())))


if __name__ == "__main__":
    main()
