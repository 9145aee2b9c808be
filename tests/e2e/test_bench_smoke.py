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


def _postgres_reachable() -> bool:
    import asyncio

    import asyncpg

    from tests.databases import ADMIN_URL

    async def probe() -> None:
        connection = await asyncpg.connect(ADMIN_URL, timeout=5)
        await connection.close()

    try:
        asyncio.run(probe())
    except (OSError, asyncpg.PostgresError):
        return False
    return True


@pytest.mark.timeout(300)
def test_threads_bench_smoke_writes_every_number(tmp_path: Path) -> None:
    """`scripts/bench.sh threads --smoke`: the real threads service on each
    backend (PostgreSQL when reachable, or required as in CI), its numbers
    merged as the "threads" key beside the keys already in benchmarks.json."""
    from tests.databases import REQUIRE_POSTGRES

    backends = ["sqlite"]
    if REQUIRE_POSTGRES or _postgres_reachable():
        backends.append("postgres")
    out = tmp_path / "out"
    out.mkdir()
    (out / "benchmarks.json").write_text(json.dumps({"scenarios": {"kept": True}}))
    done = subprocess.run(
        [sys.executable, "-m", "tests.bench.bench_threads", "--smoke", "--backends", ",".join(backends)]
        + ["--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    merged = json.loads((out / "benchmarks.json").read_text())
    assert merged["scenarios"] == {"kept": True}
    report = merged["threads"]

    assert report["command"] and report["date"] and report["commit"]
    assert report["machine"]["cpu"] and report["machine"]["cores"] > 0
    assert report["settings"]["smoke"] is True and report["settings"]["entries"] == 2000
    assert list(report["backends"]) == backends
    for backend, result in report["backends"].items():
        appends = result["appends"]
        assert {"one_c1", "one_c8", "one_c8_8threads", "batch10_c1", "batch10_c8", "big_c1"} <= set(appends)
        for scenario in appends.values():
            assert scenario["calls_per_s"] > 0
            assert scenario["entries_per_s"] == pytest.approx(
                scenario["calls_per_s"] * scenario["entries_per_call"], rel=0.01
            )
            assert 0 < scenario["latency"]["p50_ms"] <= scenario["latency"]["p99_ms"]
        assert result["seed"]["entries"] == 2000 and result["seed"]["elapsed_s"] >= 0
        assert set(result["reads"]) >= {"first", "middle", "previous", "last", "pair", "correlation"}
        for read in result["reads"].values():
            assert read["reads"] == report["settings"]["reads"]
            assert 0 < read["p50_ms"] <= read["p99_ms"]
        assert {t["key"] for t in result["targets"]} == {"appends_per_s", "page_p50_ms"}
        assert all(t["measured"] is not None and t["met"] is not None for t in result["targets"])
        assert f"### {backend}" in done.stdout
    assert "| first page (ascending, no token) |" in done.stdout
