"""The benchmark command works end to end: `--smoke` starts the real system,
measures both paths at both concurrency levels and writes its JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ("distributed_c1", "distributed_c8", "floor_c1", "floor_c8")
RATIOS = ("first_event_p50_c1", "full_run_p50_c1", "first_event_p50_c8", "full_run_p50_c8")


@pytest.mark.timeout(600)
def test_bench_smoke_writes_every_number(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "tests.bench.bench_runs", "--smoke", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    report = json.loads((out / "benchmarks.json").read_text())

    assert report["command"] and report["date"] and report["commit"]
    machine = report["machine"]
    assert machine["cpu"] and machine["python"] and machine["cores"] > 0
    assert report["settings"]["smoke"] is True
    for name in SCENARIOS:
        scenario = report["scenarios"][name]
        assert scenario["concurrency"] == int(name.rsplit("_c", 1)[1])
        assert scenario["runs"] == report["settings"]["runs"] > 0
        assert scenario["runs_per_s"] > 0
        for metric in ("first_event", "full_run"):
            assert 0 < scenario[metric]["p50_ms"] <= scenario[metric]["p99_ms"]
        assert scenario["first_event"]["p50_ms"] <= scenario["full_run"]["p50_ms"]
        assert scenario["cpu_ms_per_run"]["total"] > 0
    for name in RATIOS:
        assert report["ratios"][name] > 0
    assert {t["key"] for t in report["targets"]} >= {"first_event_p50_ms", "runs_per_s_c8"}
    assert all(t["measured"] is not None and t["met"] is not None for t in report["targets"])
    # The markdown table went to stdout.
    assert "| distributed | 8 |" in done.stdout and "| floor | 1 |" in done.stdout
