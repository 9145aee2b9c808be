"""What the pieces every run is made of cost on this machine, alone: a gRPC
unary call and a streamed message between two processes, an HTTP request and
an SSE event between two processes (FastAPI on uvicorn, as the gateway), a
SQLite read and a two-statement write on the services' driver (the run's
hot path), the same statement and commit through SQLAlchemy (the cold
paths) and through sqlite3 alone, and embedding a request with the default
model. CPU is summed over client and server.
The same unary call is priced again through Switchboard's own server and
client path (``grpc_unary_switchboard``: a service started by the shared
bootstrap, with every per-call layer, around a handler that does nothing;
``clients.call`` with an identity token): the difference is what that path
adds to each of a run's calls.

    scripts/bench.sh hops [--calls 2000] [--smoke]

It ends with what one chat run's fixed pieces cost together, by the counts
of docs/benchmarks.md ("what a run is made of"): a floor under any run on
this design that no lever inside the services can remove."""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import httpx
from grpc_health.v1 import health, health_pb2_grpc

from services.shared.event_loop import run
from tests.bench.bench_runs import cpu_seconds
from tests.identity_key import use_run_identity_key
from tests.processes import ROOT, child_env, free_port, process, wait_grpc_serving, wait_http_ok

# One chat run's pieces, counted from the floor's call table and database
# counts (docs/benchmarks.md): the gateway's POST and its SSE stream of the
# run's events; the gateway's StartRun stream from the engine; the engine's
# unary calls (GetChatContext, AppendEntries twice, ListEntries, RouteMessage,
# and the gateway's own GetConversation); the driver's batches over the four
# databases (services/shared/driver.py: 8 reads and 7 writes of 2 statements
# on average, 30 statements, none left on SQLAlchemy); the one embedding of
# the request (the default multilingual model), which recall and routing share.
RUN_PIECES = {
    "http_request": 1,
    "sse_event": 10,
    "grpc_unary": 6,
    "grpc_streamed": 10,
    "driver_read": 8,
    "driver_write": 7,
    "embed_request": 1,
}
# A message of a stream costs the difference between a stream of 1 and
# one of 1 + STREAMED, divided by STREAMED.
STREAMED = 20
# A run's whole server CPU should stay within this factor of its fixed
# pieces (scripts/bench.sh peer measures both, back to back).
PIECES_FACTOR = 1.5

_BYTES = (lambda b: b, lambda b: b)  # no protobuf: the transport alone


# The servers, each in a process of its own.


async def _serve_grpc(port: int) -> None:
    async def echo(request: bytes, _context: Any) -> bytes:
        return request

    async def stream(request: bytes, _context: Any) -> AsyncIterator[bytes]:
        for _ in range(int(request)):
            yield b"x" * 64

    handlers = {
        "Echo": grpc.unary_unary_rpc_method_handler(echo, *_BYTES),
        "Stream": grpc.unary_stream_rpc_method_handler(stream, *_BYTES),
    }
    server = grpc.aio.server()
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("bench.Hops", handlers)])
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)  # for the start-up wait
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


def _serve_http(port: int) -> None:
    import uvicorn
    from fastapi import FastAPI
    from sse_starlette.sse import EventSourceResponse

    app = FastAPI()

    @app.get("/json")
    async def as_json() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/sse")
    async def sse(n: int) -> EventSourceResponse:
        async def events() -> AsyncIterator[dict[str, str]]:
            for i in range(n):
                yield {"id": str(i), "event": "step", "data": json.dumps({"i": i})}

        return EventSourceResponse(events())

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


async def _serve_switchboard(port: int) -> None:
    """The echo through the bootstrap every service starts with."""
    from services.shared.bootstrap import start_service
    from services.shared.settings import ServiceSettings

    async def echo(request: bytes, _context: Any) -> bytes:
        return request

    def register(server: grpc.aio.Server) -> list[str]:
        handlers = {"Echo": grpc.unary_unary_rpc_method_handler(echo, *_BYTES)}
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("bench.Hops", handlers)])
        return ["bench.Hops"]

    service = await start_service(ServiceSettings(host="127.0.0.1", port=port), register)
    await service.server.wait_for_termination()


@asynccontextmanager
async def _server(kind: str, folder: Path) -> AsyncIterator[tuple[int, int]]:
    """A ``kind`` server in a process of its own, serving: its pid and port."""
    port, log = free_port(), folder / f"{kind}.log"
    argv = [sys.executable, "-m", "tests.bench.bench_hops", "--serve", kind, "--port", str(port)]
    async with process(argv, child_env({}), log, cwd=ROOT) as child:
        if kind in ("grpc", "switchboard"):
            await wait_grpc_serving(f"127.0.0.1:{port}", log)
        else:
            await wait_http_ok(f"http://127.0.0.1:{port}/json", log)
        yield child.pid, port


# Measuring: the client is this process.


async def _measured(calls: int, server_pid: int | None, one: Callable[[], Awaitable[None]]) -> float:
    """CPU ms per call, this process's and the server's (if another), after a warm-up."""

    def spent() -> float:
        return time.process_time() + (sum(cpu_seconds(server_pid)) if server_pid else 0.0)

    for _ in range(max(calls // 10, 5)):
        await one()
    before = spent()
    for _ in range(calls):
        await one()
    return (spent() - before) / calls * 1e3


async def _call_and_message(
    calls: int,
    server_pid: int,
    call: Callable[[], Awaitable[None]],
    stream: Callable[[int], Awaitable[None]],
) -> tuple[float, float]:
    """CPU ms of one ``call()``, and of one message more in ``stream(n)``:
    the difference between a stream of 1 and one of 1 + STREAMED."""
    one_call = await _measured(calls, server_pid, call)
    with_one = await _measured(calls // 5, server_pid, lambda: stream(1))
    with_more = await _measured(calls // 5, server_pid, lambda: stream(1 + STREAMED))
    return one_call, (with_more - with_one) / STREAMED


async def _grpc_costs(calls: int, folder: Path) -> dict[str, float]:
    async with (
        _server("grpc", folder) as (pid, port),
        grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel,
    ):
        echo = channel.unary_unary("/bench.Hops/Echo", *_BYTES)
        stream = channel.unary_stream("/bench.Hops/Stream", *_BYTES)

        async def unary() -> None:
            await echo(b"x" * 64)

        async def streamed(n: int) -> None:
            async for _ in stream(str(n).encode()):
                pass

        call, message = await _call_and_message(calls, pid, unary, streamed)
    return {"grpc_unary": call, "grpc_streamed": message}


async def _switchboard_cost(calls: int, folder: Path) -> dict[str, float]:
    from services.shared.clients import call, open_channel
    from services.shared.identity import user_metadata

    async with _server("switchboard", folder) as (pid, port), open_channel(f"127.0.0.1:{port}") as channel:
        echo = channel.unary_unary("/bench.Hops/Echo", *_BYTES)

        async def unary() -> None:
            # The metadata as the callers build it (one signed token per user, cached).
            await call(echo, b"x" * 64, timeout=10, metadata=user_metadata("bench"))

        return {"grpc_unary_switchboard": await _measured(calls, pid, unary)}


async def _http_costs(calls: int, folder: Path) -> dict[str, float]:
    async with (
        _server("http", folder) as (pid, port),
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client,
    ):

        async def request() -> None:
            (await client.get("/json")).raise_for_status()

        async def sse(n: int) -> None:
            async with client.stream("GET", "/sse", params={"n": n}) as response:
                async for _ in response.aiter_bytes():
                    pass

        call, message = await _call_and_message(calls, pid, request, sse)
    return {"http_request": call, "sse_event": message}


async def _sql_costs(calls: int, folder: Path) -> dict[str, float]:
    from sqlalchemy import text

    from services.shared.db import create_engine

    engine = create_engine(f"sqlite+aiosqlite:///{folder / 'hops.db'}")
    async with engine.begin() as connection:
        await connection.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)"))
        await connection.execute(text("INSERT INTO t (id, body) VALUES (1, 'un')"))
    rows = iter(range(2, 10**9))

    async def read() -> None:
        async with engine.connect() as connection:
            (await connection.execute(text("SELECT body FROM t WHERE id = 1"))).one()

    async def write() -> None:
        async with engine.begin() as connection:
            await connection.execute(
                text("INSERT INTO t (id, body) VALUES (:id, 'deux')"), {"id": next(rows)}
            )

    statement = await _measured(calls, None, read)
    transaction = await _measured(calls, None, write)

    # The same read, and a write of two statements in one transaction, as
    # the run's hot path makes them: on the driver (one thread hand-off each).
    from services.shared.driver import Driver, Statement

    driver = Driver(engine)

    async def driver_read() -> None:
        await driver.fetchrow("SELECT body FROM t WHERE id = $1", 1)

    async def driver_write() -> None:
        insert = "INSERT INTO t (id, body) VALUES ($1, 'trois')"
        await driver.batch([Statement(insert, (next(rows),)), Statement(insert, (next(rows),))])

    driver_read_ms = await _measured(calls, None, driver_read)
    driver_write_ms = await _measured(calls, None, driver_write)
    await engine.dispose()

    raw = sqlite3.connect(folder / "hops.db")
    started = time.process_time()
    for _ in range(calls):
        raw.execute("SELECT body FROM t WHERE id = 1").fetchone()
    raw_statement = (time.process_time() - started) / calls * 1e3
    raw.close()
    return {
        "sql_statement": statement,
        "sql_commit": max(transaction - statement, 0.0),
        "driver_read": driver_read_ms,
        "driver_write": driver_write_ms,
        "sqlite3_statement_alone": raw_statement,
    }


async def _embed_cost(calls: int) -> dict[str, float]:
    from services.shared.embeddings import EmbedderName, load_embedder

    embedder = load_embedder(EmbedderName.USE_MULTILINGUAL.value)
    texts = ["Quand est la fenêtre de déploiement ?", "When is the deploy window?"]

    async def one() -> None:
        embedder.embed([texts[0]])
        texts.reverse()

    return {"embed_request": await _measured(max(calls // 10, 20), None, one)}


def report(costs: dict[str, float]) -> dict[str, Any]:
    run = {piece: round(count * costs[piece], 2) for piece, count in RUN_PIECES.items()}
    return {
        "per_piece_ms": {k: round(v, 4) for k, v in costs.items()},
        "run_pieces": RUN_PIECES,
        "run_ms": run,
        "run_total_ms": round(sum(run.values()), 2),
        "pieces_factor": PIECES_FACTOR,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--smoke", action="store_true", help="a few calls, to check the bench runs")
    parser.add_argument("--serve", choices=["grpc", "switchboard", "http"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve == "grpc":
        run(_serve_grpc(args.port), "uvloop")
        return {}
    if args.serve == "switchboard":
        run(_serve_switchboard(args.port), "uvloop")
        return {}
    if args.serve == "http":
        _serve_http(args.port)
        return {}
    calls = 50 if args.smoke else args.calls
    use_run_identity_key()  # the switchboard server, a child, inherits it

    async def measure() -> dict[str, float]:
        with tempfile.TemporaryDirectory() as folder:
            return {
                **await _grpc_costs(calls, Path(folder)),
                **await _switchboard_cost(calls, Path(folder)),
                **await _http_costs(calls, Path(folder)),
                **await _sql_costs(calls, Path(folder)),
                **await _embed_cost(calls),
            }

    result = report(run(measure(), "uvloop"))
    lines = ["| piece | CPU ms each | per run | CPU ms per run |", "|---|---:|---:|---:|"]
    for piece, each in result["per_piece_ms"].items():
        count = RUN_PIECES.get(piece)
        per_run = f"{result['run_ms'][piece]:.2f}" if count else "—"
        lines.append(f"| {piece} | {each:.3f} | {count or '—'} | {per_run} |")
    lines.append(
        f"| **one run's fixed pieces** | | | **{result['run_total_ms']:.2f}** "
        f"(a run's server CPU: at most {PIECES_FACTOR}× this, scripts/bench.sh peer) |"
    )
    added = result["per_piece_ms"]["grpc_unary_switchboard"] - result["per_piece_ms"]["grpc_unary"]
    lines.append(f"\nSwitchboard's server and client path adds {added:.3f} CPU ms to each unary call.")
    print("\n".join(lines))
    return result


if __name__ == "__main__":
    main()
