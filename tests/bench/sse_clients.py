"""Many idle SSE clients on one gateway, cheaply: raw asyncio sockets, one
HTTP/1.1 request each, in a process of their own so that their wake-ups
(the gateway's keep-alive pings reach them all at once) cost the benchmark
client nothing.

Each client GETs ``/api/agent/runs/{id}/events`` of a run held open by the
``wait`` MCP tool (tests/bench/mcp_wait.py), with ``Last-Event-ID: 0``: the
gateway replays the run's first events, then the stream stays idle (apart
from the pings) until the run ends or the client leaves. A client counts as
connected once its first event arrived; it then keeps reading, as a browser
would, until it is closed.

    python -m tests.bench.sse_clients --url http://127.0.0.1:8080 --runs ID1,ID2 \\
        --clients 1000 --ready /tmp/ready.json

writes ``{"connected", "failed", "connect_s"}`` to the ready file once every
client is connected (or failed), holds them until its stdin closes, then
closes them all and prints ``{"connected", "ended_early", "bytes"}`` as one
JSON line. Also used in-process by tests/e2e/test_sse_load.py, with
``NonReader``: a client that sends its requests and never reads a byte."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.bench.mcp_wait import NAME as WAIT_SERVER
from tests.bench.mcp_wait import hold_message

ROOT = Path(__file__).resolve().parents[2]
# What /metrics of the gateway says about the gateway itself.
GATEWAY_GAUGES = {
    "process_resident_memory_bytes": "rss_bytes",
    "process_open_fds": "open_fds",
    "switchboard_asyncio_tasks": "asyncio_tasks",
    "switchboard_sse_clients": "sse_clients",
    "switchboard_sse_clients_dropped_total": "sse_clients_dropped",
}

CONNECT_PARALLELISM = 64  # connections being opened at once (the listen backlog is larger)
CONNECT_TIMEOUT = 60.0


def raise_fd_limit() -> int:
    """Soft RLIMIT_NOFILE up to the hard limit (1,000 sockets need more than
    the usual 1,024); child processes inherit it. Returns the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 80


def _request(
    method: str, host: str, port: int, path: str, headers: dict[str, str], body: bytes = b""
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", "Accept: text/event-stream"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if body:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@dataclass
class _Client:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    task: asyncio.Task[None] | None = None
    ended: bool = False  # the server ended the stream (the run ended, or the client was dropped)
    received: int = 0


@dataclass
class IdleClients:
    """Idle SSE clients following held runs; ``connect()``, then ``close()``."""

    url: str
    run_ids: list[str]
    headers: dict[str, str] = field(default_factory=dict)
    clients: list[_Client] = field(default_factory=list)
    failed: int = 0
    errors: list[str] = field(default_factory=list)

    async def _open(self, index: int, gate: asyncio.Semaphore) -> None:
        host, port = _address(self.url)
        run_id = self.run_ids[index % len(self.run_ids)]
        path = f"/api/agent/runs/{run_id}/events"
        async with gate:
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT):
                    reader, writer = await asyncio.open_connection(host, port)
                    writer.write(_request("GET", host, port, path, {"Last-Event-ID": "0", **self.headers}))
                    head = await reader.readuntil(b"\r\n\r\n")
                    if b" 200 " not in head.split(b"\r\n", 1)[0]:
                        raise OSError(head.split(b"\r\n", 1)[0].decode(errors="replace"))
                    seen = b""
                    while b"event:" not in seen:  # the first event (replayed) arrived
                        chunk = await reader.read(65536)
                        if not chunk:
                            raise OSError("the stream ended before its first event")
                        seen += chunk
            except (OSError, TimeoutError, asyncio.IncompleteReadError) as error:
                self.failed += 1
                if len(self.errors) < 5:
                    self.errors.append(f"{type(error).__name__}: {error}")
                return
        client = _Client(reader, writer, received=len(head) + len(seen))
        client.task = asyncio.create_task(self._read(client))
        self.clients.append(client)

    @staticmethod
    async def _read(client: _Client) -> None:
        with contextlib.suppress(OSError):
            while chunk := await client.reader.read(65536):
                client.received += len(chunk)
            client.ended = True

    async def connect(self, count: int) -> float:
        """Opens ``count`` streams; returns the seconds it took."""
        gate = asyncio.Semaphore(CONNECT_PARALLELISM)
        started = time.perf_counter()
        await asyncio.gather(*(self._open(i, gate) for i in range(count)))
        return time.perf_counter() - started

    @property
    def connected(self) -> int:
        return len(self.clients)

    @property
    def ended_early(self) -> int:
        return sum(1 for c in self.clients if c.ended)

    async def close(self) -> None:
        """Every client leaves (closes its socket)."""
        for client in self.clients:
            if client.task is not None:
                client.task.cancel()
            client.writer.transport.abort()
        await asyncio.gather(*(c.task for c in self.clients if c.task is not None), return_exceptions=True)

    def stats(self) -> dict[str, int]:
        return {
            "connected": self.connected,
            "ended_early": self.ended_early,
            "bytes": sum(c.received for c in self.clients),
        }


class NonReader:
    """A client that never reads: a non-blocking socket with the smallest
    receive buffer, whose requests are sent (pipelined, HTTP/1.1) and whose
    answers are never read. Nothing in this process reads the socket (no
    asyncio transport), so what the gateway sends stays in the kernel's
    buffers, then in the gateway's."""

    def __init__(self, url: str) -> None:
        self.host, self.port = _address(url)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)  # set before connecting
        self.sock.setblocking(False)

    async def start(
        self, requests: list[tuple[str, str, bytes]], headers: dict[str, str] | None = None
    ) -> None:
        """Sends every (method, path, body) request at once, back to back."""
        loop = asyncio.get_running_loop()
        await loop.sock_connect(self.sock, (self.host, self.port))
        data = b"".join(
            _request(method, self.host, self.port, path, headers or {}, body)
            for method, path, body in requests
        )
        await loop.sock_sendall(self.sock, data)

    def drain(self) -> tuple[bytes, bool]:
        """Reads (at last) what is buffered, and whether the server had closed
        the connection. Only at the end of a test: reading is what it never does."""
        self.sock.setblocking(True)
        self.sock.settimeout(0.5)
        received = bytearray()
        try:
            while chunk := self.sock.recv(1 << 20):
                received += chunk
            return bytes(received), True
        except TimeoutError:
            return bytes(received), False
        except OSError:  # reset
            return bytes(received), True

    def close(self) -> None:
        self.sock.close()


async def gateway_gauges(client: httpx.AsyncClient) -> dict[str, float]:
    """The gateway's own gauges (GATEWAY_GAUGES), from its /metrics."""
    response = await client.get("/metrics")
    response.raise_for_status()
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name in GATEWAY_GAUGES:
                found[GATEWAY_GAUGES[sample.name]] = sample.value
    return found


@asynccontextmanager
async def held_runs(
    client: httpx.AsyncClient, count: int, seconds: float = 3600.0
) -> AsyncIterator[list[str]]:
    """``count`` runs, each on a conversation of its own that allows the
    ``idle`` MCP server, each waiting in its ``wait`` tool call: open, and
    silent. Yields their ids once every one is in its tool call; cancels
    them when the block ends. The engine must offer the server
    (``mcp_wait.engine_env()``)."""
    ids: list[str] = []
    readers: list[asyncio.Task[None]] = []

    async def hold(conversation: str, started: asyncio.Future[str], waiting: asyncio.Event) -> None:
        path = f"/api/agent/conversations/{conversation}/messages"
        async with client.stream(
            "POST", path, json={"message": hold_message(seconds)}, timeout=None
        ) as response:
            if response.status_code != 200:
                started.set_exception(RuntimeError(f"POST {path}: {response.status_code}"))
                return
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    data = json.loads(line[5:])
                    if not started.done():
                        started.set_result(data["run_id"])
                    if data.get("key") == "tools.mcp" and data.get("status") == "started":
                        waiting.set()

    try:
        waits = []
        for _ in range(count):
            body = {"title": "held", "allowed_sources": {"mcp_servers": [WAIT_SERVER]}}
            response = await client.post("/api/agent/conversations", json=body)
            response.raise_for_status()
            started: asyncio.Future[str] = asyncio.get_running_loop().create_future()
            waiting = asyncio.Event()
            readers.append(asyncio.create_task(hold(response.json()["id"], started, waiting)))
            ids.append(await asyncio.wait_for(started, 60))
            waits.append(waiting.wait())
        # The first call starts the MCP server's process.
        await asyncio.wait_for(asyncio.gather(*waits), 120)
        yield ids
    finally:
        for run_id in ids:
            with contextlib.suppress(httpx.HTTPError):
                await client.post(f"/api/agent/runs/{run_id}/cancel")
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)


@asynccontextmanager
async def side_process(
    module: str, args: list[str], folder: Path
) -> AsyncIterator[tuple[dict[str, Any], int]]:
    """``python -m <module> <args> --ready FILE`` (sse_clients, otlp_sink):
    yields what it wrote to the ready file and its pid once it did; then
    closes its stdin (it winds down) and puts what it printed last, a JSON
    line, in the dict under "final"."""
    folder.mkdir(parents=True, exist_ok=True)
    ready = folder / f"{module.rsplit('.', 1)[-1]}-{time.monotonic_ns()}.json"
    log = ready.with_suffix(".log")
    with log.open("wb") as err:
        child = subprocess.Popen(
            [sys.executable, "-m", module, *args, "--ready", str(ready)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
        )
    assert child.stdin is not None and child.stdout is not None
    info: dict[str, Any] = {}
    try:
        deadline = time.monotonic() + 300
        while not info:
            if child.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{module} did not get ready:\n{log.read_text()[-3000:]}")
            await asyncio.sleep(0.05)
            with contextlib.suppress(FileNotFoundError, json.JSONDecodeError):
                info = json.loads(ready.read_text())
        yield info, child.pid
    finally:
        child.stdin.close()
        try:
            with child.stdout:  # closed once read: the pipe is not left to the garbage collector
                out = await asyncio.to_thread(child.stdout.read)
            await asyncio.to_thread(child.wait, 60)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            out = b""
        lines = out.decode(errors="replace").strip().splitlines()
        with contextlib.suppress(IndexError, json.JSONDecodeError):
            info["final"] = json.loads(lines[-1])


async def _main(args: argparse.Namespace) -> None:
    raise_fd_limit()
    clients = IdleClients(args.url, args.runs.split(","), headers=dict(args.header))
    connect_s = await clients.connect(args.clients)
    ready: dict[str, Any] = {"connected": clients.connected, "failed": clients.failed}
    ready |= {"connect_s": round(connect_s, 3), "errors": clients.errors}
    args.ready.write_text(json.dumps(ready))
    # Hold until the parent closes our stdin.
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.buffer.read)
    stats = clients.stats()
    await clients.close()
    print(json.dumps(stats), flush=True)


def _header(text: str) -> tuple[str, str]:
    name, _, value = text.partition(":")
    return name.strip(), value.strip()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.sse_clients", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--url", required=True, help="the gateway")
    parser.add_argument(
        "--runs", required=True, help="held run ids, comma-separated; clients spread over them"
    )
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--ready", type=Path, required=True, help="written once every client is connected")
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        type=_header,
        metavar="NAME:VALUE",
        help="e.g. Authorization:...",
    )
    asyncio.run(_main(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
