"""ProjectsService: proto <-> ProjectsDomain, nothing else."""

from __future__ import annotations

import grpc

from services.memory.projects.domain import ProjectsDomain, ProjectView, Role
from services.memory.projects.models import ProjectMemberRow
from services.shared.audit import Actor, AuditLog
from services.shared.identity import caller_role, caller_user
from services.shared.time import to_timestamp
from switchboard.memory.v1 import projects_pb2, projects_service_pb2, projects_service_pb2_grpc

pb = projects_service_pb2


def actor_of(context: grpc.aio.ServicerContext) -> Actor:
    """The verified caller, with the role the gateway vouched for."""
    return Actor(caller_user(context), caller_role(context))


def project_to_proto(view: ProjectView) -> projects_pb2.Project:
    project = view.project
    return projects_pb2.Project(
        id=project.id,
        display_name=project.display_name,
        owner_user_id=project.owner_user_id,
        personal=project.personal,
        note_policy=project.note_policy,  # type: ignore[arg-type]
        caller_role=int(view.role),  # type: ignore[arg-type]
        create_time=to_timestamp(project.create_time),
        update_time=to_timestamp(project.update_time),
    )


def member_to_proto(row: ProjectMemberRow) -> projects_pb2.ProjectMember:
    return projects_pb2.ProjectMember(
        project_id=row.project_id,
        user_id=row.user_id,
        role=row.role,  # type: ignore[arg-type]
        update_time=to_timestamp(row.update_time),
    )


class ProjectsServicer(projects_service_pb2_grpc.ProjectsServiceServicer):
    def __init__(self, projects: ProjectsDomain, audit: AuditLog) -> None:
        self._projects = projects
        self._audit = audit

    async def CreateProject(
        self, request: pb.CreateProjectRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateProjectResponse:
        p = request.project
        view = await self._projects.create(actor_of(context), p.id, p.display_name, p.note_policy)
        return pb.CreateProjectResponse(project=project_to_proto(view))

    async def GetProject(
        self, request: pb.GetProjectRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetProjectResponse:
        view = await self._projects.get(actor_of(context), request.id)
        return pb.GetProjectResponse(project=project_to_proto(view))

    async def ListProjects(
        self, request: pb.ListProjectsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListProjectsResponse:
        views, token = await self._projects.list_projects(
            actor_of(context), request.page_size, request.page_token
        )
        return pb.ListProjectsResponse(projects=[project_to_proto(v) for v in views], next_page_token=token)

    async def UpdateProject(
        self, request: pb.UpdateProjectRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpdateProjectResponse:
        p = request.project
        view = await self._projects.update(
            actor_of(context), p.id, p.display_name, p.note_policy, list(request.update_mask.paths)
        )
        return pb.UpdateProjectResponse(project=project_to_proto(view))

    async def ListProjectMembers(
        self, request: pb.ListProjectMembersRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListProjectMembersResponse:
        rows, token = await self._projects.members(
            actor_of(context), request.project_id, request.page_size, request.page_token
        )
        return pb.ListProjectMembersResponse(
            members=[member_to_proto(r) for r in rows], next_page_token=token
        )

    async def SetProjectMember(
        self, request: pb.SetProjectMemberRequest, context: grpc.aio.ServicerContext
    ) -> pb.SetProjectMemberResponse:
        m = request.member
        row = await self._projects.set_member(actor_of(context), m.project_id, m.user_id, m.role)
        return pb.SetProjectMemberResponse(member=member_to_proto(row))

    async def RemoveProjectMember(
        self, request: pb.RemoveProjectMemberRequest, context: grpc.aio.ServicerContext
    ) -> pb.RemoveProjectMemberResponse:
        await self._projects.remove_member(actor_of(context), request.project_id, request.user_id)
        return pb.RemoveProjectMemberResponse()

    async def CheckProjectAccess(
        self, request: pb.CheckProjectAccessRequest, context: grpc.aio.ServicerContext
    ) -> pb.CheckProjectAccessResponse:
        access = await self._projects.access(actor_of(context), request.project_id, Role.VIEWER)
        return pb.CheckProjectAccessResponse(project_id=access.project_id, role=int(access.role))  # type: ignore[arg-type]

    async def ListAuditEvents(
        self, request: pb.ListAuditEventsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListAuditEventsResponse:
        before = request.before if request.HasField("before") else None
        events, token = await self._audit.list(
            actor_of(context), request.page_size, request.page_token, before
        )
        return pb.ListAuditEventsResponse(events=events, next_page_token=token)
