"""The one-host stack of deploy/compose.yaml, without Docker: each container's
command and environment, taken from the compose file, runs here as a process
on PostgreSQL — the migrate one-shot first, then the services with migrations
off, checked healthy by the compose health checks, then one run through the
gateway. What changes from the file: ports (free ones), addresses (loopback),
database URLs (fresh test databases) and no trace collector."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from contextlib import AsyncExitStack
from pathlib import Path

import grpc
import httpx
import pytest
import yaml
from a2a.types import a2a_pb2, a2a_pb2_grpc

from tests.databases import postgres_database
from tests.e2e.sse import SseEvent, read_events
from tests.processes import child_env, free_ports, process

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
GRPC_SERVICES = ("threads", "memory", "router", "engine")
TOKEN = "compose-token"


def service_env(name: str, overrides: dict[str, str]) -> dict[str, str]:
    """The container's environment from compose.yaml, localised by ``overrides``."""
    env = {key: str(value) for key, value in COMPOSE["services"][name].get("environment", {}).items()}
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)  # no collector here
    return child_env({**env, **overrides})


def localise(command: list[str], ports: dict[str, int]) -> list[str]:
    """A health-check command with the container's port swapped for ours."""
    default_ports = {"50051": "engine", "50052": "router", "50053": "threads", "50054": "memory"}
    default_ports["8080"] = "gateway"
    return [
        re.sub(r"127\.0\.0\.1:(\d+)", lambda m: f"127.0.0.1:{ports[default_ports[m[1]]]}", part)
        for part in command
    ]


async def healthy(name: str, ports: dict[str, int], env: dict[str, str], log: Path) -> None:
    """Runs the compose health check until it passes (as Docker would)."""
    check = localise(COMPOSE["services"][name]["healthcheck"]["test"][1:], ports)
    for _ in range(120):
        done = await asyncio.create_subprocess_exec(
            *check, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        if await done.wait() == 0:
            return
        await asyncio.sleep(0.5)
    raise AssertionError(f"{name} never became healthy:\n{log.read_text()[-3000:]}")


@pytest.mark.postgres
async def test_the_compose_stack_runs_as_processes_on_postgres(tmp_path: Path) -> None:
    ports = free_ports(*GRPC_SERVICES, "gateway", "a2a")
    async with AsyncExitStack() as stack:
        urls = {
            name: await stack.enter_async_context(postgres_database(f"sbcompose_{name}"))
            for name in GRPC_SERVICES
        }
        databases = {f"SWITCHBOARD_{name.upper()}_DATABASE_URL": url for name, url in urls.items()}

        # The migrate one-shot: its entrypoint is `sh -c`, its command the script.
        migrate = COMPOSE["services"]["migrate"]
        assert migrate["entrypoint"] == ["sh", "-c"]
        migrated = await asyncio.create_subprocess_exec(
            "sh", "-c", migrate["command"][0], env=service_env("migrate", databases),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        output, _ = await migrated.communicate()
        assert migrated.returncode == 0, output.decode()[-3000:]

        addresses = {
            "SWITCHBOARD_ENGINE_THREADS_ADDRESS": f"127.0.0.1:{ports['threads']}",
            "SWITCHBOARD_ENGINE_MEMORY_ADDRESS": f"127.0.0.1:{ports['memory']}",
            "SWITCHBOARD_ENGINE_ROUTER_ADDRESS": f"127.0.0.1:{ports['router']}",
            "SWITCHBOARD_GATEWAY_ENGINE_ADDRESS": f"127.0.0.1:{ports['engine']}",
            "SWITCHBOARD_GATEWAY_THREADS_ADDRESS": f"127.0.0.1:{ports['threads']}",
            "SWITCHBOARD_GATEWAY_TOKENS": f"{TOKEN}:alice",
            "SWITCHBOARD_GATEWAY_A2A_GRPC_PORT": str(ports["a2a"]),
            # What `${SWITCHBOARD_IDENTITY_KEY:?...}` takes from the shell.
            "SWITCHBOARD_IDENTITY_KEY": os.environ["SWITCHBOARD_IDENTITY_KEY"],
        }
        # Every service serves /metrics on the one port Prometheus scrapes, each
        # in a container of its own; here they share a host, so each gets its own.
        metrics_ports = free_ports(*GRPC_SERVICES)
        assert scrape_port("gateway") == 8080  # the gateway serves /metrics beside its API
        for name in GRPC_SERVICES:
            variable = f"SWITCHBOARD_{name.upper()}_METRICS_PORT"
            assert COMPOSE["services"][name]["environment"][variable] == str(scrape_port(name))
        envs: dict[str, dict[str, str]] = {}
        for name in (*GRPC_SERVICES, "gateway"):
            overrides = {**databases, **addresses, f"SWITCHBOARD_{name.upper()}_PORT": str(ports[name])}
            if name in metrics_ports:
                overrides[f"SWITCHBOARD_{name.upper()}_METRICS_PORT"] = str(metrics_ports[name])
            envs[name] = service_env(name, overrides)
            argv = [sys.executable, "-m", *COMPOSE["services"][name]["command"]]
            await stack.enter_async_context(process(argv, envs[name], tmp_path / f"{name}.log"))
        for name in (*GRPC_SERVICES, "gateway"):
            await healthy(name, ports, envs[name], tmp_path / f"{name}.log")

        # Migrations off in every service: the one-shot's schema is what they run on.
        events = await asyncio.to_thread(one_run, ports["gateway"])
        assert events[-1].event == "final", [event.event for event in events]
        # A2A's gRPC binding is served beside the API: an unknown task is NOT_FOUND.
        assert await a2a_grpc_refusal(ports["a2a"]) == grpc.StatusCode.NOT_FOUND
        # What Prometheus scrapes is served, the engine's run among it.
        scraped = {
            name: metrics_of(f"http://127.0.0.1:{port}/metrics") for name, port in metrics_ports.items()
        }
        scraped["gateway"] = metrics_of(f"http://127.0.0.1:{ports['gateway']}/metrics")
        assert 'switchboard_runs_total{status="done"} 1.0' in scraped["engine"]
        assert all("grpc_server_handled_total{" in scraped[name] for name in GRPC_SERVICES)
        assert "switchboard_sse_clients" in scraped["gateway"]


async def a2a_grpc_refusal(port: int) -> grpc.StatusCode:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        try:
            await stub.GetTask(
                a2a_pb2.GetTaskRequest(id="no-such-task", tenant="no-such-agent"),
                metadata=(("authorization", f"Bearer {TOKEN}"),),
                timeout=10,
            )
        except grpc.aio.AioRpcError as error:
            return error.code()
    return grpc.StatusCode.OK


def scrape_port(job: str) -> int:
    """The port deploy/prometheus.yml scrapes the compose service ``job`` on."""
    prometheus = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
    (config,) = [c for c in prometheus["scrape_configs"] if c["job_name"] == job]
    ((target,),) = [group["targets"] for group in config["static_configs"]]
    host, _, port = target.partition(":")
    assert host == job and job in COMPOSE["services"], target
    return int(port)


def metrics_of(url: str) -> str:
    response = httpx.get(url, timeout=10)
    assert response.status_code == 200, url
    return response.text


def one_run(port: int) -> list[SseEvent]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30) as client:
        created = client.post("/api/agent/conversations", json={})
        assert created.status_code == 201, created.text
        url = f"/api/agent/conversations/{created.json()['id']}/messages"
        with client.stream("POST", url, json={"message": "hello"}) as response:
            assert response.status_code == 200
            return list(read_events(response))
