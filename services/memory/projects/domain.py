"""Who may do what in a project, and the changes of projects and members.

Every read or write of a project's notes, context or live state starts with
``ProjectsDomain.access``: the project a request names, resolved for the
caller, and the caller's role, checked against what the call needs. A project
the caller is not a member of is NOT_FOUND, exactly like a missing one; a
member whose role is too low gets PERMISSION_DENIED with the reason.

A request naming "", "default" or "personal" reaches the caller's personal
project, created on first use. Any other project is created first
(CreateProject): a name nobody created is NOT_FOUND exactly like another
user's project, so no answer tells the two apart."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from services.memory.projects.models import MemoryAuditEvent, ProjectMemberRow, ProjectRow
from services.memory.projects.repository import ProjectsRepository
from services.shared.audit import Actor, new_event
from services.shared.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    TooLarge,
)
from services.shared.masks import masked_fields
from services.shared.pagination import Cursor, as_text, page_of, page_request
from services.shared.projects import (
    MAX_PROJECT_ID_CHARS,
    PERSONAL_PREFIX,
    PROJECT_ID,
    ProjectRole,
    is_personal_name,
    personal_project_id,
    role_phrase,
)
from services.shared.time import aware, utcnow

# Callers acting for several users (the threads service's handoff calls) are
# not users: membership does not apply to them.
SERVICE_PREFIX = "service:"
MAX_DISPLAY_NAME_CHARS = 200
MAX_USER_ID_CHARS = 128
PROJECT_PATHS = frozenset({"display_name", "note_policy"})


# Each role includes the ones below it (the contract's ProjectRole).
Role = ProjectRole


ROLE_NAMES = {Role.VIEWER: "viewer", Role.EDITOR: "editor", Role.OWNER: "owner"}
NOTE_POLICIES = frozenset({1, 2})  # review, auto


@dataclass(frozen=True)
class Access:
    """A project resolved for a caller: its id and the caller's role."""

    project_id: str
    role: Role
    user: str
    note_policy: int = 1


@dataclass(frozen=True)
class ProjectView:
    project: ProjectRow
    role: Role


def check_project_id(project_id: str, field: str = "project_id") -> str:
    value = project_id.strip()
    if len(value) > MAX_PROJECT_ID_CHARS:
        raise TooLarge(f"{field} is longer than {MAX_PROJECT_ID_CHARS} characters", field=field)
    if not PROJECT_ID.match(value):
        raise InvalidArgument(
            f"{field} {value!r} is not 1 to 128 letters, digits, '.', '_' or '-'", field=field
        )
    return value


def _user_id(user_id: str) -> str:
    user = user_id.strip()
    if not user:
        raise InvalidArgument("user_id is required", field="user_id")
    if len(user) > MAX_USER_ID_CHARS:
        raise TooLarge(f"user_id is longer than {MAX_USER_ID_CHARS} characters", field="user_id")
    return user


def _display_name(name: str) -> str:
    value = name.strip()
    if not value:
        raise InvalidArgument("display_name must not be empty", field="project.display_name")
    if len(value) > MAX_DISPLAY_NAME_CHARS:
        raise TooLarge(
            f"display_name is longer than {MAX_DISPLAY_NAME_CHARS} characters", field="project.display_name"
        )
    return value


def _role(value: int) -> Role:
    if value not in (Role.VIEWER, Role.EDITOR, Role.OWNER):
        raise InvalidArgument("role must be viewer, editor or owner", field="member.role")
    return Role(value)


def _policy(value: int) -> int:
    if value == 0:
        return 1
    if value not in NOTE_POLICIES:
        raise InvalidArgument(f"note_policy {value} is not a known policy", field="project.note_policy")
    return value


def _normalised(project: ProjectRow) -> ProjectRow:
    project.create_time, project.update_time = aware(project.create_time), aware(project.update_time)
    return project


class ProjectsDomain:
    def __init__(self, repository: ProjectsRepository) -> None:
        self._repo = repository

    # Access: every project-scoped call goes through here

    async def access(self, actor: Actor, project_ref: str, need: Role) -> Access:
        """The project ``project_ref`` names for ``actor``, if ``actor`` may
        do what ``need`` allows in it."""
        user = actor.user
        names_personal = is_personal_name(project_ref) or project_ref.strip() == personal_project_id(user)
        if names_personal and not user.startswith(SERVICE_PREFIX):
            personal = await self._personal(user)
            return Access(personal.id, Role.OWNER, user, personal.note_policy)
        ref = check_project_id(project_ref)
        project, role = await self._repo.project_and_role(ref, user)
        if project is not None and user.startswith(SERVICE_PREFIX):
            return Access(project.id, Role.OWNER, user, project.note_policy)
        if project is None or role == Role.NONE:
            aliased = await self._repo.alias(user, ref)
            if aliased is not None:
                project, role = await self._repo.project_and_role(aliased, user)
        if project is None or role == Role.NONE:
            raise NotFound(f"project {ref!r} not found", field="project_id")
        if role < need:
            raise PermissionDenied(
                f"{user} is {role_phrase(Role(role))} of project {project.id!r}; "
                f"this needs the {ROLE_NAMES[need]} role",
                project_id=project.id,
            )
        return Access(project.id, Role(role), user, project.note_policy)

    async def _personal(self, user: str) -> ProjectRow:
        project_id = personal_project_id(user)
        found, _role_ = await self._repo.project_and_role(project_id, user)
        if found is not None:
            return found
        now = utcnow()
        row = ProjectRow(
            id=project_id,
            display_name="Personal",
            owner_user_id=user,
            personal=True,
            create_time=now,
            update_time=now,
        )
        await self._repo.ensure(row, ProjectMemberRow(project_id=project_id, user_id=user, role=Role.OWNER))
        found, _role_ = await self._repo.project_and_role(project_id, user)
        assert found is not None
        return found

    async def _create(self, actor: Actor, project_id: str, name: str, policy: int, why: str) -> ProjectRow:
        if project_id.startswith(PERSONAL_PREFIX):
            raise InvalidArgument(
                f"project ids starting with {PERSONAL_PREFIX!r} are kept for personal projects",
                field="project.id",
            )
        now = utcnow()
        row = ProjectRow(
            id=project_id,
            display_name=name,
            owner_user_id=actor.user,
            note_policy=policy,
            create_time=now,
            update_time=now,
        )
        owner = ProjectMemberRow(project_id=project_id, user_id=actor.user, role=Role.OWNER, update_time=now)
        event = new_event(MemoryAuditEvent, actor, "project.create", project_id, f"{name!r}: {why}")
        return _normalised(await self._repo.create(row, owner, event))

    # Projects

    async def create(self, actor: Actor, project_id: str, display_name: str, note_policy: int) -> ProjectView:
        if actor.user.startswith(SERVICE_PREFIX):
            raise PermissionDenied("a service cannot own a project")
        ref = check_project_id(project_id, "project.id")
        project = await self._create(actor, ref, _display_name(display_name), _policy(note_policy), "created")
        return ProjectView(project, Role.OWNER)

    async def get(self, actor: Actor, project_id: str) -> ProjectView:
        access = await self.access(actor, project_id, Role.VIEWER)
        project, _role_ = await self._repo.project_and_role(access.project_id, actor.user)
        if project is None:  # deleted meanwhile
            raise NotFound(f"project {project_id!r} not found", field="id")
        return ProjectView(_normalised(project), access.role)

    async def list_projects(self, actor: Actor, size: int, token: str) -> tuple[list[ProjectView], str]:
        """The caller's projects: the personal one first, then by id."""

        def read(cursor: Cursor) -> str:
            return as_text(cursor["after"])

        limit, after = page_request(size, token, read)
        views: list[ProjectView] = []
        personal_id = personal_project_id(actor.user)
        if after is None:
            views.append(ProjectView(_normalised(await self._personal(actor.user)), Role.OWNER))
        rows = await self._repo.list_for(actor.user, after or "", limit + 1 - len(views), personal_id)
        views += [ProjectView(_normalised(project), Role(role)) for project, role in rows]
        # The personal project leads the first page; the others follow by id.
        page, next_token = page_of(
            views, limit, lambda last: {"after": "" if last.project.personal else last.project.id}
        )
        return page, next_token

    async def update(
        self, actor: Actor, project_id: str, display_name: str, note_policy: int, paths: Sequence[str]
    ) -> ProjectView:
        fields = masked_fields(paths, PROJECT_PATHS)
        access = await self.access(actor, project_id, Role.OWNER)
        project, _role_ = await self._repo.project_and_role(access.project_id, actor.user)
        if project is None:
            raise NotFound(f"project {project_id!r} not found", field="project.id")
        changes = []
        if "display_name" in fields:
            project.display_name = _display_name(display_name)
            changes.append(f"display_name={project.display_name!r}")
        if "note_policy" in fields:
            project.note_policy = _policy(note_policy)
            changes.append(f"note_policy={'auto' if project.note_policy == 2 else 'review'}")
        project.update_time = utcnow()
        event = new_event(MemoryAuditEvent, actor, "project.update", project.id, ", ".join(changes))
        return ProjectView(_normalised(await self._repo.save(project, event)), access.role)

    # Members

    async def members(
        self, actor: Actor, project_id: str, size: int, token: str
    ) -> tuple[list[ProjectMemberRow], str]:
        access = await self.access(actor, project_id, Role.VIEWER)

        def read(cursor: Cursor) -> str:
            return as_text(cursor["after"])

        limit, after = page_request(size, token, read)
        rows = list(await self._repo.members(access.project_id, after or "", limit + 1))
        for row in rows:
            row.update_time = aware(row.update_time)
        return page_of(rows, limit, lambda last: {"after": last.user_id})

    async def set_member(self, actor: Actor, project_id: str, user_id: str, role: int) -> ProjectMemberRow:
        wanted, member = _role(role), _user_id(user_id)
        access = await self.access(actor, project_id, Role.OWNER)
        project, _role_ = await self._repo.project_and_role(access.project_id, actor.user)
        assert project is not None
        if project.personal:
            raise FailedPrecondition(
                f"project {project.id!r} is {project.owner_user_id}'s personal project: "
                "create a project to share",
                project_id=project.id,
            )
        _none, current = await self._repo.project_and_role(project.id, member)
        if current == Role.OWNER and wanted != Role.OWNER and await self._repo.owners(project.id) <= 1:
            raise FailedPrecondition(
                f"{member} is the last owner of project {project.id!r}: make another member owner first",
                project_id=project.id,
            )
        verb = "member_add" if current == Role.NONE else "member_role"
        event = new_event(
            MemoryAuditEvent, actor, f"project.{verb}", project.id, f"{member} as {ROLE_NAMES[wanted]}"
        )
        row = ProjectMemberRow(project_id=project.id, user_id=member, role=wanted, update_time=utcnow())
        return await self._repo.set_member(row, event)

    async def remove_member(self, actor: Actor, project_id: str, user_id: str) -> None:
        member = _user_id(user_id)
        need = Role.VIEWER if member == actor.user else Role.OWNER
        access = await self.access(actor, project_id, need)
        _project, current = await self._repo.project_and_role(access.project_id, member)
        if current == Role.NONE:
            raise NotFound(f"{member} is not a member of project {access.project_id!r}", field="user_id")
        if current == Role.OWNER and await self._repo.owners(access.project_id) <= 1:
            raise FailedPrecondition(
                f"{member} is the last owner of project {access.project_id!r}: "
                "make another member owner first",
                project_id=access.project_id,
            )
        verb = "member_leave" if member == actor.user else "member_remove"
        event = new_event(MemoryAuditEvent, actor, f"project.{verb}", access.project_id, member)
        await self._repo.remove_member(access.project_id, member, event)
