"""Real processes for the tests and benchmarks that start services themselves
(the whole system through the launcher, several replicas, the compose stack):
free ports, a child that is always stopped, health and readiness waits."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services import launcher
from services.healthcheck import check
from tests.databases import SERVICES, postgres_database
from tests.pgbouncer import PgBouncer

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    return launcher.free_ports(1)[0]


def free_ports(*names: str) -> dict[str, int]:
    """A distinct free port for each name (picked together: see launcher.free_ports)."""
    return dict(zip(names, launcher.free_ports(len(names)), strict=True))


def child_env(overrides: dict[str, str]) -> dict[str, str]:
    """This environment plus ``overrides``, with the venv's python first on PATH."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return {**os.environ, **overrides, "PATH": path, "PYTHONUNBUFFERED": "1"}


@asynccontextmanager
async def process(
    argv: list[str], env: dict[str, str], log: Path, cwd: Path | None = None
) -> AsyncIterator[asyncio.subprocess.Process]:
    """A child writing to ``log``; SIGTERM (then SIGKILL) when the block ends."""
    with log.open("wb") as out:
        child = await asyncio.create_subprocess_exec(
            *argv, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=cwd
        )
        try:
            yield child
        finally:
            if child.returncode is None:
                child.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(child.wait(), 30)
                except TimeoutError:
                    child.kill()
                    await child.wait()


def stop_popen(child: subprocess.Popen[bytes], grace: float = 60.0) -> int:
    """SIGTERM, then SIGKILL after ``grace`` seconds (and the timeout raised);
    returns the exit code."""
    if child.poll() is None:
        child.send_signal(signal.SIGTERM)
        try:
            return child.wait(grace)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            raise
    return int(child.returncode)


@asynccontextmanager
async def backing_services(
    folder: Path,
    ports: Mapping[str, int],
    prefix: str,
    settings: Mapping[str, str],
    pooler: PgBouncer | None = None,
) -> AsyncIterator[tuple[dict[str, str], dict[str, str]]]:
    """Threads, memory and router as processes on ``ports``, for the tests
    that start engines (and gateways) of their own beside them: each of the
    four services gets a PostgreSQL database (``<prefix>_<service>``).
    Yields each service's database URL (PostgreSQL's own) and the settings
    every process of such a stack shares (hashing embedders, the engine's
    addresses of the three, then ``settings``). With a ``pooler``, the
    services reach their databases through it, without prepared statements,
    and PostgreSQL directly only for LISTEN. Everything stops, in reverse,
    after the block."""
    async with AsyncExitStack() as stack:
        urls = {
            name: await stack.enter_async_context(postgres_database(f"{prefix}_{name}", name))
            for name in SERVICES
        }
        databases: dict[str, str] = {}
        for name, url in urls.items():
            variable = f"SWITCHBOARD_{name.upper()}_DATABASE"
            if pooler is None:
                databases[f"{variable}_URL"] = url
            else:
                databases[f"{variable}_URL"] = pooler.url(url)
                databases[f"{variable}_PREPARED_STATEMENTS"] = "false"
                databases[f"{variable}_LISTEN_URL"] = url
        common = {
            **databases,
            "SWITCHBOARD_MEMORY_EMBEDDER": "hashing",
            "SWITCHBOARD_ROUTER_EMBEDDER": "hashing",
            **{
                f"SWITCHBOARD_ENGINE_{n.upper()}_ADDRESS": f"127.0.0.1:{ports[n]}"
                for n in ("threads", "memory", "router")
            },
            **settings,
        }
        for name in ("threads", "memory", "router"):
            env = child_env({**common, f"SWITCHBOARD_{name.upper()}_PORT": str(ports[name])})
            log = folder / f"{name}.log"
            await stack.enter_async_context(process([sys.executable, "-m", f"services.{name}"], env, log))
            await wait_grpc_serving(f"127.0.0.1:{ports[name]}", log)
        yield urls, common


async def wait_grpc_serving(address: str, log: Path, timeout: float = 60.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        try:
            if await asyncio.to_thread(check, address, "", 1.0) == "SERVING":
                return
        except Exception:  # noqa: BLE001 - not up yet
            pass
        await asyncio.sleep(0.3)
    raise AssertionError(f"{address} never became SERVING:\n{log.read_text()[-3000:]}")


async def wait_channel_serving(
    channel: grpc.aio.Channel,
    process: subprocess.Popen[bytes],
    log: Path,
    timeout: float,
    interval: float = 0.05,
    error: type[Exception] = RuntimeError,
) -> None:
    """Returns once the server behind ``channel`` (started as ``process``)
    reports SERVING; ``error`` with the end of its log when the process exits
    first or ``timeout`` passes. Polls every ``interval``, so a cold start is
    measured to that precision."""
    health = health_pb2_grpc.HealthStub(channel)
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None or time.monotonic() > deadline:
            raise error(f"{process.args} did not come up:\n{log.read_text()[-4000:]}")
        try:
            reply = await health.Check(health_pb2.HealthCheckRequest(service=""), timeout=1)
            if reply.status == health_pb2.HealthCheckResponse.SERVING:
                return
        except grpc.aio.AioRpcError:
            pass
        await asyncio.sleep(interval)


async def wait_http_ok(url: str, log: Path, timeout: float = 60.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    async with httpx.AsyncClient(timeout=1) as client:
        while asyncio.get_running_loop().time() < deadline:
            try:
                if (await client.get(url)).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.3)
    raise AssertionError(f"{url} never answered 200:\n{log.read_text()[-3000:]}")


def start_launcher(
    folder: Path, env: Mapping[str, str], *options: str, code: Path = ROOT
) -> subprocess.Popen[bytes]:
    """``python -m services.launcher`` on free ports: the five processes, on
    SQLite files under ``folder``/data unless ``env`` names databases; its
    output in ``folder``/launcher.log. Wait for it with :func:`launcher_ready`.
    ``code``: the checkout whose services run (``env`` sets its PYTHONPATH)."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "launcher.log").open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "services.launcher", "--ephemeral-ports", *options]
            + ["--ready-file", str(folder / "ready.json"), "--data-dir", str(folder / "data")],
            cwd=code,
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def launcher_ready(process: subprocess.Popen[bytes], folder: Path, timeout: float) -> dict[str, Any]:
    """What the launcher wrote to its ready file (url, ports) once every
    process is healthy; RuntimeError with its log if it exits or times out."""
    ready, deadline = folder / "ready.json", time.monotonic() + timeout
    while True:
        try:
            return dict(json.loads(ready.read_text()))
        except (FileNotFoundError, json.JSONDecodeError):  # not yet, or being written
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            log = (folder / "launcher.log").read_text()
            raise RuntimeError(f"the launcher did not come up:\n{log[-4000:]}")
        time.sleep(0.1)
