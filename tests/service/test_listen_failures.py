"""A service that cannot listen where it is told to (another process holds
the port) says so and exits with its own status, which the launcher reads to
start again on other ports even when the port is free again by then."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from services import launcher
from services.shared import exit_codes
from tests.processes import ROOT, child_env, free_port


@pytest.mark.parametrize("which", ["port", "metrics", "health"])
def test_a_held_port_ends_the_start_with_the_cannot_listen_status(
    tmp_path: Path, held_port: int, which: str
) -> None:
    ports = {"port": free_port(), "metrics": 0, "health": 0, which: held_port}
    env = child_env(
        {
            "SWITCHBOARD_THREADS_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'threads.db'}",
            "SWITCHBOARD_THREADS_PORT": str(ports["port"]),
            "SWITCHBOARD_THREADS_METRICS_PORT": str(ports["metrics"]),
            "SWITCHBOARD_THREADS_HEALTH_PORT": str(ports["health"]),
        }
    )
    argv = [sys.executable, "-m", "services.threads"]
    ended = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert ended.returncode == exit_codes.CANNOT_LISTEN, ended.stderr
    assert f"threads cannot start: cannot listen on 127.0.0.1:{held_port}" in ended.stderr


def _failed(returncode: int, port: int) -> launcher.StartFailed:
    process: Any = SimpleNamespace(returncode=returncode)
    child: Any = SimpleNamespace(name="memory", process=process, port=port, other_ports=[], metrics_port=0)
    return launcher.StartFailed(child, "memory exited during start-up")


def test_the_launcher_reads_a_taken_port_from_the_status_or_from_the_port(held_port: int) -> None:
    free = free_port()
    # The other program let the port go again before the launcher looked.
    assert _failed(exit_codes.CANNOT_LISTEN, free).port_taken == "port"
    assert _failed(exit_codes.CANNOT_LISTEN, held_port).port_taken == f"port {held_port}"
    # The gateway (uvicorn exits 1) only by the port still answering.
    assert _failed(1, held_port).port_taken == f"port {held_port}"
    assert _failed(1, free).port_taken is None
