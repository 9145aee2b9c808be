"""Pages and their versions: create, read, list, edit, delete, share and
restore. Every write of a page's text (an edit, a restore, an accepted
proposal) goes through :meth:`Pages.write`, so each one makes a new immutable
version the same way. Who may do what is :mod:`services.memory.pages.access`."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from services.memory.pages.access import OWNER, PageAccess, acl_rows, clean_acl, grant_rows
from services.memory.pages.models import ROLE_EDITOR, ROLE_READER, Page, PageVersion
from services.memory.pages.repository import PagesRepository, VersionWrite
from services.shared.audit import Actor
from services.shared.errors import FailedPrecondition, InvalidArgument, NotFound, TooLarge
from services.shared.masks import masked_fields
from services.shared.pagination import Cursor, as_count, as_instant, as_text, page_of, page_request
from services.shared.time import utcnow

MAX_TITLE_CHARS = 200
PAGE_PATHS = frozenset({"title", "body"})


@dataclass(frozen=True)
class PageView:
    """A page with its ACL, as the caller may see it."""

    page: Page
    readers: list[str]
    editors: list[str]
    role: str
    reader_projects: list[str] = field(default_factory=list)
    editor_projects: list[str] = field(default_factory=list)


def clean_title(title: str, field: str = "page.title") -> str:
    title = title.strip()
    if not title:
        raise InvalidArgument(f"{field} must not be empty", field=field)
    if len(title) > MAX_TITLE_CHARS:
        raise TooLarge(f"{field} is longer than {MAX_TITLE_CHARS} characters", field=field)
    return title


def version_label(page_id: str, version: int) -> str:
    return f"{page_id}@v{version}"


def by_time(cursor: Cursor) -> tuple[datetime, str]:
    """A page token's (time, id) position, for lists newest first."""
    return as_instant(cursor["time"]), as_text(cursor["id"])


class Pages:
    def __init__(self, repository: PagesRepository, access: PageAccess, max_page_chars: int) -> None:
        self._repo = repository
        self._access = access
        self._max_page_chars = max_page_chars

    def check_body(self, body: str, field: str) -> str:
        if len(body) > self._max_page_chars:
            raise TooLarge(f"{field} is longer than {self._max_page_chars} characters", field=field)
        return body

    async def view(self, page: Page, role: str) -> PageView:
        return (await self._views([page], {page.id: role}))[0]

    async def _views(self, pages: Sequence[Page], roles: dict[str, str]) -> list[PageView]:
        ids = [page.id for page in pages]
        acl, grants = await self._repo.acl(ids), await self._repo.project_acl(ids)
        views = []
        for page in pages:
            users = [row for row in acl if row.page_id == page.id]
            projects = [row for row in grants if row.page_id == page.id]
            views.append(
                PageView(
                    page,
                    [row.user_id for row in users if row.role == ROLE_READER],
                    [row.user_id for row in users if row.role == ROLE_EDITOR],
                    # A share removed since the page was listed reads as reader, the least right.
                    roles.get(page.id, ROLE_READER),
                    [row.project_id for row in projects if row.role == ROLE_READER],
                    [row.project_id for row in projects if row.role == ROLE_EDITOR],
                )
            )
        return views

    async def create_page(
        self,
        user_id: str,
        request_id: str,
        title: str,
        body: str,
        readers: Sequence[str] = (),
        editors: Sequence[str] = (),
        reader_projects: Sequence[str] = (),
        editor_projects: Sequence[str] = (),
        actor: Actor | None = None,
    ) -> PageView:
        """``actor``: the caller as the projects service sees them, to resolve
        the projects shared with (a user's by default)."""
        title = clean_title(title)
        body = self.check_body(body, "page.body")
        readers, editors = clean_acl(user_id, readers, editors)
        reader_projects, editor_projects = await self._access.resolve(
            actor or Actor(user_id, "user"), reader_projects, editor_projects
        )
        now = utcnow()
        page = Page(
            id=str(uuid.uuid4()),
            owner_user_id=user_id,
            title=title,
            body=body,
            version=1,
            request_id=request_id.strip() or None,
            create_time=now,
            update_time=now,
        )
        saved, _ = await self._repo.insert_page(
            page,
            acl_rows(page.id, readers, editors),
            grant_rows(page.id, reader_projects, editor_projects),
        )
        return await self.view(saved, OWNER)

    async def get_page(self, user_id: str, page_id: str) -> PageView:
        page, role = await self._access.readable(user_id, page_id)
        return await self.view(page, role)

    async def list_pages(self, user_id: str, requested_size: int, token: str) -> tuple[list[PageView], str]:
        size, after = page_request(requested_size, token, by_time)
        fetched = await self._repo.readable_pages(user_id, after, size + 1)
        rows, next_token = page_of(
            fetched, size, lambda last: {"time": last.update_time.isoformat(), "id": last.id}
        )
        return await self._views(rows, await self._access.roles(user_id, rows)), next_token

    async def update_page(
        self, user_id: str, page_id: str, title: str, body: str, paths: Sequence[str], expected_version: int
    ) -> PageView:
        paths = masked_fields(paths, PAGE_PATHS)
        if expected_version < 0:
            raise InvalidArgument("expected_version must not be negative", field="expected_version")
        new_title = clean_title(title) if "title" in paths else None
        new_body = self.check_body(body, "page.body") if "body" in paths else None
        page, role = await self._access.editable(user_id, page_id)
        write = VersionWrite(author_user_id=user_id, title=new_title, body=new_body)
        saved = await self.write(page, expected_version, write)
        return await self.view(saved, role)

    async def write(self, page: Page, expected_version: int, write: VersionWrite) -> Page:
        """The one path that writes a page's text (edit, restore, accepted
        proposal): a new version on top of the current one. With
        ``expected_version`` (> 0) only if the page is still at that version."""
        saved = await self._repo.write_version(page.id, expected_version or None, write)
        if saved is not None:
            return saved
        current = await self._repo.get_page(page.id)
        if current is None:
            raise NotFound(f"page {page.id!r} not found", page_id=page.id)
        raise FailedPrecondition(
            f"page {page.id!r} is at version {current.version}, not {expected_version}",
            page_id=page.id,
            current_version=str(current.version),
        )

    async def delete_page(self, user_id: str, page_id: str) -> None:
        await self._access.owned(user_id, page_id, "delete it")
        await self._repo.delete_page(page_id)

    async def set_acl(
        self,
        actor: Actor,
        page_id: str,
        readers: Sequence[str],
        editors: Sequence[str],
        reader_projects: Sequence[str] = (),
        editor_projects: Sequence[str] = (),
    ) -> PageView:
        """Replaces the user and project lists; owner only. Each project must
        be one the owner is a member of (NOT_FOUND otherwise)."""
        page = await self._access.owned(actor.user, page_id, "change its ACL")
        readers, editors = clean_acl(page.owner_user_id, readers, editors)
        reader_projects, editor_projects = await self._access.resolve(actor, reader_projects, editor_projects)
        saved = await self._repo.set_acl(
            page_id,
            acl_rows(page_id, readers, editors),
            grant_rows(page_id, reader_projects, editor_projects),
        )
        if saved is None:
            raise NotFound(f"page {page_id!r} not found", page_id=page_id)
        return PageView(saved, readers, editors, OWNER, reader_projects, editor_projects)

    # Versions

    async def list_versions(
        self, user_id: str, page_id: str, requested_size: int, token: str
    ) -> tuple[Sequence[PageVersion], str]:
        size, before = page_request(requested_size, token, lambda cursor: as_count(cursor["before"]))
        await self._access.readable(user_id, page_id)
        rows = await self._repo.list_versions(page_id, before, size + 1)
        return page_of(rows, size, lambda last: {"before": last.version})

    async def get_version(self, user_id: str, page_id: str, version: int) -> PageVersion:
        if version <= 0:
            raise InvalidArgument("version must be a version number (from 1)", field="version")
        await self._access.readable(user_id, page_id)
        row = await self._repo.get_version(page_id, version)
        if row is None:
            raise NotFound(f"page {page_id!r} has no version {version}", page_id=page_id)
        return row

    async def restore_version(
        self, user_id: str, page_id: str, version: int, expected_version: int
    ) -> PageView:
        if expected_version < 0:
            raise InvalidArgument("expected_version must not be negative", field="expected_version")
        old = await self.get_version(user_id, page_id, version)
        page, role = await self._access.editable(user_id, page_id)
        write = VersionWrite(
            author_user_id=user_id, title=old.title, body=old.body, restored_from_version=old.version
        )
        saved = await self.write(page, expected_version, write)
        return await self.view(saved, role)
