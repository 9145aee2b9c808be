"""The side-by-side benchmark's arithmetic and its SSE reader, without the
peer (whose virtualenv needs pip, so its run is not in the test suite):
the reader on canned streams of both servers, the ratios and goals, the
CPU of a process tree."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.bench.bench_peer import (
    compare,
    cpu_ms_per_run,
    kill_tree,
    markdown,
    process_tree,
    started_at,
    summary,
)
from tests.bench.bench_runs import Sample
from tests.bench.sse_read import StreamError, read_sse


async def lines_of(text: str) -> AsyncIterator[str]:
    for line in text.split("\n"):
        yield line


def read(text: str, final: str | None = None) -> Any:
    ticks = itertools.count(1)
    return asyncio.run(read_sse(lines_of(text), final=final, clock=lambda: float(next(ticks))))


SWITCHBOARD = (
    ": ping\n\n"
    "event: started\ndata: {}\nid: 1\n\n"
    'event: delta\ndata: {"text": "Paris"}\n\n'
    "event: final\ndata: {}\n\n"
)
PEER = 'event: metadata\ndata: {"run_id": "r"}\n\n' + "".join(
    f'event: messages\ndata: [{{"content": "w{i} "}}, {{}}]\n\n' for i in range(20)
)


def test_reader_times_the_first_event_and_the_final_one_and_skips_pings() -> None:
    times = read(SWITCHBOARD, final="final")
    assert times.kinds == ("started", "delta", "final")
    # The clock is read once per complete event (the ping is none), then not at the close.
    assert (times.first, times.end, times.events) == (1.0, 3.0, 3)


def test_reader_without_a_final_event_ends_when_the_stream_closes() -> None:
    times = read(PEER)
    assert times.kinds[0] == "metadata" and times.kinds.count("messages") == 20
    assert times.first == 1.0 and times.end == 22.0  # 21 events, then the close


def test_reader_names_a_block_without_event_field_message() -> None:
    assert read("data: a\ndata: b\n\n").kinds == ("message",)


def test_reader_fails_on_an_error_event_a_missing_final_or_an_empty_stream() -> None:
    with pytest.raises(StreamError, match="error event: boom"):
        read("event: started\ndata: {}\n\nevent: error\ndata: boom\n\n", final="final")
    with pytest.raises(StreamError, match="without a 'final' event"):
        read("event: started\ndata: {}\n\n", final="final")
    with pytest.raises(StreamError, match="without any event"):
        read(": ping\n\n")


def result(runs_per_s: float, first: float, end: float, cpu: float, concurrency: int = 1) -> dict[str, Any]:
    return {
        "concurrency": concurrency,
        "runs": 100,
        "runs_per_s": runs_per_s,
        "first_event": {"p50_ms": first, "p95_ms": first * 2},
        "end": {"p50_ms": end, "p95_ms": end * 2},
        "server_cpu_ms_per_run": cpu,
    }


SB = {"c1": result(200, 2.0, 5.0, 10.0), "c8": result(400, 8.0, 20.0, 5.0, 8)}
PEER_RESULTS = {
    "jobs1": {"n_jobs_per_worker": 1, "c1": result(10, 50.0, 300.0, 60.0), "c8": result(20, 90, 400, 50, 8)},
    "jobs10": {"n_jobs_per_worker": 10, "c1": result(9, 40.0, 250.0, 70.0), "c8": result(50, 80, 160, 40, 8)},
}


def test_compare_takes_the_peers_best_setting_per_level() -> None:
    comparison = compare(SB, PEER_RESULTS)
    c1, c8 = comparison["by_level"]["c1"], comparison["by_level"]["c8"]
    # At c1 jobs1 has the most runs/s (10 against 9): every ratio is against it.
    assert c1 == {
        "peer_setting": "jobs1",
        "runs_per_s": 20.0,
        "first_event_p50": 25.0,
        "end_p50": 60.0,
        "end_p95": 60.0,
        "server_cpu_per_run": 6.0,
    }
    assert c8["peer_setting"] == "jobs10" and c8["runs_per_s"] == 8.0 and c8["end_p50"] == 8.0


def goals_by_name(comparison: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["goal"].split(":")[0]: g for g in comparison["goals"]}


def test_the_targets_are_ratios_against_the_peer_the_pieces_and_sqlite() -> None:
    postgres = {"c8": result(380, 9.0, 22.0, 5.5, 8)}
    goals = goals_by_name(compare(SB, PEER_RESULTS, postgres, pieces_ms=4.0))
    # CPU per run at c8: 5 ms against jobs10's 40 (the setting with the most runs/s there).
    cpu = goals["server CPU per run at c8"]
    assert cpu["factor"] == 0.12 and cpu["met"] is True and "jobs10" in cpu["peer"]
    # Runs/s at c8: 400 against the peer's best setting there, 50.
    assert goals["runs/s at c8"]["factor"] == 8.0 and goals["runs/s at c8"]["met"] is True
    # c1 end p50: the peer's lowest (jobs10, 250 ms) against 5 ms.
    latency = goals["c1 end p50"]
    assert latency["factor"] == 50.0 and latency["met"] is True and "jobs10" in latency["peer"]
    # 5 ms per run at c8 against 4 ms of fixed pieces: 1.25×, within 1.5×.
    assert goals["fixed pieces at c8"]["factor"] == 1.25 and goals["fixed pieces at c8"]["met"] is True
    # PostgreSQL 5.5 against SQLite 5.0: 1.1×, within 1.2×.
    assert goals["PostgreSQL CPU per run at c8"]["factor"] == 1.1
    assert goals["PostgreSQL CPU per run at c8"]["met"] is True
    # No c32 was measured: no target at c32 is claimed.
    assert not [name for name in goals if "c32" in name]


def test_compare_reports_a_missed_target() -> None:
    slow = {"c1": result(40, 2.0, 25.0, 10.0), "c8": result(60, 8.0, 90.0, 70.0, 8)}
    goals = goals_by_name(compare(slow, PEER_RESULTS, {"c8": result(50, 9.0, 99.0, 91.0, 8)}, pieces_ms=20.0))
    assert goals["c1 end p50"]["factor"] == 10.0 and goals["c1 end p50"]["met"] is False
    assert goals["runs/s at c8"]["factor"] == 1.2 and goals["runs/s at c8"]["met"] is False
    assert (
        goals["server CPU per run at c8"]["factor"] == 1.75
        and goals["server CPU per run at c8"]["met"] is False
    )
    assert goals["PostgreSQL CPU per run at c8"]["factor"] == 1.3
    assert goals["PostgreSQL CPU per run at c8"]["met"] is False
    assert goals["fixed pieces at c8"]["factor"] == 3.5 and goals["fixed pieces at c8"]["met"] is False


def test_markdown_has_one_table_with_both_servers_and_the_ratios() -> None:
    text = markdown({"switchboard": SB, "peer": PEER_RESULTS})
    assert (
        "| Switchboard | SQLite, offline model | 1 | 100 | 2.00 | 4.00 | 5.00 | 10.00 | 200.0 | 10.00 |"
        in text
    )
    assert "| LangGraph dev | --n-jobs-per-worker 10 | 8 |" in text
    assert "| 1 | jobs1 | 20.0× | 25.0× | 60.0× | 60.0× | 6.0× |" in text
    assert "| runs/s at c8: ≥ 2× the peer's best setting | 400.0 | 50.0 | 8.0× | yes |" in text


def test_summary_percentiles_throughput_and_cpu() -> None:
    samples = [Sample(float(i), float(10 * i)) for i in range(1, 101)]
    s = summary(samples, 2.0, 8, 3.5)
    assert s["runs_per_s"] == 50.0 and s["runs"] == 100
    assert s["first_event"] == {"p50_ms": 50.0, "p95_ms": 95.0}
    assert s["end"] == {"p50_ms": 500.0, "p95_ms": 950.0}
    assert s["server_cpu_ms_per_run"] == 3.5


def test_cpu_per_run_sums_the_tree_and_counts_a_new_process_from_zero() -> None:
    before = {1: 1.0, 2: 0.5}
    after = {1: 1.5, 2: 0.75, 3: 0.25}  # 3 started in between
    assert cpu_ms_per_run(before, after, 10) == 100.0  # (0.5 + 0.25 + 0.25) s over 10 runs


def test_process_tree_holds_a_child_and_its_child() -> None:
    script = (
        "import subprocess, sys; c = subprocess.Popen(['sleep', '30']); "
        "print(c.pid, flush=True); sys.stdin.read()"
    )
    # The with block closes the pipes and waits for the parent.
    with subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as parent:
        try:
            assert parent.stdout is not None
            grandchild = int(parent.stdout.readline())
            tree = process_tree(os.getpid())
            assert {os.getpid(), parent.pid, grandchild} <= set(tree)
            assert parent.pid not in process_tree(grandchild)
        finally:
            os.kill(grandchild, 9)
            parent.kill()


def test_kill_tree_kills_only_the_process_it_recorded() -> None:
    child = subprocess.Popen(["sleep", "30"])
    try:
        started = started_at(child.pid)
        assert started is not None
        kill_tree({child.pid: started + 1})  # another process that got the same pid: left alone
        assert child.poll() is None
        kill_tree({child.pid: started})
        assert child.wait(10) == -9
        assert started_at(child.pid) is None  # reaped: gone
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
