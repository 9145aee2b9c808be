"""Cold start, latency through the RPC and resident memory of the router or
memory service with a given embedder, in a process of its own (SQLite), for
the code of any checkout: the before / after table of docs/benchmarks.md,
"Embedder choice".

    .venv/bin/python -m tests.bench.bench_service_start router use-multilingual-v3
    .venv/bin/python -m tests.bench.bench_service_start memory minilm --code /tmp/before --calls 300

Cold start: from spawning ``python -m services.<service>`` to health SERVING
on an empty database (migrations included). Then 20 warm-up calls and
``--calls`` measured ones: RouteSkills over the router fixture's requests
(default catalog), or RecallNotes over the recall set's queries after saving
its 50 notes. Resident memory: VmRSS after the calls, and VmHWM (the peak).
Prints one JSON line, with the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc

from services.shared.identity import user_metadata
from services.shared.projects import personal_project_id
from switchboard.memory.v1 import memory_pb2, memory_service_pb2_grpc
from switchboard.memory.v1 import memory_service_pb2 as mpb
from switchboard.router.v1 import router_service_pb2 as rpb
from switchboard.router.v1 import router_service_pb2_grpc
from tests.bench.bench_router import ROOT, service_process

FIXTURES = ROOT / "tests" / "fixtures"
WARM_UP = 20
# The notes go to the bench user's personal project, which exists on first use
# (any other needs creating first; older checkouts take any id).
PROJECT = personal_project_id("bench")


async def calls(service: str, channel: grpc.aio.Channel) -> tuple[list[str], Callable[[str], Awaitable[Any]]]:
    """The texts to send and the call that sends one."""
    if service == "router":
        router = router_service_pb2_grpc.RouterServiceStub(channel)
        requests = json.loads((FIXTURES / "router/skill_requests.json").read_text())["requests"]

        def route(text: str) -> Awaitable[Any]:
            request = rpb.RouteSkillsRequest(text=text, offline=True)
            return router.RouteSkills(request, metadata=user_metadata("bench"), timeout=30)  # type: ignore[no-any-return]

        return [r["text"] for r in requests], route
    memory = memory_service_pb2_grpc.MemoryServiceStub(channel)
    recall_set = json.loads((FIXTURES / "memory/recall_set.json").read_text())
    for n in recall_set["notes"]:
        note = memory_pb2.Note(
            project_id=PROJECT, kind=n["kind"], title=n["title"], body=n["body"], tags=n["tags"]
        )
        await memory.CreateNote(mpb.CreateNoteRequest(note=note), metadata=user_metadata("bench"), timeout=30)

    def recall(text: str) -> Awaitable[Any]:
        request = mpb.RecallNotesRequest(project_id=PROJECT, query=text, limit=5)
        return memory.RecallNotes(request, metadata=user_metadata("bench"), timeout=30)  # type: ignore[no-any-return]

    return [q["query"] for q in recall_set["queries"]], recall


async def bench(service: str, embedder: str, code: Path, count: int) -> dict[str, Any]:
    folder, facts = Path(tempfile.mkdtemp(prefix="sbbench_start_")), {}
    settings = {"DATABASE_URL": f"sqlite+aiosqlite:///{folder / 'db.sqlite'}", "EMBEDDER": embedder}
    async with service_process(service, folder, settings, facts, code) as channel:
        texts, call = await calls(service, channel)
        for i in range(WARM_UP):
            await call(texts[i % len(texts)])
        latencies = []
        for i in range(count):
            started = time.perf_counter()
            await call(texts[i % len(texts)])
            latencies.append((time.perf_counter() - started) * 1000)
    latencies.sort()
    return {
        "code": str(code),
        "service": service,
        "embedder": embedder,
        "cold_start_s": facts["cold_start_s"],
        "p50_ms": round(statistics.median(latencies), 2),
        "p90_ms": round(latencies[int(0.9 * len(latencies))], 2),
        **facts["resident_mb"],
        "load_average": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.bench_service_start", description=__doc__)
    parser.add_argument("service", choices=["router", "memory"])
    parser.add_argument("embedder")
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout whose services run")
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(bench(args.service, args.embedder, args.code.resolve(), args.calls))))


if __name__ == "__main__":
    main()
