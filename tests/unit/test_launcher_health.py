"""The launcher's start-up checks against what else may be on the machine:
ports picked for one system are distinct, and a child counts as up only
when its own service answers on its port (not another service, or a peer's
server, that holds the port): a service by the health of its own name, the
gateway by the launch id its /healthz echoes."""

from __future__ import annotations

import asyncio
import importlib
import sys
from collections.abc import AsyncIterator

import grpc
import pytest
from fastapi.testclient import TestClient
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from gateway.app import create_app
from gateway.settings import LAUNCH_ID_HEADER, GatewaySettings
from services import launcher


def test_ports_picked_together_are_distinct() -> None:
    # One at a time (bind, close), the kernel handed the same port to the
    # router and memory of one launched system in a CI run.
    ports = launcher.free_ports(300)
    assert len(set(ports)) == 300
    assert all(1024 < port < 65536 for port in ports)


async def health_server(serving: str) -> tuple[grpc.aio.Server, int]:
    """A gRPC server on a free port whose health says SERVING for ``serving``
    (and for the whole server, ""), as every Switchboard service's does."""
    server = grpc.aio.server()
    servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    for name in ("", serving):
        await servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return server, port


@pytest.fixture
async def memory_on_a_port() -> AsyncIterator[int]:
    server, port = await health_server(launcher.HEALTH_SERVICES["memory"])
    yield port
    await server.stop(None)


async def child_on(name: str, port: int, lives: float, env: dict[str, str] | None = None) -> launcher.Child:
    """A child named ``name`` said to serve on ``port``: a process that lives
    ``lives`` seconds (the real service would have failed to bind)."""
    child = launcher.Child(name, f"services.{name}", port, env or {})
    sleep = f"import time; time.sleep({lives})"
    child.process = await asyncio.create_subprocess_exec(sys.executable, "-c", sleep)
    return child


async def test_another_service_answering_on_the_childs_port_is_not_the_child(memory_on_a_port: int) -> None:
    child = await child_on("router", memory_on_a_port, lives=1.5)
    with pytest.raises(launcher.StartFailed, match="router exited with code 0 during start-up"):
        await launcher.wait_healthy(child)


async def test_the_childs_own_service_answering_is_the_child_up(memory_on_a_port: int) -> None:
    child = await child_on("memory", memory_on_a_port, lives=30)
    try:
        await asyncio.wait_for(launcher.wait_healthy(child), 10)
    finally:
        assert child.process is not None
        child.process.kill()
        await child.process.wait()


@pytest.mark.parametrize("name", ["engine", "router", "threads", "memory"])
def test_the_health_name_checked_is_one_the_service_serves(name: str) -> None:
    server = importlib.import_module(f"services.{name}.server")
    assert launcher.HEALTH_SERVICES[name] == server.SERVICE_NAME
    assert sorted(launcher.HEALTH_SERVICES) == sorted(set(launcher.PROCESSES) - {"gateway"})


async def test_a_peers_healthz_on_the_gateways_port_is_not_the_gateway(peer_http_port: int) -> None:
    env = {"SWITCHBOARD_GATEWAY_LAUNCH_ID": "this-launch"}
    child = await child_on("gateway", peer_http_port, lives=1.5, env=env)
    with pytest.raises(launcher.StartFailed, match="gateway exited with code 0 during start-up"):
        await launcher.wait_healthy(child)


@pytest.mark.parametrize("launch_id", ["", "this-launch"])
def test_the_gateways_healthz_echoes_its_launch_id(launch_id: str) -> None:
    with TestClient(create_app(GatewaySettings(launch_id=launch_id))) as client:
        response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}
    assert response.headers.get(LAUNCH_ID_HEADER) == (launch_id or None)
