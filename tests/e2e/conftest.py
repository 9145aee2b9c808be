"""The real system: the launcher starts the five processes on free ports, on
SQLite files or on fresh PostgreSQL databases, exporting traces to a real
OTLP receiver. One system per backend for the whole e2e module."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.databases import BACKENDS, create_database, drop_database
from tests.e2e.otlp import Receiver, start_receiver
from tests.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
TOKENS = {"alice": "token-alice", "bob": "token-bob"}
SERVICES = ("threads", "memory", "router", "engine")
T = TypeVar("T")


@dataclass
class Launched:
    url: str
    ports: dict[str, int]
    process: subprocess.Popen[bytes]
    log: Path
    traces: Receiver
    backend: str
    metrics_ports: dict[str, int]

    def headers(self, user: str = "alice") -> dict[str, str]:
        return {"Authorization": f"Bearer {TOKENS[user]}"}


def recording_env(base_url: str) -> dict[str, str]:
    """Settings for a recording OpenAI-compatible server at ``base_url``
    beside the offline models: Auto never picks it (an offline model of each
    profile comes first); a request names it as the model `recorded`."""
    offline = [
        {"id": f"offline-{p}", "provider": "offline", "model": f"switchboard-offline-{p}", "profile": p}
        for p in ("fast", "balanced", "strong")
    ]
    recorded = {"id": "recorded", "provider": "recording", "model": "model-x", "profile": "strong"}
    return {
        "SWITCHBOARD_ENGINE_PROVIDERS_JSON": json.dumps(
            [{"name": "recording", "kind": "openai", "base_url": base_url}]
        ),
        "SWITCHBOARD_ROUTER_MODELS_JSON": json.dumps([*offline, recorded]),
    }


def _blocking(coroutine: Coroutine[Any, Any, T]) -> T:
    """Runs a coroutine to completion from sync code, in a thread of its own
    (the caller's thread may already run a loop, e.g. Playwright's)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def _stop(process: subprocess.Popen[bytes]) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
    return int(process.returncode)


@pytest.fixture(scope="module", params=BACKENDS)
def launched(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Launched]:
    folder = tmp_path_factory.mktemp(f"system-{request.param}")
    receiver_server, receiver, receiver_port = start_receiver()
    env = {
        **os.environ,
        "SWITCHBOARD_GATEWAY_TOKENS": ",".join(f"{token}:{user}" for user, token in TOKENS.items()),
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver_port}",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        # The canned mailbox, so runs can call a tool (conversations still opt in).
        "SWITCHBOARD_ENGINE_CONNECTORS": "testmail",
        # A test module may add settings of its own (e.g. the web page's).
        **getattr(request.module, "LAUNCH_ENV", {}),
    }
    # Each gRPC service serves Prometheus metrics on a port of its own.
    metrics_ports = {service: free_port() for service in SERVICES}
    for service, port in metrics_ports.items():
        env[f"SWITCHBOARD_{service.upper()}_METRICS_PORT"] = str(port)
    database_urls: list[str] = []
    if request.param == "postgres":
        for service in SERVICES:
            url = _blocking(create_database(f"sbe2e_{service}"))
            database_urls.append(url)
            env[f"SWITCHBOARD_{service.upper()}_DATABASE_URL"] = url
    ready = folder / "ready.json"
    log = folder / "launcher.log"
    with log.open("wb") as log_file:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "services.launcher",
                "--ephemeral-ports",
                "--ready-file",
                str(ready),
                "--data-dir",
                str(folder / "data"),
            ],
            cwd=ROOT,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 90
        while not ready.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the launcher did not come up:\n{log.read_text()[-4000:]}")
            time.sleep(0.1)
        info = json.loads(ready.read_text())
        yield Launched(info["url"], info["ports"], process, log, receiver, request.param, metrics_ports)
        # Graceful stop: every process drains and exits cleanly.
        assert _stop(process) == 0, log.read_text()[-4000:]
        output = log.read_text()
        for service in SERVICES:
            assert f"{service} shutting down" in output
        assert "Traceback" not in output, output[-4000:]
    finally:
        _stop(process)
        receiver_server.stop(None)
        for url in database_urls:
            _blocking(drop_database(url))
