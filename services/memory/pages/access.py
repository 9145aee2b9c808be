"""Who may read and edit a page: its owner, its user ACL, and the projects it
is shared with. One rule, used by every read and write of a page (the page,
its list, its versions, its proposals, the instruction pages; the engine's
page tools reach it through GetPage and ListPages).

- read: the owner; a user on the user ACL (reader or editor); a member of
  any role of a project on the project ACL (reader or editor);
- edit: the owner; a user editor; an editor or owner of a project on the
  project ACL as editor (a viewer of that project only reads).

A project's membership is read from ``project_members`` at each call, never
kept: a member removed from the project loses the page at their next call.
Sharing is the owner's, and only with a project the owner is a member of
(resolved through :meth:`ProjectsDomain.access`, NOT_FOUND otherwise); the
resolved id is stored, so an alias the owner used names the same project for
every member. ListPages and ListProposals apply the same rule in SQL
(``repository.readable_by``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from services.memory.pages.models import ROLE_EDITOR, ROLE_READER, Page, PageAcl, PageProjectAcl
from services.memory.pages.repository import PagesRepository
from services.memory.projects.domain import ProjectsDomain, Role, check_project_id
from services.shared.audit import Actor
from services.shared.errors import FailedPrecondition, InvalidArgument, NotFound, TooLarge

OWNER = "owner"
MAX_ID_CHARS = 128
MAX_ACL_ENTRIES = 100
MAX_PROJECT_ACL_ENTRIES = 100


def role_of(page: Page, user_id: str, user_role: str | None, grants: Iterable[tuple[str, int]]) -> str | None:
    """The caller's role on ``page`` (owner, editor, reader) or None: from
    their user-ACL role and the (grant role, their project role) of each
    project the page is shared with that they are a member of."""
    if page.owner_user_id == user_id:
        return OWNER
    role = user_role
    for grant, member in grants:
        if member < Role.VIEWER:
            continue
        if grant == ROLE_EDITOR and member >= Role.EDITOR:
            return ROLE_EDITOR
        role = role or ROLE_READER
    return role


def clean_id(value: str, field: str) -> str:
    value = value.strip()
    if not value:
        raise InvalidArgument(f"{field} is required", field=field)
    if len(value) > MAX_ID_CHARS:
        raise InvalidArgument(f"{field} is longer than {MAX_ID_CHARS} characters", field=field)
    return value


def clean_acl(owner: str, readers: Sequence[str], editors: Sequence[str]) -> tuple[list[str], list[str]]:
    """Distinct, sorted user ids; the owner is dropped (implied both); a user
    listed as both is an editor."""
    editor_set = {clean_id(user, "editor_user_ids") for user in editors} - {owner}
    reader_set = {clean_id(user, "reader_user_ids") for user in readers} - {owner} - editor_set
    if len(editor_set) + len(reader_set) > MAX_ACL_ENTRIES:
        raise TooLarge(f"an ACL holds at most {MAX_ACL_ENTRIES} users", field="reader_user_ids")
    return sorted(reader_set), sorted(editor_set)


def acl_rows(page_id: str, readers: Sequence[str], editors: Sequence[str]) -> list[PageAcl]:
    return [PageAcl(page_id=page_id, user_id=user, role=ROLE_READER) for user in readers] + [
        PageAcl(page_id=page_id, user_id=user, role=ROLE_EDITOR) for user in editors
    ]


def clean_project_acl(readers: Sequence[str], editors: Sequence[str]) -> tuple[list[str], list[str]]:
    """Distinct, well-formed project ids; one listed as both is an editor."""
    editor_set = {check_project_id(p, "editor_project_ids") for p in editors}
    reader_set = {check_project_id(p, "reader_project_ids") for p in readers} - editor_set
    if len(editor_set) + len(reader_set) > MAX_PROJECT_ACL_ENTRIES:
        raise TooLarge(f"an ACL holds at most {MAX_PROJECT_ACL_ENTRIES} projects", field="reader_project_ids")
    return sorted(reader_set), sorted(editor_set)


def grant_rows(page_id: str, readers: Sequence[str], editors: Sequence[str]) -> list[PageProjectAcl]:
    return [PageProjectAcl(page_id=page_id, project_id=p, role=ROLE_READER) for p in readers] + [
        PageProjectAcl(page_id=page_id, project_id=p, role=ROLE_EDITOR) for p in editors
    ]


class PageAccess:
    """The rule above over the database: a page's role for a caller, and the
    resolution of the projects an owner shares a page with. A page the
    caller cannot read is NOT_FOUND, exactly like a missing id."""

    def __init__(self, repository: PagesRepository, projects: ProjectsDomain) -> None:
        self._repo = repository
        self._projects = projects

    async def readable(self, user_id: str, page_id: str) -> tuple[Page, str]:
        """The page and the caller's role; NOT_FOUND when they cannot read it."""
        page = await self._repo.get_page(page_id) if page_id else None
        if page is not None:
            role = await self.role(user_id, page)
            if role is not None:
                return page, role
        raise NotFound(f"page {page_id!r} not found", page_id=page_id)

    async def readable_or_none(self, user_id: str, page_id: str) -> Page | None:
        try:
            page, _ = await self.readable(user_id, page_id)
        except NotFound:
            return None
        return page

    async def editable(self, user_id: str, page_id: str) -> tuple[Page, str]:
        page, role = await self.readable(user_id, page_id)
        if role == ROLE_READER:
            raise FailedPrecondition(
                f"you can read page {page_id!r} but not edit it: only its owner and editors can",
                page_id=page_id,
            )
        return page, role

    async def owned(self, user_id: str, page_id: str, action: str) -> Page:
        page, role = await self.readable(user_id, page_id)
        if role != OWNER:
            raise FailedPrecondition(f"only the owner of page {page_id!r} can {action}", page_id=page_id)
        return page

    async def role(self, user_id: str, page: Page) -> str | None:
        if page.owner_user_id == user_id:
            return OWNER
        return (await self.roles(user_id, [page])).get(page.id)

    async def roles(self, user_id: str, pages: Sequence[Page]) -> dict[str, str]:
        """The caller's role on each page they may read (two queries in all)."""
        others = [page.id for page in pages if page.owner_user_id != user_id]
        user_roles = await self._repo.user_roles(others, user_id)
        grants: dict[str, list[tuple[str, int]]] = {}
        for page_id, grant, member in await self._repo.project_grants(others, user_id):
            grants.setdefault(page_id, []).append((grant, member))
        roles = {}
        for page in pages:
            role = role_of(page, user_id, user_roles.get(page.id), grants.get(page.id, ()))
            if role is not None:
                roles[page.id] = role
        return roles

    async def resolve(
        self, owner: Actor, readers: Sequence[str], editors: Sequence[str]
    ) -> tuple[list[str], list[str]]:
        """The projects' resolved ids, each one the owner is a member of
        (NOT_FOUND for any other, exactly like a missing project); a project
        named as both reader and editor is an editor."""
        readers, editors = clean_project_acl(readers, editors)
        editor_ids = {(await self._projects.access(owner, p, Role.VIEWER)).project_id for p in editors}
        reader_ids = {(await self._projects.access(owner, p, Role.VIEWER)).project_id for p in readers}
        return sorted(reader_ids - editor_ids), sorted(editor_ids)
