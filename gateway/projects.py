"""Projects, the unit of sharing, and their members: the caller's projects,
one project with the caller's role, its settings, and who may read or write
it. The memory service's ProjectsService decides: a project the caller is not
a member of is 404 exactly like a missing one, a write the caller's role does
not allow is 403, and "default" or "personal" names the caller's personal
project."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Request, Response
from google.protobuf.field_mask_pb2 import FieldMask

from gateway import deps, params, responses
from gateway.deps import User, rpc
from gateway.enums import NOTE_POLICIES, PROJECT_ROLES
from gateway.errors import ApiError
from gateway.params import PageSize, PageToken
from gateway.schemas import PROJECT_ID_PATTERN, CreateProjectBody, ProjectMemberBody, UpdateProjectBody
from services.shared.projects import MAX_PROJECT_ID_CHARS
from switchboard.memory.v1 import projects_pb2, projects_service_pb2

router = responses.ApiRouter(prefix="/api/agent")

# A project's id in a path: letters, digits, ".", "_" and "-", 1 to 128
# characters ("personal" or "default": the caller's personal project).
ProjectIdPath = Annotated[
    str, Path(min_length=1, max_length=MAX_PROJECT_ID_CHARS, pattern=PROJECT_ID_PATTERN)
]
# A member is a user id as the tokens name it: one line of text (as for an agent's members).
MemberId = params.Name


@router.get("/projects", tags=["projects"])
async def list_projects(
    request: Request, user: User, page_size: PageSize = 50, page_token: PageToken = ""
) -> responses.ProjectList:
    """The caller's projects, the personal one first, each with the caller's role."""
    response = await rpc(
        request,
        deps.projects(request).ListProjects,
        projects_service_pb2.ListProjectsRequest(page_size=page_size, page_token=page_token),
        user,
    )
    return responses.ProjectList(
        projects=[responses.Project.from_proto(p) for p in response.projects],
        next_page_token=response.next_page_token,
    )


@router.post("/projects", status_code=201, tags=["projects"])
async def create_project(body: CreateProjectBody, request: Request, user: User) -> responses.Project:
    """Creates a project owned by the caller; 409 when its id is taken."""
    project = projects_pb2.Project(id=body.id, display_name=body.display_name)
    if body.note_policy is not None:
        project.note_policy = NOTE_POLICIES.number(body.note_policy)
    response = await rpc(
        request,
        deps.projects(request).CreateProject,
        projects_service_pb2.CreateProjectRequest(project=project),
        user,
        # A retry after a lost answer would find the id taken (409): not retried.
        idempotent=False,
    )
    return responses.Project.from_proto(response.project)


@router.get("/projects/{project_id}", tags=["projects"])
async def get_project(project_id: ProjectIdPath, request: Request, user: User) -> responses.Project:
    """One project the caller is a member of, with the caller's role."""
    response = await rpc(
        request,
        deps.projects(request).GetProject,
        projects_service_pb2.GetProjectRequest(id=project_id),
        user,
    )
    return responses.Project.from_proto(response.project)


@router.patch("/projects/{project_id}", tags=["projects"])
async def update_project(
    project_id: ProjectIdPath, body: UpdateProjectBody, request: Request, user: User
) -> responses.Project:
    """Renames the project or changes its note policy (owners only); only
    the fields present are written."""
    fields = body.model_dump(exclude_none=True)
    if not fields:
        raise ApiError(400, "INVALID_ARGUMENT", "give at least one field to change")
    project = projects_pb2.Project(id=project_id, display_name=body.display_name or "")
    if body.note_policy is not None:
        project.note_policy = NOTE_POLICIES.number(body.note_policy)
    response = await rpc(
        request,
        deps.projects(request).UpdateProject,
        projects_service_pb2.UpdateProjectRequest(
            project=project, update_mask=FieldMask(paths=sorted(fields))
        ),
        user,
    )
    return responses.Project.from_proto(response.project)


@router.get("/projects/{project_id}/members", tags=["projects"])
async def list_project_members(
    project_id: ProjectIdPath,
    request: Request,
    user: User,
    page_size: PageSize = 50,
    page_token: PageToken = "",
) -> responses.ProjectMemberList:
    """The project's members, by user id; every member may read them."""
    response = await rpc(
        request,
        deps.projects(request).ListProjectMembers,
        projects_service_pb2.ListProjectMembersRequest(
            project_id=project_id, page_size=page_size, page_token=page_token
        ),
        user,
    )
    return responses.ProjectMemberList(
        members=[responses.ProjectMember.from_proto(m) for m in response.members],
        next_page_token=response.next_page_token,
    )


@router.put("/projects/{project_id}/members/{user_id}", tags=["projects"])
async def set_project_member(
    project_id: ProjectIdPath, user_id: MemberId, body: ProjectMemberBody, request: Request, user: User
) -> responses.ProjectMember:
    """Adds a member or changes a member's role (owners only). A personal
    project has no other member, and the last owner stays owner (409)."""
    response = await rpc(
        request,
        deps.projects(request).SetProjectMember,
        projects_service_pb2.SetProjectMemberRequest(
            member=projects_pb2.ProjectMember(
                project_id=project_id, user_id=user_id, role=PROJECT_ROLES.number(body.role)
            )
        ),
        user,
    )
    return responses.ProjectMember.from_proto(response.member)


@router.delete("/projects/{project_id}/members/{user_id}", status_code=204, tags=["projects"])
async def remove_project_member(
    project_id: ProjectIdPath, user_id: MemberId, request: Request, user: User
) -> Response:
    """Removes a member: an owner removes anyone, a member only itself (it
    leaves). The last owner cannot leave (409)."""
    await rpc(
        request,
        deps.projects(request).RemoveProjectMember,
        projects_service_pb2.RemoveProjectMemberRequest(project_id=project_id, user_id=user_id),
        user,
    )
    return Response(status_code=204)
