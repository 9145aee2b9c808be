"""Projects: their context, import, live state and members."""

from __future__ import annotations

from pydantic import Field

from gateway import enums
from gateway.responses.base import NEXT_PAGE, Body
from gateway.responses.views import (
    computed,
    proto_model,
    short,
)
from switchboard.memory.v1 import memory_pb2, projects_pb2

# The project: context, import, live state.
ProjectContext = proto_model(memory_pb2.ProjectContext.DESCRIPTOR)
ImportItem = proto_model(
    memory_pb2.ImportItem.DESCRIPTOR,
    "ImportItem",
    outcome=short(enums.IMPORT_OUTCOMES),
)


class ProjectImport(Body):
    """What the import did with each file."""

    items: list[ImportItem] = Field(description="one per file sent, in the order sent")  # type: ignore[valid-type]


LiveStateEntry = proto_model(memory_pb2.LiveStateEntry.DESCRIPTOR)


class LiveStateList(Body):
    """A page of the project's unexpired live state, by agent id."""

    entries: list[LiveStateEntry] = Field(description="the entries of this page")  # type: ignore[valid-type]
    next_page_token: str = Field(description=NEXT_PAGE)


# Projects and their members.
Project = proto_model(
    projects_pb2.Project.DESCRIPTOR,
    "Project",
    drop=("caller_role",),
    note_policy=short(enums.NOTE_POLICIES),
    role=computed(
        str,
        "the caller's role in it (caller_role): " + enums.documented(enums.PROJECT_ROLES),
        lambda project: enums.json_name(enums.PROJECT_ROLES, project.caller_role),
    ),
)


class ProjectList(Body):
    """A page of the caller's projects: the personal one first, then by id."""

    projects: list[Project] = Field(description="the projects of this page, each with the caller's role")  # type: ignore[valid-type]
    next_page_token: str = Field(description=NEXT_PAGE)


ProjectMember = proto_model(
    projects_pb2.ProjectMember.DESCRIPTOR,
    "ProjectMember",
    role=short(enums.PROJECT_ROLES),
)


class ProjectMemberList(Body):
    """A page of a project's members, by user id."""

    members: list[ProjectMember] = Field(description="the members of this page")  # type: ignore[valid-type]
    next_page_token: str = Field(description=NEXT_PAGE)
