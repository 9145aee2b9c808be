"""A service on uvloop starts child processes that run: gRPC's fork
handlers, which crash a child between libuv's fork() and its exec() while
gRPC is busy in the parent, are off in every process the ``services``
package starts (services/__init__.py). With them on, this probe saw 2 to
10 % of its children die (SIGSEGV or SIGABRT) before running their program;
the engine's MCP servers then "exited" at once and a run's tool call failed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.processes import child_env

ROOT = Path(__file__).resolve().parents[2]
CHILDREN = 200
PROBE = "import services; from tests.service.spawn_probe import main; main()"


@pytest.mark.timeout(120)
def test_children_of_a_service_on_uvloop_all_reach_their_program() -> None:
    env = child_env({})
    env.pop("GRPC_ENABLE_FORK_SUPPORT", None)  # what the services package sets, not the caller
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(CHILDREN)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["loop"] == "uvloop"
    assert report == {"loop": "uvloop", "children": CHILDREN, "died": []}, done.stderr[-2000:]
