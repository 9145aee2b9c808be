"""The four gRPC services in this process, each on port 0 with its own database,
talking to each other over real sockets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

import grpc

from services.engine.server import build_server as build_engine
from services.engine.settings import EngineSettings
from services.memory.server import build_server as build_memory
from services.memory.settings import MemorySettings
from services.router.server import build_server as build_router
from services.router.settings import RouterSettings
from services.shared.bootstrap import RunningService
from services.threads.server import build_server as build_threads
from services.threads.settings import ThreadsSettings
from switchboard.engine.v1 import engine_service_pb2_grpc, schedules_service_pb2_grpc
from switchboard.memory.v1 import (
    handoff_service_pb2_grpc,
    memory_service_pb2_grpc,
    pages_service_pb2_grpc,
    projects_service_pb2_grpc,
)
from switchboard.router.v1 import router_service_pb2_grpc
from switchboard.threads.v1 import threads_service_pb2, threads_service_pb2_grpc
from tests.conftest import DatabaseFactory
from tests.service.harness import as_user, running


@dataclass
class System:
    engine: engine_service_pb2_grpc.EngineServiceStub
    threads: threads_service_pb2_grpc.ThreadsServiceStub
    memory: memory_service_pb2_grpc.MemoryServiceStub
    pages: pages_service_pb2_grpc.PagesServiceStub
    handoff: handoff_service_pb2_grpc.HandoffServiceStub
    projects: projects_service_pb2_grpc.ProjectsServiceStub
    router: router_service_pb2_grpc.RouterServiceStub
    schedules: schedules_service_pb2_grpc.ScheduleServiceStub
    database_urls: dict[str, str]
    services: dict[str, RunningService]


@asynccontextmanager
async def databases(make_database: DatabaseFactory, names: Sequence[str]) -> AsyncIterator[dict[str, str]]:
    """The databases of ``names``, made and given back all at once: on
    PostgreSQL each is a connection's work (a pooled database emptied for the
    next test), and four in a row cost each test four round trips of it."""
    blocks = [make_database(name) for name in names]
    entered = await asyncio.gather(*(block.__aenter__() for block in blocks), return_exceptions=True)
    try:
        failed = [e for e in entered if isinstance(e, BaseException)]
        if failed:
            raise failed[0]
        yield dict(zip(names, cast(list[str], entered), strict=True))
    finally:
        await asyncio.gather(
            *(
                block.__aexit__(None, None, None)
                for block, url in zip(blocks, entered, strict=True)
                if not isinstance(url, BaseException)
            )
        )


@asynccontextmanager
async def system(
    make_database: DatabaseFactory,
    router_settings: dict[str, Any] | None = None,
    threads_settings: dict[str, Any] | None = None,
    memory_settings: dict[str, Any] | None = None,
    **engine_settings: Any,
) -> AsyncIterator[System]:
    """Hashing embedders: fast, deterministic, and no model to load per test."""
    async with AsyncExitStack() as stack:
        urls = await stack.enter_async_context(
            databases(make_database, ("threads", "memory", "router", "engine"))
        )
        memory, memory_channel = await stack.enter_async_context(
            running(
                build_memory,
                MemorySettings(
                    port=0, database_url=urls["memory"], **{"embedder": "hashing", **(memory_settings or {})}
                ),
            )
        )
        # Threads asks memory who is a member of an agent's project.
        threads, threads_channel = await stack.enter_async_context(
            running(
                build_threads,
                ThreadsSettings(
                    port=0,
                    database_url=urls["threads"],
                    **{"memory_address": f"127.0.0.1:{memory.port}", **(threads_settings or {})},
                ),
            )
        )
        router, router_channel = await stack.enter_async_context(
            running(
                build_router,
                RouterSettings(
                    port=0, database_url=urls["router"], **{"embedder": "hashing", **(router_settings or {})}
                ),
            )
        )
        settings = EngineSettings(
            port=0,
            database_url=urls["engine"],
            threads_address=f"127.0.0.1:{threads.port}",
            memory_address=f"127.0.0.1:{memory.port}",
            router_address=f"127.0.0.1:{router.port}",
            # The four services and the test share one event loop here, on a
            # machine shared with another test worker: the 1 s production
            # routing deadline is not what these tests check, and a busy loop
            # can miss it (a test of that deadline sets its own).
            **{"router_timeout": 10.0, **engine_settings},
        )
        engine, engine_channel = await stack.enter_async_context(running(build_engine, settings))
        yield System(
            engine=engine_service_pb2_grpc.EngineServiceStub(engine_channel),
            threads=threads_service_pb2_grpc.ThreadsServiceStub(threads_channel),
            memory=memory_service_pb2_grpc.MemoryServiceStub(memory_channel),
            pages=pages_service_pb2_grpc.PagesServiceStub(memory_channel),
            handoff=handoff_service_pb2_grpc.HandoffServiceStub(memory_channel),
            projects=projects_service_pb2_grpc.ProjectsServiceStub(memory_channel),
            router=router_service_pb2_grpc.RouterServiceStub(router_channel),
            schedules=schedules_service_pb2_grpc.ScheduleServiceStub(engine_channel),
            database_urls=urls,
            services={"threads": threads, "memory": memory, "router": router, "engine": engine},
        )


async def collect(call: grpc.aio.UnaryStreamCall) -> list[Any]:
    return [response.event async for response in call]


async def conversation(sb: System, user: str = "alice") -> str:
    """A new conversation of ``user``'s, by id."""
    created = await sb.threads.CreateConversation(
        threads_service_pb2.CreateConversationRequest(), **as_user(user)
    )
    return created.conversation.id
