"""An agent's live-state entry ("what it is doing now"), read from memory's
MemoryService with the caller's own identity, for the agent's export
(services/threads/export.py). Memory decides who may read a project's live
state: the export of someone who may read the agent's thread but is no
member of its project carries none."""

from __future__ import annotations

import grpc

from services.shared.audit import Actor
from services.shared.clients import call
from services.shared.errors import DependencyUnavailable
from switchboard.memory.v1 import memory_pb2, memory_service_pb2, memory_service_pb2_grpc

# Entries per ListLiveState page (memory's largest).
PAGE_SIZE = 500


class MemoryLiveState:
    """A LiveStateReader over memory's MemoryService."""

    def __init__(self, channel: grpc.aio.Channel, timeout: float) -> None:
        """``channel``: the threads service's one channel to memory (its owner closes it)."""
        self._stub = memory_service_pb2_grpc.MemoryServiceStub(channel)
        self._timeout = timeout

    async def entry(self, actor: Actor, project_id: str, agent_id: str) -> memory_pb2.LiveStateEntry | None:
        """``agent_id``'s unexpired entry in the project; None when it has
        none, or when ``actor`` may not read the project (memory's NOT_FOUND)."""
        token = ""
        while True:
            request = memory_service_pb2.ListLiveStateRequest(
                project_id=project_id, page_size=PAGE_SIZE, page_token=token
            )
            try:
                response = await call(
                    self._stub.ListLiveState,
                    request,
                    timeout=self._timeout,
                    user=actor.user,
                    role=actor.role,
                )
            except grpc.aio.AioRpcError as error:
                if error.code() == grpc.StatusCode.NOT_FOUND:
                    return None
                raise DependencyUnavailable(
                    f"memory could not read project {project_id!r}'s live state: "
                    f"{error.code().name} {error.details() or ''}".strip()
                ) from error
            page: memory_service_pb2.ListLiveStateResponse = response
            for entry in page.entries:
                if entry.agent_id == agent_id:
                    return entry
            token = page.next_page_token
            if not token:
                return None
