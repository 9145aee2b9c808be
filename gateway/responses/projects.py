"""Projects: their context, import, live state and members."""

from __future__ import annotations

from pydantic import Field

from gateway import enums
from gateway.responses.base import NEXT_PAGE, Body
from gateway.responses.views import (
    ProtoView,
    computed,
    short,
)
from switchboard.memory.v1 import memory_pb2, projects_pb2


# The project: context, import, live state.
class ProjectContext(ProtoView, proto=memory_pb2.ProjectContext):
    pass


class ImportItem(ProtoView, proto=memory_pb2.ImportItem):
    outcome: str = short(enums.IMPORT_OUTCOMES)


class ProjectImport(Body):
    """What the import did with each file."""

    items: list[ImportItem] = Field(description="one per file sent, in the order sent")


class LiveStateEntry(ProtoView, proto=memory_pb2.LiveStateEntry):
    pass


class LiveStateList(Body):
    """A page of the project's unexpired live state, by agent id."""

    entries: list[LiveStateEntry] = Field(description="the entries of this page")
    next_page_token: str = Field(description=NEXT_PAGE)


# Projects and their members.
class Project(ProtoView, proto=projects_pb2.Project, drop=("caller_role",)):
    note_policy: str = short(enums.NOTE_POLICIES)
    role: str = computed(
        "the caller's role in it (caller_role): " + enums.documented(enums.PROJECT_ROLES),
        lambda project: enums.json_name(enums.PROJECT_ROLES, project.caller_role),
    )


class ProjectList(Body):
    """A page of the caller's projects: the personal one first, then by id."""

    projects: list[Project] = Field(description="the projects of this page, each with the caller's role")
    next_page_token: str = Field(description=NEXT_PAGE)


class ProjectMember(ProtoView, proto=projects_pb2.ProjectMember):
    role: str = short(enums.PROJECT_ROLES)


class ProjectMemberList(Body):
    """A page of a project's members, by user id."""

    members: list[ProjectMember] = Field(description="the members of this page")
    next_page_token: str = Field(description=NEXT_PAGE)
