"""A run when another service is slow or gone, with real processes: the
router stopped (SIGSTOP: slow) or killed, memory killed, threads killed.
Router and memory are optional to a run — it goes on without automatic
skills or recall and says so with one notice per service; threads is not —
a run whose messages cannot be recorded is refused before any model call."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from services.shared.identity import user_metadata
from switchboard.engine.v1 import engine_pb2, engine_service_pb2, engine_service_pb2_grpc
from switchboard.threads.v1 import threads_service_pb2, threads_service_pb2_grpc
from tests.processes import child_env, free_ports, process, wait_grpc_serving

ROUTER_TIMEOUT = 1.0
SKILL = "meeting-notes-to-actions"


@dataclass
class System:
    processes: dict[str, asyncio.subprocess.Process]
    engine: engine_service_pb2_grpc.EngineServiceStub
    threads: threads_service_pb2_grpc.ThreadsServiceStub

    async def run(self, text: str = "Summarise our meeting") -> list[engine_pb2.RunEvent]:
        conversation = await self.threads.CreateConversation(
            threads_service_pb2.CreateConversationRequest(request_id=uuid.uuid4().hex),
            metadata=user_metadata("alice"),
            timeout=10,
        )
        request = engine_service_pb2.StartRunRequest(
            request_id=uuid.uuid4().hex,
            conversation_id=conversation.conversation.id,
            message=text,
            forced_skills=[SKILL],
        )
        stream = self.engine.StartRun(request, metadata=user_metadata("alice"), timeout=30)
        return [response.event async for response in stream]


@pytest.fixture
async def system(tmp_path: Path) -> AsyncIterator[System]:
    ports = free_ports("threads", "memory", "router", "engine")
    common = {
        "SWITCHBOARD_DATA_DIR": str(tmp_path / "data"),
        "SWITCHBOARD_MEMORY_EMBEDDER": "hashing",
        "SWITCHBOARD_ROUTER_EMBEDDER": "hashing",
        "SWITCHBOARD_ENGINE_ROUTER_TIMEOUT": str(ROUTER_TIMEOUT),
        **{f"SWITCHBOARD_{name.upper()}_PORT": str(port) for name, port in ports.items()},
        **{f"SWITCHBOARD_ENGINE_{name.upper()}_ADDRESS": f"127.0.0.1:{ports[name]}" for name in ports},
    }
    async with AsyncExitStack() as stack:
        processes = {}
        for name in ports:
            log = tmp_path / f"{name}.log"
            argv = [sys.executable, "-m", f"services.{name}"]
            processes[name] = await stack.enter_async_context(process(argv, child_env(common), log))
            await wait_grpc_serving(f"127.0.0.1:{ports[name]}", log)
        engine_channel = await stack.enter_async_context(
            grpc.aio.insecure_channel(f"127.0.0.1:{ports['engine']}")
        )
        threads_channel = await stack.enter_async_context(
            grpc.aio.insecure_channel(f"127.0.0.1:{ports['threads']}")
        )
        yield System(
            processes,
            engine_service_pb2_grpc.EngineServiceStub(engine_channel),
            threads_service_pb2_grpc.ThreadsServiceStub(threads_channel),
        )
        # A stopped process must be able to hear its SIGTERM.
        for child in processes.values():
            if child.returncode is None:
                child.send_signal(signal.SIGCONT)


def kinds(events: list[engine_pb2.RunEvent]) -> list[str]:
    return [str(event.WhichOneof("kind")) for event in events]


def notices(events: list[engine_pb2.RunEvent], code: str) -> list[engine_pb2.Notice]:
    return [e.notice for e in events if e.WhichOneof("kind") == "notice" and e.notice.code == code]


async def kill(child: asyncio.subprocess.Process) -> None:
    child.kill()
    await child.wait()


@pytest.mark.timeout(120)
async def test_a_run_goes_on_without_router_or_memory_and_is_refused_without_threads(system: System) -> None:
    healthy = await system.run()
    assert kinds(healthy)[-1] == "final" and healthy[-1].final.status == engine_pb2.RUN_STATUS_DONE
    assert [e.skill_used.skill.name for e in healthy if e.WhichOneof("kind") == "skill_used"] == [SKILL]
    assert not notices(healthy, "ROUTER_UNAVAILABLE") and not notices(healthy, "MEMORY_UNAVAILABLE")

    # Router slow: stopped, so every routing call waits for its deadline.
    router = system.processes["router"]
    router.send_signal(signal.SIGSTOP)
    started = time.monotonic()
    slow = await system.run()
    elapsed = time.monotonic() - started
    router.send_signal(signal.SIGCONT)
    assert slow[-1].final.status == engine_pb2.RUN_STATUS_DONE, kinds(slow)
    assert len(notices(slow, "ROUTER_UNAVAILABLE")) == 1  # one notice for both routing calls
    assert "DEADLINE_EXCEEDED" in notices(slow, "ROUTER_UNAVAILABLE")[0].message
    assert "skill_used" not in kinds(slow)
    assert slow[-1].final.model == "switchboard-offline-balanced"  # the fallback model
    assert slow[-1].final.text  # an answer all the same
    # The routing calls run side by side: the run waits one deadline, not two.
    assert elapsed < ROUTER_TIMEOUT + 2.5

    # Router gone.
    await kill(router)
    down = await system.run()
    assert down[-1].final.status == engine_pb2.RUN_STATUS_DONE, kinds(down)
    assert len(notices(down, "ROUTER_UNAVAILABLE")) == 1
    assert "UNAVAILABLE" in notices(down, "ROUTER_UNAVAILABLE")[0].message

    # Memory gone too: no recall, settings or instruction page, one notice.
    await kill(system.processes["memory"])
    no_memory = await system.run()
    assert no_memory[-1].final.status == engine_pb2.RUN_STATUS_DONE, kinds(no_memory)
    assert len(notices(no_memory, "MEMORY_UNAVAILABLE")) == 1
    assert len(notices(no_memory, "ROUTER_UNAVAILABLE")) == 1
    run = await system.engine.GetRun(
        engine_service_pb2.GetRunRequest(run_id=no_memory[0].run_id),
        metadata=user_metadata("alice"),
        timeout=10,
    )
    assert run.run.status == engine_pb2.RUN_STATUS_DONE and run.run.model == "switchboard-offline-balanced"

    # Threads gone: the run cannot be recorded, so it is refused at once,
    # with the cause, before any model call and without a run record.
    conversation = await system.threads.CreateConversation(
        threads_service_pb2.CreateConversationRequest(request_id=uuid.uuid4().hex),
        metadata=user_metadata("alice"),
        timeout=10,
    )
    await kill(system.processes["threads"])
    request = engine_service_pb2.StartRunRequest(
        request_id=uuid.uuid4().hex, conversation_id=conversation.conversation.id, message="hello"
    )
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        async for _ in system.engine.StartRun(request, metadata=user_metadata("alice"), timeout=30):
            pass
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "threads" in (refused.value.details() or "")
    listed = await system.engine.ListRuns(
        engine_service_pb2.ListRunsRequest(conversation_id=conversation.conversation.id),
        metadata=user_metadata("alice"),
        timeout=10,
    )
    assert list(listed.runs) == []
    # And the engine itself still serves what it holds.
    again = await system.engine.GetRun(
        engine_service_pb2.GetRunRequest(run_id=healthy[0].run_id),
        metadata=user_metadata("alice"),
        timeout=10,
    )
    assert again.run.status == engine_pb2.RUN_STATUS_DONE
