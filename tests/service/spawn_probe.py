"""A process started as a service starts (the ``services`` package loaded
before grpc), serving gRPC calls on uvloop while it starts many short child
processes, as the engine starts MCP servers and CLI agents. Prints one JSON
line: the loop, how many children were started and how many died instead of
running their program (a child whose gRPC fork handlers crashed it before
``exec`` dies of SIGSEGV or SIGABRT).

Run: ``python -c "import services; from tests.service.spawn_probe import main; main()" N``
(tests/service/test_spawns_on_uvloop.py)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from services.shared.event_loop import run, running_loop_name

CALLERS = 4
# The smallest program: the children's own start-up is not what is measured.
TRUE = shutil.which("true") or "/bin/true"


async def _probe(children: int) -> dict[str, object]:
    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    done = asyncio.Event()

    async def call_all_along() -> None:
        # gRPC's threads stay busy in the parent while it forks.
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while not done.is_set():
                await stub.Check(health_pb2.HealthCheckRequest(), timeout=10)

    callers = [asyncio.create_task(call_all_along()) for _ in range(CALLERS)]
    died: list[int] = []
    try:
        for _ in range(children):
            child = await asyncio.create_subprocess_exec(
                TRUE,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,  # as the MCP SDK starts a server
            )
            await child.communicate()
            if child.returncode != 0:
                died.append(child.returncode or 0)
    finally:
        done.set()
        await asyncio.gather(*callers, return_exceptions=True)
        await server.stop(None)
    return {"loop": running_loop_name(), "children": children, "died": died}


def main() -> None:
    print(json.dumps(run(_probe(int(sys.argv[1])), "uvloop")))
