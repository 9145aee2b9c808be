"""The run benchmark's floor transport: the engine's calls to threads, memory
and router made on their servicers directly, in this process, with no network
and no serialisation, so the floor prices the run logic and domain code
alone. Their DomainErrors reach the engine as they are."""

from __future__ import annotations

from typing import Any, cast

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


class LocalContext:
    """The little of a ServicerContext that servicers use: who calls."""

    def __init__(self, user: str) -> None:
        self._metadata = user_metadata(user)

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def time_remaining(self) -> float | None:
        return None


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
        self._servicers: dict[str, Any] = {
            "threads": threads,
            "memory": memory,
            "pages": pages,
            "handoff": handoff,
            "router": router,
        }
        if projects is not None:
            self._servicers["projects"] = projects

    async def __call__(self, service: str, method: str, request: object, user: str) -> Any:
        servicer = self._servicers.get(service)
        if servicer is None:
            raise DependencyUnavailable(f"no {service} service in this process")
        return await getattr(servicer, method)(request, cast(Any, LocalContext(user)))
