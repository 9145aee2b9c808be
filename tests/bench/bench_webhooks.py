"""Webhook delivery latency: the four services in this process (as the
service tests run them) on SQLite or PostgreSQL, ``--runs`` runs each naming
a webhook on a local receiver, started ``--parallel`` at a time. Per run:
from the client's terminal event to the receiver's request (the outbox write
is already done by then; this is the worker's wake-up, the claim, the run
read, the signature and the POST). Prints one JSON line.

    .venv/bin/python -m tests.bench.bench_webhooks --backend sqlite --runs 100 --parallel 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from contextlib import AbstractAsyncContextManager
from pathlib import Path

from switchboard.engine.v1 import engine_pb2, engine_service_pb2
from switchboard.threads.v1 import threads_service_pb2
from tests.databases import database_url
from tests.fakes.webhook_receiver import webhook_receiver
from tests.service.harness import as_user
from tests.service.system import system

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8GKYo="


async def measure(backend: str, runs: int, parallel: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as folder, webhook_receiver() as receiver:

        def make_database(service: str) -> AbstractAsyncContextManager[str]:
            return database_url(backend, Path(folder), service)

        options = {"webhook_secret": SECRET, "webhook_allow_loopback": True}
        async with system(make_database, **options) as sb:  # type: ignore[arg-type]
            ended: dict[str, float] = {}
            gate = asyncio.Semaphore(parallel)

            async def one() -> None:
                async with gate:
                    created = await sb.threads.CreateConversation(
                        threads_service_pb2.CreateConversationRequest(), **as_user("bench")
                    )
                    request = engine_service_pb2.StartRunRequest(
                        conversation_id=created.conversation.id,
                        message="What is a webhook?",
                        surface=engine_pb2.SURFACE_CHAT,
                        webhook_url=receiver.url,
                    )
                    async for response in sb.engine.StartRun(request, **as_user("bench")):
                        if response.event.WhichOneof("kind") in ("final", "error"):
                            ended[response.event.run_id] = time.monotonic()

            began = time.monotonic()
            await asyncio.gather(*(one() for _ in range(runs)))
            await receiver.arrived(runs, timeout=120)
            total = time.monotonic() - began
    latencies = sorted(
        (r.at - ended[r.headers["webhook-id"].removeprefix("msg_")]) * 1000 for r in receiver.requests
    )
    return {
        "backend": backend,
        "runs": runs,
        "parallel": parallel,
        "deliveries": len(receiver.requests),
        "ids_unique": len({r.headers["webhook-id"] for r in receiver.requests}) == runs,
        "latency_ms_p50": round(statistics.median(latencies), 1),
        "latency_ms_p95": round(latencies[int(0.95 * (len(latencies) - 1))], 1),
        "latency_ms_max": round(latencies[-1], 1),
        "seconds_total": round(total, 2),
        "loadavg": os.getloadavg(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--parallel", type=int, default=10)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.backend, args.runs, args.parallel))))


if __name__ == "__main__":
    main()
