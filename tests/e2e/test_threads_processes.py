"""One live thread per agent, across processes: two threads-service processes on one database,
50 concurrent EnsureAgentThread calls for one agent split between them, make
exactly one live thread — the database decides, not process memory."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import grpc
import pytest

from switchboard.threads.v1 import threads_pb2, threads_service_pb2_grpc
from switchboard.threads.v1 import threads_service_pb2 as pb
from tests.processes import child_env, free_port, process, wait_grpc_serving
from tests.service.harness import as_user


@pytest.fixture
async def two_processes(db_url: str, tmp_path: Path) -> AsyncIterator[list[int]]:
    ports = [free_port(), free_port()]
    children: list[asyncio.subprocess.Process] = []
    async with AsyncExitStack() as stack:
        for index, port in enumerate(ports):
            env = {
                "SWITCHBOARD_THREADS_PORT": str(port),
                "SWITCHBOARD_THREADS_DATABASE_URL": db_url,
                "SWITCHBOARD_DATA_DIR": str(tmp_path),
            }
            log = tmp_path / f"threads-{index}.log"
            argv = [sys.executable, "-m", "services.threads"]
            children.append(await stack.enter_async_context(process(argv, child_env(env), log)))
            # The first one migrates the shared database.
            await wait_grpc_serving(f"127.0.0.1:{port}", log)
        yield ports
        for child in children:
            child.send_signal(signal.SIGTERM)
        for child in children:
            assert await asyncio.wait_for(child.wait(), 30) == 0


async def test_fifty_concurrent_ensures_from_two_processes_make_one_thread(two_processes: list[int]) -> None:
    channels = [grpc.aio.insecure_channel(f"127.0.0.1:{port}") for port in two_processes]
    try:
        stubs = [threads_service_pb2_grpc.ThreadsServiceStub(channel) for channel in channels]
        await stubs[0].CreateAgent(pb.CreateAgentRequest(agent=threads_pb2.Agent(id="qa")), **as_user("u"))
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
