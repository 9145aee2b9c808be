"""The CPU a whole system's start costs: the launcher and its five processes,
from spawning the launcher to every process healthy, for the code of one or
more checkouts, started alternately so that a busy machine weighs on each
the same.

    .venv/bin/python -m tests.bench.bench_system_start --code /tmp/before --code . --starts 3

Each start is the second one of its data folder (the first creates the SQLite
files and migrates them, once): what a restart, or a test's launched system
on migrated templates, costs. The CPU of each process is read from /proc
when the launcher reports the system ready, so it counts start-up only.
Prints one JSON line per checkout: the median CPU seconds per process and
in all, the median seconds to ready, and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.bench.bench_runs import children, cpu_seconds
from tests.processes import ROOT, launcher_ready, start_launcher, stop_popen

READY_TIMEOUT = 120.0


def start_once(code: Path, folder: Path) -> dict[str, float]:
    """One start of ``code``'s system on ``folder``/data: CPU seconds per
    process at ready, and ``ready_s``; the system is stopped again."""
    (folder / "ready.json").unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": f"{code}:{ROOT / 'gen'}"}
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    spawned = time.perf_counter()
    launcher = start_launcher(folder, env, "--no-auth", code=code)
    try:
        launcher_ready(launcher, folder, READY_TIMEOUT)
        facts = {"ready_s": time.perf_counter() - spawned}
        for name, pid in {"launcher": launcher.pid, **children(launcher.pid)}.items():
            facts[name] = sum(cpu_seconds(pid))
        return facts
    finally:
        stop_popen(launcher)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--code", type=Path, action="append", help="a checkout (repeatable; default: this one)"
    )
    parser.add_argument("--starts", type=int, default=3, help="measured starts per checkout")
    args = parser.parse_args()
    codes = [c.resolve() for c in args.code or [ROOT]]
    with tempfile.TemporaryDirectory(prefix="sb-start-") as tmp:
        folders = {code: Path(tmp) / str(i) for i, code in enumerate(codes)}
        for code, folder in folders.items():
            folder.mkdir()
            start_once(code, folder)  # creates and migrates the files
        samples: dict[Path, list[dict[str, float]]] = {code: [] for code in codes}
        for _ in range(args.starts):
            for code in codes:
                samples[code].append(start_once(code, folders[code]))
    for code in codes:
        names = samples[code][0].keys()
        medians: dict[str, Any] = {n: round(statistics.median(s[n] for s in samples[code]), 2) for n in names}
        medians["cpu_s_all"] = round(
            statistics.median(sum(v for k, v in s.items() if k != "ready_s") for s in samples[code]), 2
        )
        print(json.dumps({"code": str(code), "starts": args.starts, **medians, "load": os.getloadavg()}))


if __name__ == "__main__":
    main()
