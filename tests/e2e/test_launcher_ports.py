"""The launcher's --ephemeral-ports (what tests and benchmarks start
systems with): a port picked free can be bound by another program before the
child binds it; the launcher then starts the system again on other ports
instead of failing (or, worse, taking the other program's /healthz for its
gateway's)."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
from pathlib import Path

import httpx
import pytest

from gateway.settings import LAUNCH_ID_HEADER
from services import launcher


# The first round picks the five processes' ports in DEFAULT_PORTS' order
# (the gateway's the fifth, then its A2A gRPC port, the sixth), then the four
# services' metrics ports (the engine's first, the seventh).
# A port is taken by a program that only listens (held_port), or by a peer's
# HTTP server that answers 200 to /healthz (peer_http_port): neither is taken
# for the gateway.
@pytest.mark.parametrize(
    ("child", "pick", "holder"),
    [
        ("gateway", 4, "held_port"),
        ("gateway", 4, "peer_http_port"),
        ("gateway", 5, "held_port"),
        ("engine", 6, "held_port"),
    ],
    ids=["gateway", "gateway-peer-http", "gateway-a2a-grpc", "metrics"],
)
@pytest.mark.timeout(180)
async def test_a_picked_port_taken_meanwhile_starts_the_system_on_other_ports(
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    child: str,
    pick: int,
    holder: str,
) -> None:
    held_port = int(request.getfixturevalue(holder))
    rounds = itertools.count()
    real_free_ports = launcher.free_ports

    def free_ports(count: int) -> list[int]:
        picked = real_free_ports(count)
        if next(rounds) == 0:  # the first round's pick is taken before its child binds it
            picked[pick] = held_port
        return picked

    monkeypatch.setattr(launcher, "free_ports", free_ports)
    ready = tmp_path / "ready.json"
    args = launcher.parse(
        ["--ephemeral-ports", "--no-auth", "--data-dir", str(tmp_path / "data"), "--ready-file", str(ready)]
    )
    running = asyncio.create_task(launcher.run(args))
    try:
        for _ in range(900):
            if ready.exists() or running.done():
                break
            await asyncio.sleep(0.1)
        assert not running.done(), capsys.readouterr()
        ports = json.loads(ready.read_text())["ports"]
        assert held_port not in ports.values()
        assert held_port not in json.loads(ready.read_text())["metrics_ports"].values()
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{ports['gateway']}") as client:
            healthz = await client.get("/healthz")
            assert healthz.status_code == 200 and healthz.headers[LAUNCH_ID_HEADER]
        out = capsys.readouterr().out
        assert f"{child}'s port {held_port} was taken meanwhile; starting on other ports" in out
    finally:
        if not running.done():
            os.kill(os.getpid(), signal.SIGTERM)  # the launcher's own stop signal
        assert await asyncio.wait_for(running, 60) == 0
