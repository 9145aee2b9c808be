"""Project membership, asked of memory's ProjectsService (the one source of
truth) with the caller's own identity: who may read an agent's thread, ask
it, or create an agent in a project (services/threads/access.py decides).
Nothing is cached: a membership change counts from the next call."""

from __future__ import annotations

import grpc

from services.shared.audit import Actor
from services.shared.clients import call
from services.shared.errors import DependencyUnavailable, InvalidArgument
from services.shared.projects import ProjectRole
from services.threads.access import ProjectGrant
from switchboard.memory.v1 import projects_service_pb2, projects_service_pb2_grpc

_ROLES = {role.value: role for role in ProjectRole}


class MemoryProjects:
    """A ProjectDirectory over memory's ProjectsService."""

    def __init__(self, channel: grpc.aio.Channel, timeout: float) -> None:
        """``channel``: the threads service's one channel to memory (its owner closes it)."""
        self._stub = projects_service_pb2_grpc.ProjectsServiceStub(channel)
        self._timeout = timeout

    async def check(self, actor: Actor, project_id: str) -> ProjectGrant | None:
        """``actor``'s role in the project; None when not a member (memory's
        NOT_FOUND, also for a missing project)."""
        request = projects_service_pb2.CheckProjectAccessRequest(project_id=project_id)
        try:
            response = await call(
                self._stub.CheckProjectAccess,
                request,
                timeout=self._timeout,
                user=actor.user,
                role=actor.role,
            )
        except grpc.aio.AioRpcError as error:
            code = error.code()
            if code == grpc.StatusCode.NOT_FOUND:
                return None
            if code == grpc.StatusCode.INVALID_ARGUMENT:
                raise InvalidArgument(error.details() or "invalid project id", field="project_id") from error
            raise DependencyUnavailable(
                f"memory could not check project {project_id!r}: {code.name} {error.details() or ''}".strip()
            ) from error
        role = _ROLES.get(int(response.role), ProjectRole.NONE)
        return ProjectGrant(response.project_id or project_id, role) if role else None
