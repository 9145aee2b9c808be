"""Load (issue 10): 1,000 idle SSE clients plus one that never reads, on one
gateway, while runs continue. The gateway's own gauges on /metrics
(gateway/metrics.py and prometheus_client's process collector) show what it
holds: asyncio tasks, open file descriptors, SSE streams, resident memory.

The idle clients (tests/bench/sse_clients.py, in a process of their own)
follow runs held open by a tool call that waits (tests/bench/mcp_wait.py), so
their streams stay open and silent. The non-reader pipelines 64 replays of a
run with a ~65 KB event history (4 MB in all, more than the kernel's socket
buffers and the gateway's transport buffer hold) on one connection and never
reads a byte, so the gateway has a write blocked on it for as long as it is
connected.

What is asserted, and why these bounds:

* Every run completes while the clients are connected, and its latency
  stays bounded. The Performance issue's bound is "run p99 not more than
  10 % up"; the benchmark (``scripts/bench.sh``, the SSE scenario) measures
  that on an idle machine. Here, on a shared 2-core CI machine where other
  suites run at the same time, 20 runs per phase cannot resolve 10 %, so
  the test asserts what cannot flake and still catches a real regression:
  p50 with the clients at most 3x p50 without plus 100 ms, and p99 under
  3 s. Work proportional to the number of clients on every event (a
  broadcast, a scan of all queues: 1,000 clients x 20 us x 10 events is
  200 ms per run) breaks the first; a gateway whose event loop waits on the
  non-reader (until ``sse_send_timeout``) breaks the second.
* After the clients leave, the gateway's asyncio tasks and open descriptors
  return to their baseline (within 2 and 3: the test's own keep-alive
  connections come and go), and its SSE streams exactly. The non-reader
  holds at most a handful of tasks (one response stuck in a write), not one
  per request it sent. Whether the gateway then closes its connection
  depends on where the buffers fill: inside a response, a write stuck for
  ``sse_send_timeout`` (2 s here) ends it and the connection closes (the
  last write included: tests/unit/test_gateway_streams.py); between two
  responses, uvicorn stops reading the next request and the connection
  holds no task at all. The summary line reports which happened.
* Resident memory: CPython and glibc keep freed memory for reuse (there is
  no way, nor need, to make the gateway collect and trim on demand). One
  client costs the gateway ~85 KB while connected (7 tasks, a gRPC stream,
  buffers); after the first 1,000 leave, its RSS stays ~60 MB above where
  it started, and each further identical round adds less: measured +62,
  +17, +6, +1, +0.6 MB over five rounds, a plateau. So the baseline is
  taken after a first round, and the second may add at most 20 MB or half
  of what the first added, whichever is more. A leak of what the clients
  hold would add as much as the first round did, every round, and fails.

Hashing embedders: the start-up would otherwise load MiniLM twice, and the
embedder plays no part in streaming."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.bench import mcp_wait
from tests.bench.bench_runs import Sample, embedder_env, launched, percentile, sse_run
from tests.bench.sse_clients import NonReader, gateway_gauges, held_runs, side_process

CLIENTS = 1000
HELD_RUNS = 4
RUNS = 20  # per phase, at concurrency 1
REPLAYS = 64  # of the big run, pipelined by the non-reader
BIG_MESSAGE = " ".join(["w" * 2600] * 12)  # the offline model echoes 12 words: a ~65 KB event history
RSS_TOLERANCE_MB = 20  # or half the first round's growth, if more (see above)
TASKS_TOLERANCE = 2
FDS_TOLERANCE = 3
NON_READER_TASKS = 10
SEND_TIMEOUT = 2.0


async def _runs(client: httpx.AsyncClient, conversation: str, count: int) -> list[Sample]:
    return [await sse_run(client, conversation) for _ in range(count)]


async def _settle(
    client: httpx.AsyncClient, done: Callable[[dict[str, float]], bool], timeout: float = 30.0
) -> dict[str, float]:
    """The gateway's gauges once ``done`` holds for them (or at the deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        gauges = await gateway_gauges(client)
        if done(gauges) or time.monotonic() > deadline:
            return gauges
        await asyncio.sleep(0.25)


async def _big_run(client: httpx.AsyncClient) -> str:
    response = await client.post("/api/agent/conversations", json={"title": "big"})
    response.raise_for_status()
    path = f"/api/agent/conversations/{response.json()['id']}/messages"
    run_id = ""
    async with client.stream("POST", path, json={"message": BIG_MESSAGE}) as stream:
        assert stream.status_code == 200
        async for line in stream.aiter_lines():
            if line.startswith("data:") and not run_id:
                run_id = json.loads(line[5:])["run_id"]
    return run_id


async def _round(
    client: httpx.AsyncClient,
    url: str,
    held: list[str],
    big_run: str,
    conversation: str,
    folder: Path,
    tasks_limit: float,
) -> dict[str, object]:
    """The non-reader connects, then the idle clients; runs go on; the idle
    clients leave, then the non-reader. What the gateway held at each step
    (``tasks_limit``: what it may hold for the non-reader alone)."""
    non_reader = NonReader(url)
    await non_reader.start(
        [("GET", f"/api/agent/runs/{big_run}/events", b"")] * REPLAYS, {"Last-Event-ID": "0"}
    )
    try:
        args = ["--url", url, "--runs", ",".join(held), "--clients", str(CLIENTS)]
        async with side_process("tests.bench.sse_clients", args, folder) as (idle, _):
            connected = await gateway_gauges(client)
            samples = await _runs(client, conversation, RUNS)
        # The idle clients left; the non-reader is still there, unread.
        with_non_reader = await _settle(
            client, lambda g: g["sse_clients"] <= HELD_RUNS and g["asyncio_tasks"] <= tasks_limit
        )
    finally:
        received, closed_by_server = non_reader.drain()
        non_reader.close()
    return {
        "idle": idle,
        "connected": connected,
        "samples": samples,
        "with_non_reader": with_non_reader,
        "non_reader_received": received,
        "non_reader_closed_by_server": closed_by_server,
    }


@pytest.mark.timeout(300)
async def test_idle_clients_and_a_non_reader_leave_nothing_behind(tmp_path: Path) -> None:
    # A stuck write of the non-reader is given up after SEND_TIMEOUT, well within a round.
    env = {
        **embedder_env("hashing"),
        **mcp_wait.engine_env(),
        "SWITCHBOARD_GATEWAY_SSE_SEND_TIMEOUT": str(SEND_TIMEOUT),
    }
    async with (
        launched(tmp_path / "system", env) as (url, _, log),
        httpx.AsyncClient(base_url=url, timeout=60) as client,
    ):
        response = await client.post("/api/agent/conversations", json={"title": "runs"})
        response.raise_for_status()
        conversation = response.json()["id"]
        await _runs(client, conversation, 3)  # warm-up
        big_run = await _big_run(client)
        async with held_runs(client, HELD_RUNS) as held:
            initial = await gateway_gauges(client)
            assert initial["sse_clients"] == HELD_RUNS

            # Round 1 brings the allocator to its high-water mark.
            limit = initial["asyncio_tasks"] + NON_READER_TASKS
            first = await _round(client, url, held, big_run, conversation, tmp_path / "round1", limit)
            assert first["idle"]["connected"] == CLIENTS, first["idle"]
            baseline = await _settle(
                client,
                lambda g: (
                    g["asyncio_tasks"] <= initial["asyncio_tasks"] + TASKS_TOLERANCE
                    and g["open_fds"] <= initial["open_fds"] + FDS_TOLERANCE
                ),
            )
            assert baseline["asyncio_tasks"] <= initial["asyncio_tasks"] + TASKS_TOLERANCE, (
                initial,
                baseline,
            )
            assert baseline["open_fds"] <= initial["open_fds"] + FDS_TOLERANCE, (initial, baseline)
            before = await _runs(client, conversation, RUNS)

            # Round 2, measured.
            limit = baseline["asyncio_tasks"] + NON_READER_TASKS
            second = await _round(client, url, held, big_run, conversation, tmp_path / "round2", limit)
            after_leaving = await _settle(
                client,
                lambda g: (
                    g["asyncio_tasks"] <= baseline["asyncio_tasks"] + TASKS_TOLERANCE
                    and g["open_fds"] <= baseline["open_fds"] + FDS_TOLERANCE
                ),
            )
            after = await _runs(client, conversation, RUNS)

        idle, connected = second["idle"], second["connected"]
        assert isinstance(idle, dict) and isinstance(connected, dict)
        # Every idle client connected, and none was dropped while idle.
        assert idle["connected"] == CLIENTS and idle["failed"] == 0, idle
        assert idle["final"]["ended_early"] == 0, idle
        assert connected["sse_clients"] >= HELD_RUNS + CLIENTS
        assert connected["asyncio_tasks"] > baseline["asyncio_tasks"] + CLIENTS  # they were really there

        # The non-reader: its requests were served (at least the first
        # response reached its buffers), and while it stayed, unread, it held
        # a bounded handful of tasks and one descriptor, not one per request.
        received = second["non_reader_received"]
        assert isinstance(received, bytes) and received.startswith(b"HTTP/1.1 200"), received[:200]
        held_by_non_reader = second["with_non_reader"]
        assert isinstance(held_by_non_reader, dict)
        assert held_by_non_reader["asyncio_tasks"] <= baseline["asyncio_tasks"] + NON_READER_TASKS, (
            baseline,
            held_by_non_reader,
        )
        assert held_by_non_reader["open_fds"] <= baseline["open_fds"] + FDS_TOLERANCE + 1

        # Back to the baseline once everyone left.
        assert after_leaving["sse_clients"] == baseline["sse_clients"] == HELD_RUNS
        assert after_leaving["asyncio_tasks"] <= baseline["asyncio_tasks"] + TASKS_TOLERANCE, (
            baseline,
            after_leaving,
        )
        assert after_leaving["open_fds"] <= baseline["open_fds"] + FDS_TOLERANCE, (baseline, after_leaving)
        first_growth_mb = (baseline["rss_bytes"] - initial["rss_bytes"]) / 2**20
        growth_mb = (after_leaving["rss_bytes"] - baseline["rss_bytes"]) / 2**20
        assert growth_mb <= max(RSS_TOLERANCE_MB, first_growth_mb / 2), (first_growth_mb, growth_mb)

        # Runs went on, within the bounds explained above.
        samples = second["samples"]
        assert isinstance(samples, list) and len(samples) == RUNS
        without = [s.full_ms for s in before + after]
        with_clients = [s.full_ms for s in samples]
        p50_without, p50_with = percentile(without, 50), percentile(with_clients, 50)
        p99_with = percentile(with_clients, 99)
        summary = (
            f"full run p50 {p50_without:.1f} ms without, {p50_with:.1f} ms with the clients; p99 with "
            f"{p99_with:.1f} ms; gateway RSS {baseline['rss_bytes'] / 2**20:.1f} -> "
            f"{after_leaving['rss_bytes'] / 2**20:.1f} MB, tasks {baseline['asyncio_tasks']:.0f} -> "
            f"{connected['asyncio_tasks']:.0f} -> {after_leaving['asyncio_tasks']:.0f}"
        )
        non_reader = f"non-reader: {len(received):,} bytes buffered, closed by the gateway: "
        summary += f"; {non_reader}{second['non_reader_closed_by_server']}"
        print(summary)
        assert p50_with <= 3 * p50_without + 100, summary
        assert p99_with <= 3000, summary
        assert "Traceback" not in log.read_text()[-20000:]
