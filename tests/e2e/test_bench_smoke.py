"""The benchmark commands work end to end: `--smoke` starts the real system
(on each backend, tracing off and on), measures the distributed path and the
floor at every concurrency level and the SSE fan-out, and writes its JSON;
the report renders every benchmark's keys as markdown."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
LEVELS = (1, 8, 32)
SERVICES = ("gateway", "engine", "threads", "memory", "router")


def _backends() -> list[str]:
    """SQLite, and PostgreSQL when reachable (or required, as in CI)."""
    from tests.databases import REQUIRE_POSTGRES

    return ["sqlite", "postgres"] if REQUIRE_POSTGRES or _postgres_reachable() else ["sqlite"]


def _variant(backend: str, tracing: str) -> str:
    return ("_postgres" if backend == "postgres" else "") + ("_tracing" if tracing == "on" else "")


@pytest.mark.timeout(600)
def test_bench_smoke_writes_every_number(tmp_path: Path) -> None:
    """Every scenario with a few runs (~60 s on an idle 2-core machine: the
    systems start at once, and PostgreSQL is measured with tracing off
    only, so three systems rather than four)."""
    backends = _backends()
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "tests.bench.bench_runs", "--smoke", "--backends", ",".join(backends)]
        + ["--out", str(out)],
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
    settings = report["settings"]
    assert settings["smoke"] is True and settings["concurrency"] == list(LEVELS)
    configs = [tuple(c) for c in settings["configs"]]
    assert ("sqlite", "off") in configs and ("sqlite", "on") in configs
    assert set(backends) == {backend for backend, _ in configs}

    expected = [f"distributed{_variant(b, t)}_c{c}" for b, t in configs for c in LEVELS]
    expected += [f"floor{_variant(b, 'off')}_c{c}" for b in backends for c in LEVELS]
    assert sorted(report["scenarios"]) == sorted(expected)
    for name in expected:
        scenario = report["scenarios"][name]
        assert scenario["concurrency"] == int(name.rsplit("_c", 1)[1])
        assert scenario["runs"] == max(settings["runs"], scenario["concurrency"]) > 0
        assert scenario["runs_per_s"] > 0
        for metric in ("first_event", "full_run"):
            assert 0 < scenario[metric]["p50_ms"] <= scenario[metric]["p99_ms"]
        assert scenario["first_event"]["p50_ms"] <= scenario["full_run"]["p50_ms"]
        assert scenario["cpu_ms_per_run"]["total"] > 0
    for backend in backends:
        for level in LEVELS:
            for metric in ("first_event", "full_run"):
                assert report["ratios"][f"{metric}_p50{_variant(backend, 'off')}_c{level}"] > 0

    # Tracing on: every process exported spans to the local receiver, and
    # what tracing adds is computed.
    for backend, tracing in configs:
        if tracing == "on":
            traced = report["tracing"][backend]
            assert traced["spans_received"] > 0 and traced["spans_per_run"] > 0
            assert {f"switchboard-{s}" for s in SERVICES} <= set(traced["by_service"])
            for level in LEVELS:
                added = report["tracing_overhead"][f"{backend}_c{level}"]
                assert isinstance(added["full_run_p50_added_ms"], float)

    # The SSE fan-out: every idle client connected and stayed, runs went on
    # beside them, and the gateway let go of their streams after.
    sse = report["sse"]
    assert sse["clients"] == sse["connected"] == settings["sse"]["clients"] > 0
    assert sse["failed"] == 0 and sse["ended_early"] == 0
    assert sse["with"]["runs"] >= settings["runs"] and sse["without"]["runs"] >= settings["runs"]
    assert isinstance(sse["full_run_p99_rise_pct"], float)
    gateway = sse["gateway"]
    assert gateway["connected"]["sse_clients"] >= gateway["before"]["sse_clients"] + sse["clients"]
    assert gateway["connected"]["asyncio_tasks"] > gateway["before"]["asyncio_tasks"] + sse["clients"]
    assert gateway["after"]["sse_clients"] == gateway["before"]["sse_clients"]
    assert gateway["after"]["rss_mb"] > 0

    keys = {t["key"] for t in report["targets"]}
    assert {"first_event_p50_ms", "runs_per_s_c8", "tracing_adds_p50_ms", "sse_full_run_p99_rise_pct"} <= keys
    # Every target has its number, but what tracing adds on PostgreSQL when
    # the smoke run left PostgreSQL with tracing on out.
    unmeasured = set() if ("postgres", "on") in configs else {"postgres_tracing_adds_p50_ms"}
    for target in report["targets"]:
        if target["key"] not in unmeasured:
            assert target["measured"] is not None and target["met"] is not None, target
    # The markdown tables went to stdout.
    for row in (
        "| distributed | sqlite | off | 8 |",
        "| floor | sqlite | off | 1 |",
        "| distributed | sqlite | on | 32 |",
    ):
        assert row in done.stdout
    assert "Tracing on adds" in done.stdout and "SSE fan-out" in done.stdout

    # The report renders it, with the other benchmarks' keys kept beside it.
    from tests.bench.bench_all import render

    text = render({**report, "memory": {"results": [], "commit": "x"}})
    assert "### Run path" in text and "### Memory recall" in text and report["commit"] in text


def test_report_renders_the_committed_results() -> None:
    """`scripts/bench.sh report`: the tables of docs/benchmarks.json (older
    runs without PostgreSQL, tracing or SSE too), and the section of
    docs/benchmarks.md that `--write-docs` replaces is there."""
    from tests.bench.bench_all import BEGIN, END, render

    report = json.loads((ROOT / "docs" / "benchmarks.json").read_text())
    text = render(report)
    for key, title in (
        ("scenarios", "### Run path"),
        ("threads", "### Threads"),
        ("router", "### Skill Router"),
        ("peer", "### Side by side with LangGraph's server"),
        ("growth", "### Cost that does not grow with the work"),
    ):
        if key in report:
            assert title in text
    assert "| Target | Limit | Measured | Met |" in text
    doc = (ROOT / "docs" / "benchmarks.md").read_text()
    assert doc.count(BEGIN) == 1 and doc.count(END) == 1 and doc.index(BEGIN) < doc.index(END)


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


def _merged_beside_others(
    argv: list[str], out: Path, key: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """Runs a benchmark that merges ``key`` into out/benchmarks.json, which
    already holds another benchmark's keys; checks those are kept and
    returns the run and its key."""
    out.mkdir()
    (out / "benchmarks.json").write_text(json.dumps({"scenarios": {"kept": True}}))
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    merged = json.loads((out / "benchmarks.json").read_text())
    assert merged["scenarios"] == {"kept": True}
    report: dict[str, Any] = merged[key]
    return done, report


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
    argv = [sys.executable, "-m", "tests.bench.bench_threads", "--smoke", "--backends", ",".join(backends)]
    done, report = _merged_beside_others(argv + ["--out", str(out)], out, "threads")

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
        assert set(result["chat"]) == {"c1", "c8"}
        for turn in result["chat"].values():
            assert turn["turns"] == 50 and turn["turns_per_s"] > 0 and turn["cpu_ms_per_turn"]["threads"] > 0
            assert 0 < turn["latency"]["p50_ms"] <= turn["latency"]["p99_ms"]
        assert result["seed"]["entries"] == 2000 and result["seed"]["elapsed_s"] >= 0
        assert set(result["reads"]) >= {"first", "middle", "previous", "last", "pair", "correlation"}
        for read in result["reads"].values():
            assert read["reads"] == report["settings"]["reads"]
            assert 0 < read["p50_ms"] <= read["p99_ms"]
        assert {t["key"] for t in result["targets"]} == {"appends_per_s", "page_p50_ms"}
        assert all(t["measured"] is not None and t["met"] is not None for t in result["targets"])
        assert f"### {backend}" in done.stdout
    assert "| first page (ascending, no token) |" in done.stdout


def test_context_bench_smoke_measures_every_counter_and_the_fold() -> None:
    """`scripts/bench.sh context --smoke`: a conversation's turns read over
    real sockets, counted by each counter, split, and the fold timed once."""
    from tests.bench import bench_context

    results = bench_context.main(["--smoke", "--turns", "20"])
    for counter in ("words (offline)", "o200k_base (OpenAI)", "estimate (others)"):
        row = results[counter]
        assert row["history_tokens"] > 20 * 2 * 60 // 2 and row["kept_turns"] == 20
        assert 0 < row["turns_and_split"]["p50_ms"] <= row["total"]["p50_ms"]
        assert row["turns_and_split_kept"]["p50_ms"] > 0
    # Each counter sees the same text differently: the exact vocabulary is not the estimate.
    assert results["o200k_base (OpenAI)"]["history_tokens"] != results["estimate (others)"]["history_tokens"]
    fold = results["fold"]
    assert fold["folded_turns"] > 0 and fold["kept_turns"] > 0 and fold["summary_chars"] > 0


def test_hops_bench_smoke_prices_every_piece_of_a_run() -> None:
    """`scripts/bench.sh hops --smoke`: a gRPC call and stream and an HTTP
    request and SSE stream between real processes, SQLite statements, and
    one run's fixed pieces priced from them."""
    from tests.bench import bench_hops

    result = bench_hops.main(["--smoke"])
    costs = result["per_piece_ms"]
    # The run's pieces, and what they are compared with: the bare statement
    # and commit through SQLAlchemy (the cold paths) and sqlite3 alone, and
    # a unary call through Switchboard's own server and client path.
    compared = {"sql_statement", "sql_commit", "sqlite3_statement_alone", "grpc_unary_switchboard"}
    assert set(costs) == {*bench_hops.RUN_PIECES, *compared}
    # Measured directly; a streamed message is a difference of two streams,
    # which a smoke run's few calls may not resolve.
    direct = (
        "grpc_unary",
        "grpc_unary_switchboard",
        "http_request",
        "sql_statement",
        "driver_read",
        "embed_request",
    )
    assert all(costs[piece] > 0 for piece in direct), costs
    assert all(isinstance(cost, float) for cost in costs.values()), costs
    # A statement through SQLAlchemy and a thread hand-off costs more than sqlite3's own.
    assert costs["sql_statement"] > costs["sqlite3_statement_alone"]
    assert result["run_total_ms"] == round(sum(result["run_ms"].values()), 2) > 0


@pytest.mark.timeout(300)
def test_growth_bench_smoke_reports_every_case(tmp_path: Path) -> None:
    """`scripts/bench.sh growth --smoke`: one launched system, each case's
    small and big side measured, every number there and positive, merged as
    the "growth" key beside the keys already in benchmarks.json. Not the
    ratio targets: those are the benchmark's report, not a test's."""
    from tests.bench.bench_growth import CASES

    out = tmp_path / "out"
    argv = ["bash", "scripts/bench.sh", "growth", "--smoke", "--out", str(out)]
    done, report = _merged_beside_others(argv, out, "growth")
    assert report["command"] == "scripts/bench.sh growth --smoke --out " + str(out)
    assert report["date"] and report["commit"] and report["machine"]["cores"] > 0
    settings = report["settings"]
    assert settings["smoke"] is True and settings["runs"] == 10 and settings["turns"] == 50
    assert list(report["cases"]) == list(CASES)
    for key, case in report["cases"].items():
        small, big = case["small"], case["big"]
        assert small["size"] < big["size"], key
        for side in (small, big):
            assert side["runs"] == settings["runs"], key
            assert side["cpu_ms_per_run"] > 0 and side["wall_p50_ms"] > 0, (key, side)
            by_process = side["cpu_ms_per_run_by_process"]
            assert set(by_process) == set(SERVICES) and all(ms >= 0 for ms in by_process.values())
            assert side["cpu_ms_per_run"] == pytest.approx(sum(by_process.values()), abs=0.01)
        assert case["ratio"] == pytest.approx(big["cpu_ms_per_run"] / small["cpu_ms_per_run"], abs=0.001)
        assert case["target"] in (1.2, 1.3) and isinstance(case["met"], bool)
    # The table went to stdout, and the report renders it.
    assert (
        "| Case | Small | Big | CPU ms/run, small | CPU ms/run, big | Ratio | Target | Met |" in done.stdout
    )
    assert "| AskAgent, thread of 0 → 5,000 entries | empty thread | 5,000 entries |" in done.stdout
    from tests.bench.bench_all import render

    assert "### Cost that does not grow with the work" in render({"growth": report})


@pytest.mark.timeout(300)
def test_memory_bench_smoke_writes_every_number(tmp_path: Path) -> None:
    """`scripts/bench.sh memory --smoke`: notes seeded straight into the
    memory service's database (its columns as its migrations left them),
    recalled through the real service, then notes saved each followed by a
    recall."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.bench.bench_memory", "--smoke", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (result,) = json.loads((tmp_path / "memory_bench.json").read_text())["memory"]
    assert (result["embedder"], result["notes"], result["queries"]) == ("hashing", 1000, 20)
    assert result["first_recall_ms"] > 0
    for measure in (result["rpc"], result["write_then_recall"]):
        assert 0 < measure["p50_ms"] <= measure["p99_ms"]
    assert "write+recall p50" in done.stdout


@pytest.mark.timeout(300)
def test_service_start_bench_runs_the_memory_service_of_a_checkout() -> None:
    """`tests.bench.bench_service_start memory hashing`: the memory service of
    this checkout in a process of its own, the recall set's notes saved in
    the bench user's project and recalled."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.bench.bench_service_start", "memory", "hashing", "--calls", "5"],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert (result["service"], result["embedder"]) == ("memory", "hashing")
    assert result["cold_start_s"] > 0 and 0 < result["p50_ms"] <= result["p90_ms"] and result["VmRSS"] > 0
