"""One live thread per agent, across processes: two threads-service processes on one database,
50 concurrent EnsureAgentThread calls for one agent split between them, make
exactly one live thread — the database decides, not process memory."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.launcher import free_port
from switchboard.threads.v1 import threads_pb2, threads_service_pb2_grpc
from switchboard.threads.v1 import threads_service_pb2 as pb
from tests.service.harness import as_user

ROOT = Path(__file__).resolve().parents[2]


async def wait_serving(port: int, process: subprocess.Popen[bytes]) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        for _ in range(300):
            assert process.poll() is None, "a threads process exited during start-up"
            try:
                reply = await health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(), timeout=1
                )
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.aio.AioRpcError:
                pass
            await asyncio.sleep(0.1)
    raise AssertionError(f"threads on :{port} never became healthy")


@pytest.fixture
async def two_processes(db_url: str, tmp_path: Path) -> AsyncIterator[list[int]]:
    ports = [free_port(), free_port()]
    processes = []
    for index, port in enumerate(ports):
        env = {
            **os.environ,
            "SWITCHBOARD_THREADS_PORT": str(port),
            "SWITCHBOARD_THREADS_DATABASE_URL": db_url,
            "SWITCHBOARD_DATA_DIR": str(tmp_path),
        }
        processes.append(
            subprocess.Popen(
                [sys.executable, "-m", "services.threads"],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        if index == 0:
            await wait_serving(port, processes[0])  # the first one migrates the shared database
    try:
        await wait_serving(ports[1], processes[1])
        yield ports
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            assert process.wait(30) == 0


async def test_fifty_concurrent_ensures_from_two_processes_make_one_thread(two_processes: list[int]) -> None:
    channels = [grpc.aio.insecure_channel(f"127.0.0.1:{port}") for port in two_processes]
    try:
        stubs = [threads_service_pb2_grpc.ThreadsServiceStub(channel) for channel in channels]
        await stubs[0].CreateAgent(pb.CreateAgentRequest(agent=threads_pb2.Agent(id="qa")), timeout=10)
        replies = await asyncio.gather(
            *(
                stubs[i % 2].EnsureAgentThread(
                    pb.EnsureAgentThreadRequest(target_agent_id="qa"), **as_user("u")
                )
                for i in range(50)
            )
        )
        assert len({reply.thread.id for reply in replies}) == 1
        assert sum(reply.created for reply in replies) == 1
    finally:
        for channel in channels:
            await channel.close()
