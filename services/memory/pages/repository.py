"""SQL of pages, versions, ACLs and proposals, through SQLModel async sessions.

Every version write is one transaction: an UPDATE of the page head
(``version = version + 1``, and ``WHERE version = n`` when the caller expects
version n) followed by the insert of that version. Concurrent writes queue on
the page row, so each gets its own version number and an expected version is
checked against the committed head, on SQLite and PostgreSQL alike."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, delete, func, or_, tuple_, union, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from services.memory.pages.models import (
    PROPOSAL_ACCEPTED,
    PROPOSAL_PENDING,
    Page,
    PageAcl,
    PageProjectAcl,
    PageVersion,
    Proposal,
)
from services.memory.projects.models import ProjectMemberRow
from services.shared.db import is_unique_violation
from services.shared.db_retry import db_retry, retry_if
from services.shared.time import utcnow


@dataclass(frozen=True)
class VersionWrite:
    """A new version of a page: what changes (None: keep the current value)
    and why it was written."""

    author_user_id: str
    title: str | None = None
    body: str | None = None
    restored_from_version: int = 0
    # Set by AcceptProposal: the proposal is marked accepted in the same transaction.
    proposal_id: str = ""
    decision_reason: str = ""


class ProposalDecided(Exception):
    """The proposal was decided by someone else between the read and the write."""


def _rowcount(result: Any) -> int:
    return int(getattr(result, "rowcount", 0) or 0)


def _readable_ids(user_id: str) -> Select[Any]:
    """The ids of the pages ``user_id`` may read: owned, on the user ACL, or
    shared with a project the user is a member of now (any role)."""
    owned = select(col(Page.id)).where(col(Page.owner_user_id) == user_id)
    listed = select(col(PageAcl.page_id)).where(col(PageAcl.user_id) == user_id)
    through_project = (
        select(col(PageProjectAcl.page_id))
        .join(ProjectMemberRow, col(ProjectMemberRow.project_id) == col(PageProjectAcl.project_id))
        .where(col(ProjectMemberRow.user_id) == user_id)
    )
    return select(union(owned, listed, through_project).subquery().c[0])


def readable_by(user_id: str, page_id: Any) -> ColumnElement[bool]:
    """SQL: the page ``page_id`` (a column) is one ``user_id`` may read."""
    return col(page_id).in_(_readable_ids(user_id).scalar_subquery())


class PagesRepository:
    """Reads and idempotent writes are retried when the database connection
    drops (services.shared.db_retry): the ACL's replacement, a page's
    deletion, and creations that carry a request_id. A new version and a
    proposal's decision are not: a second run after a lost commit reply
    would write another version, or report a decided proposal."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    # Pages

    async def insert_page(
        self, page: Page, acl: Sequence[PageAcl], grants: Sequence[PageProjectAcl] = ()
    ) -> tuple[Page, bool]:
        """Inserts the page with its version 1 and ACL (users and projects);
        returns (page, created). A retried create with the same (owner,
        request_id) returns the first one."""
        return await retry_if(
            bool(page.request_id),
            lambda: self._insert_page(page, acl, grants),
            "PagesRepository.insert_page",
        )

    async def _insert_page(
        self, page: Page, acl: Sequence[PageAcl], grants: Sequence[PageProjectAcl]
    ) -> tuple[Page, bool]:
        async with self._sessions() as session:
            session.add(page)
            session.add_all(acl)
            session.add_all(grants)
            session.add(
                PageVersion(
                    page_id=page.id,
                    version=page.version,
                    title=page.title,
                    body=page.body,
                    author_user_id=page.owner_user_id,
                    create_time=page.create_time,
                )
            )
            try:
                await session.commit()
                return page, True
            except IntegrityError as exc:
                if not (page.request_id and is_unique_violation(exc)):
                    raise
            await session.rollback()
            query = select(Page).where(
                Page.owner_user_id == page.owner_user_id, Page.request_id == page.request_id
            )
            return (await session.exec(query)).one(), False

    @db_retry
    async def get_page(self, page_id: str) -> Page | None:
        async with self._sessions() as session:
            return await session.get(Page, page_id, populate_existing=True)

    @db_retry
    async def get_pages(self, page_ids: Sequence[str]) -> dict[str, Page]:
        if not page_ids:
            return {}
        async with self._sessions() as session:
            rows = (await session.exec(select(Page).where(col(Page.id).in_(page_ids)))).all()
            return {page.id: page for page in rows}

    @db_retry
    async def acl(self, page_ids: Sequence[str]) -> list[PageAcl]:
        if not page_ids:
            return []
        async with self._sessions() as session:
            query = select(PageAcl).where(col(PageAcl.page_id).in_(page_ids)).order_by(col(PageAcl.user_id))
            return list((await session.exec(query)).all())

    @db_retry
    async def project_acl(self, page_ids: Sequence[str]) -> list[PageProjectAcl]:
        if not page_ids:
            return []
        async with self._sessions() as session:
            query = (
                select(PageProjectAcl)
                .where(col(PageProjectAcl.page_id).in_(page_ids))
                .order_by(col(PageProjectAcl.project_id))
            )
            return list((await session.exec(query)).all())

    @db_retry
    async def project_grants(self, page_ids: Sequence[str], user_id: str) -> list[tuple[str, str, int]]:
        """(page id, the grant's role, ``user_id``'s role in the project) for
        each project the pages are shared with and the user is a member of,
        read now from project_members."""
        if not page_ids:
            return []
        query = (
            select(PageProjectAcl.page_id, PageProjectAcl.role, ProjectMemberRow.role)
            .join(ProjectMemberRow, col(ProjectMemberRow.project_id) == col(PageProjectAcl.project_id))
            .where(col(PageProjectAcl.page_id).in_(page_ids), col(ProjectMemberRow.user_id) == user_id)
        )
        async with self._sessions() as session:
            return [(page, grant, int(member)) for page, grant, member in (await session.exec(query)).all()]

    @db_retry
    async def user_roles(self, page_ids: Sequence[str], user_id: str) -> dict[str, str]:
        """The user-ACL role of ``user_id`` on each of the pages that lists them."""
        if not page_ids:
            return {}
        query = select(PageAcl).where(col(PageAcl.page_id).in_(page_ids), col(PageAcl.user_id) == user_id)
        async with self._sessions() as session:
            return {row.page_id: row.role for row in (await session.exec(query)).all()}

    @db_retry
    async def readable_pages(
        self, user_id: str, cursor: tuple[datetime, str] | None, limit: int
    ) -> Sequence[Page]:
        """Pages the user may read (owned, on the user ACL, or shared with a
        project they are a member of), most recently updated first."""
        async with self._sessions() as session:
            query = select(Page).where(readable_by(user_id, Page.id))
            if cursor is not None:
                query = query.where(tuple_(col(Page.update_time), col(Page.id)) < tuple_(*cursor))
            query = query.order_by(col(Page.update_time).desc(), col(Page.id).desc()).limit(limit)
            return (await session.exec(query)).all()

    async def write_version(
        self, page_id: str, expected_version: int | None, write: VersionWrite
    ) -> Page | None:
        """Moves the page to its next version and stores that version, in one
        transaction. The UPDATE of the page row serialises concurrent writes
        (a row lock on PostgreSQL, the one connection on SQLite), so each gets
        its own version number. None when the page is gone or, with
        ``expected_version``, no longer at that version (nothing written).
        Raises ProposalDecided (nothing written) when ``write.proposal_id`` is
        no longer pending."""
        now = utcnow()
        values: dict[str, Any] = {"version": col(Page.version) + 1, "update_time": now}
        if write.title is not None:
            values["title"] = write.title
        if write.body is not None:
            values["body"] = write.body
        conditions = [col(Page.id) == page_id]
        if expected_version is not None:
            conditions.append(col(Page.version) == expected_version)
        async with self._sessions() as session:
            moved = await session.exec(update(Page).where(*conditions).values(**values))
            if _rowcount(moved) != 1:
                await session.rollback()
                return None
            page = await session.get(Page, page_id, populate_existing=True)
            assert page is not None
            session.add(
                PageVersion(
                    page_id=page_id,
                    version=page.version,
                    title=page.title,
                    body=page.body,
                    author_user_id=write.author_user_id,
                    restored_from_version=write.restored_from_version,
                    proposal_id=write.proposal_id,
                    create_time=now,
                )
            )
            if write.proposal_id:
                decided = await session.exec(
                    update(Proposal)
                    .where(col(Proposal.id) == write.proposal_id, col(Proposal.state) == PROPOSAL_PENDING)
                    .values(
                        state=PROPOSAL_ACCEPTED,
                        accepted_version=page.version,
                        decision_reason=write.decision_reason,
                        decide_time=now,
                    )
                )
                if _rowcount(decided) != 1:
                    await session.rollback()
                    raise ProposalDecided(write.proposal_id)
            await session.commit()
            return page

    @db_retry
    async def set_acl(
        self, page_id: str, acl: Sequence[PageAcl], grants: Sequence[PageProjectAcl] = ()
    ) -> Page | None:
        """Replaces the page's ACL, users and projects; None when the page is gone."""
        async with self._sessions() as session:
            touched = await session.exec(
                update(Page).where(col(Page.id) == page_id).values(update_time=utcnow())
            )
            if _rowcount(touched) != 1:
                await session.rollback()
                return None
            await session.exec(delete(PageAcl).where(col(PageAcl.page_id) == page_id))
            await session.exec(delete(PageProjectAcl).where(col(PageProjectAcl.page_id) == page_id))
            session.add_all(acl)
            session.add_all(grants)
            await session.commit()
            return await session.get(Page, page_id, populate_existing=True)

    @db_retry
    async def delete_page(self, page_id: str) -> bool:
        async with self._sessions() as session:
            await session.exec(delete(Proposal).where(col(Proposal.page_id) == page_id))
            await session.exec(delete(PageAcl).where(col(PageAcl.page_id) == page_id))
            await session.exec(delete(PageProjectAcl).where(col(PageProjectAcl.page_id) == page_id))
            await session.exec(delete(PageVersion).where(col(PageVersion.page_id) == page_id))
            deleted = await session.exec(delete(Page).where(col(Page.id) == page_id))
            await session.commit()
            return _rowcount(deleted) == 1

    # Versions

    @db_retry
    async def list_versions(self, page_id: str, before: int | None, limit: int) -> Sequence[PageVersion]:
        async with self._sessions() as session:
            query = select(PageVersion).where(PageVersion.page_id == page_id)
            if before is not None:
                query = query.where(col(PageVersion.version) < before)
            query = query.order_by(col(PageVersion.version).desc()).limit(limit)
            return (await session.exec(query)).all()

    @db_retry
    async def get_version(self, page_id: str, version: int) -> PageVersion | None:
        async with self._sessions() as session:
            return await session.get(PageVersion, (page_id, version))

    @db_retry
    async def get_versions(self, keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], PageVersion]:
        if not keys:
            return {}
        async with self._sessions() as session:
            condition = or_(
                *(and_(col(PageVersion.page_id) == page, col(PageVersion.version) == v) for page, v in keys)
            )
            rows = (await session.exec(select(PageVersion).where(condition))).all()
            return {(row.page_id, row.version): row for row in rows}

    # Proposals

    async def insert_proposal(self, proposal: Proposal) -> Proposal:
        """Inserts, or returns the proposal made earlier with the same
        (proposer, request_id)."""
        return await retry_if(
            bool(proposal.request_id),
            lambda: self._insert_proposal(proposal),
            "PagesRepository.insert_proposal",
        )

    async def _insert_proposal(self, proposal: Proposal) -> Proposal:
        async with self._sessions() as session:
            session.add(proposal)
            try:
                await session.commit()
                return proposal
            except IntegrityError as exc:
                if not (proposal.request_id and is_unique_violation(exc)):
                    raise
            await session.rollback()
            query = select(Proposal).where(
                Proposal.proposer_user_id == proposal.proposer_user_id,
                Proposal.request_id == proposal.request_id,
            )
            return (await session.exec(query)).one()

    @db_retry
    async def get_proposal(self, proposal_id: str) -> Proposal | None:
        async with self._sessions() as session:
            return await session.get(Proposal, proposal_id, populate_existing=True)

    @db_retry
    async def pending_proposals(self, page_id: str) -> int:
        async with self._sessions() as session:
            query = select(func.count()).where(
                col(Proposal.page_id) == page_id, col(Proposal.state) == PROPOSAL_PENDING
            )
            return int((await session.exec(query)).one())

    @db_retry
    async def visible_proposals(
        self, user_id: str, page_id: str, state: int, cursor: tuple[datetime, str] | None, limit: int
    ) -> Sequence[Proposal]:
        """Proposals on the user's pages, or made by the user on a page they
        may still read, newest first."""
        async with self._sessions() as session:
            query = select(Proposal).where(
                or_(
                    col(Proposal.page_owner_user_id) == user_id,
                    and_(col(Proposal.proposer_user_id) == user_id, readable_by(user_id, Proposal.page_id)),
                )
            )
            if page_id:
                query = query.where(col(Proposal.page_id) == page_id)
            if state:
                query = query.where(col(Proposal.state) == state)
            if cursor is not None:
                query = query.where(tuple_(col(Proposal.create_time), col(Proposal.id)) < tuple_(*cursor))
            query = query.order_by(col(Proposal.create_time).desc(), col(Proposal.id).desc()).limit(limit)
            return (await session.exec(query)).all()

    async def decide_proposal(self, proposal_id: str, state: int, reason: str) -> Proposal | None:
        """Sets the state of a pending proposal; None when it is not pending."""
        async with self._sessions() as session:
            decided = await session.exec(
                update(Proposal)
                .where(col(Proposal.id) == proposal_id, col(Proposal.state) == PROPOSAL_PENDING)
                .values(state=state, decision_reason=reason, decide_time=utcnow())
            )
            if _rowcount(decided) != 1:
                await session.rollback()
                return None
            await session.commit()
            return await session.get(Proposal, proposal_id, populate_existing=True)
