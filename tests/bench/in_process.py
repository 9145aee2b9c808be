"""The run benchmark's floor transport: the engine's calls to threads, memory
and router made on their servicers directly, in this process, with no network
and no serialisation, so the floor prices the run logic and domain code
alone. Their DomainErrors reach the engine as they are."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from services.engine.collaborators import Stubs
from services.shared.errors import DependencyUnavailable
from services.shared.identity import user_metadata
from switchboard.memory.v1 import (
    handoff_service_pb2_grpc,
    memory_service_pb2_grpc,
    pages_service_pb2_grpc,
    projects_service_pb2_grpc,
)
from switchboard.router.v1 import router_service_pb2_grpc
from switchboard.threads.v1 import threads_service_pb2_grpc

LocalMethod = Callable[[Any, str], Awaitable[Any]]


class LocalContext:
    """The little of a ServicerContext that servicers use: who calls."""

    def __init__(self, user: str) -> None:
        self._metadata = user_metadata(user)

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def time_remaining(self) -> float | None:
        return None


class LocalStub:
    """A service's stub in this process: each method, named as the stub's,
    calls the servicer's with the caller as its context. Without a servicer,
    every call is DependencyUnavailable."""

    def __init__(self, service: str, servicer: object | None) -> None:
        self._service = service
        self._servicer = servicer

    def __getattr__(self, name: str) -> LocalMethod:
        servicer_method = None if self._servicer is None else getattr(self._servicer, name)

        async def method(request: Any, user: str) -> Any:
            if servicer_method is None:
                raise DependencyUnavailable(f"no {self._service} service in this process")
            return await servicer_method(request, cast(Any, LocalContext(user)))

        setattr(self, name, method)  # looked up once per method
        return method


class InProcessTransport:
    """A ``services.engine.collaborators.Transport`` over the servicers'
    methods. Without ``projects``, a project check is DependencyUnavailable
    (the engine then leaves it to memory's own reads)."""

    def __init__(
        self,
        threads: threads_service_pb2_grpc.ThreadsServiceServicer,
        memory: memory_service_pb2_grpc.MemoryServiceServicer,
        pages: pages_service_pb2_grpc.PagesServiceServicer,
        handoff: handoff_service_pb2_grpc.HandoffServiceServicer,
        router: router_service_pb2_grpc.RouterServiceServicer,
        projects: projects_service_pb2_grpc.ProjectsServiceServicer | None = None,
    ) -> None:
        servicers = {
            "threads": threads,
            "memory": memory,
            "pages": pages,
            "handoff": handoff,
            "projects": projects,
            "router": router,
        }
        # Typed as the gRPC stubs they stand in for: the engine names the same methods.
        local = {name: cast(Any, LocalStub(name, servicer)) for name, servicer in servicers.items()}
        self.stubs = Stubs(**local)

    async def __call__(self, method: LocalMethod, request: Any, user: str) -> Any:
        return await method(request, user)
