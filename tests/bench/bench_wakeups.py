"""What a stream that follows another engine's run adds to each event's
latency, on PostgreSQL: engine A executes the run (its client reads A's own
feed), engine B follows it with WatchRun from the database, woken by A's
announcements (services/shared/wakeups.py) or, without them, by its poll.

    scripts/bench.sh wakeups [--runs 20] [--token-delay 0.05]

Threads, memory, router and two engines run as processes on PostgreSQL
databases of their own (tests/processes.py). For each run, sequentially:
StartRun on A; once A's client has the first event, WatchRun on B from it;
both streams are read to the end, each event stamped on arrival. An event's
lag is its arrival on B less its arrival on A. Events A sent before B's
watch had surely started (its first 0.2 s) are left out: they wait for no
wake-up. "first" is, per run, the first event B had to wait for."""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import grpc

from services.shared.identity import user_metadata
from switchboard.engine.v1 import engine_service_pb2, engine_service_pb2_grpc
from switchboard.threads.v1 import threads_service_pb2, threads_service_pb2_grpc
from tests.databases import drop_templates
from tests.processes import backing_services, child_env, free_ports, process, wait_grpc_serving

ENGINES = ("engine-a", "engine-b")
# Events A sent this soon after B's WatchRun was called may predate its subscription.
SETTLE_SECONDS = 0.2


async def stamped(call: Any, into: dict[int, float]) -> None:
    async for response in call:
        into[response.event.sequence] = time.perf_counter()


async def one_run(
    engine_a: engine_service_pb2_grpc.EngineServiceStub,
    engine_b: engine_service_pb2_grpc.EngineServiceStub,
    conversation: str,
    index: int,
) -> list[float]:
    """The lags (seconds) of the events B waited for, in sequence order."""
    metadata = user_metadata("bench")
    started = engine_a.StartRun(
        engine_service_pb2.StartRunRequest(
            conversation_id=conversation, message=f"run {index}: tell me a story"
        ),
        metadata=metadata,
        timeout=120,
    )
    on_a: dict[int, float] = {}
    first = await anext(aiter(started))
    on_a[first.event.sequence] = time.perf_counter()
    watched = engine_b.WatchRun(
        engine_service_pb2.WatchRunRequest(run_id=first.event.run_id, after_sequence=first.event.sequence),
        metadata=metadata,
        timeout=120,
    )
    watch_began = time.perf_counter()
    on_b: dict[int, float] = {}
    await asyncio.gather(stamped(started, on_a), stamped(watched, on_b))
    if sorted(on_b) != sorted(s for s in on_a if s > first.event.sequence):
        raise RuntimeError(f"run {index}: B saw {sorted(on_b)}, A sent {sorted(on_a)}")
    return [on_b[s] - on_a[s] for s in sorted(on_b) if on_a[s] > watch_began + SETTLE_SECONDS]


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "count": len(ordered),
        "median_ms": round(statistics.median(ordered) * 1000, 2),
        "p95_ms": round(ordered[max(0, int(len(ordered) * 0.95) - 1)] * 1000, 2),
        "max_ms": round(ordered[-1] * 1000, 2),
    }


async def bench(runs: int, token_delay: float) -> dict[str, Any]:
    ports = free_ports("threads", "memory", "router", *ENGINES)
    folder = Path(tempfile.mkdtemp(prefix="switchboard-bench-wakeups-"))
    settings = {"SWITCHBOARD_ENGINE_OFFLINE_TOKEN_DELAY": str(token_delay)}
    firsts: list[float] = []
    every: list[float] = []
    async with AsyncExitStack() as stack:
        _, common = await stack.enter_async_context(backing_services(folder, ports, "sbbenchwake", settings))
        for name in ENGINES:
            env = child_env(
                {
                    **common,
                    "SWITCHBOARD_ENGINE_PORT": str(ports[name]),
                    "SWITCHBOARD_ENGINE_INSTANCE_ID": name,
                }
            )
            log = folder / f"{name}.log"
            await stack.enter_async_context(process([sys.executable, "-m", "services.engine"], env, log))
            await wait_grpc_serving(f"127.0.0.1:{ports[name]}", log)
        channels = [
            await stack.enter_async_context(grpc.aio.insecure_channel(f"127.0.0.1:{ports[name]}"))
            for name in ("threads", *ENGINES)
        ]
        threads = threads_service_pb2_grpc.ThreadsServiceStub(channels[0])
        engine_a, engine_b = (engine_service_pb2_grpc.EngineServiceStub(c) for c in channels[1:])
        created = await threads.CreateConversation(
            threads_service_pb2.CreateConversationRequest(), metadata=user_metadata("bench"), timeout=10
        )
        await one_run(engine_a, engine_b, created.conversation.id, -1)  # warm-up
        for index in range(runs):
            lags = await one_run(engine_a, engine_b, created.conversation.id, index)
            if lags:
                firsts.append(lags[0])
                every += lags
    return {"runs": runs, "token_delay": token_delay, "first": summary(firsts), "every": summary(every)}


def main(argv: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="scripts/bench.sh wakeups", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="measured runs (default 20)")
    parser.add_argument("--token-delay", type=float, default=0.05, help="the offline model's pause per token")
    args = parser.parse_args(argv)

    async def measured() -> dict[str, Any]:
        try:
            return await bench(args.runs, args.token_delay)
        finally:
            await drop_templates()

    result = asyncio.run(measured())
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
