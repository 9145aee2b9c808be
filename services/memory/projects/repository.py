"""SQL of projects, members and aliases. Every change is written with its
audit event in one transaction."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, func
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from services.memory.projects.models import (
    MemoryAuditEvent,
    ProjectAlias,
    ProjectMemberRow,
    ProjectRow,
)
from services.shared.audit import record
from services.shared.db import dialect_insert, is_unique_violation
from services.shared.db_retry import db_retry
from services.shared.driver_rows import Loader
from services.shared.errors import AlreadyExists
from services.shared.gathered_reads import driver_of


class ProjectsRepository:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions
        # The access check every project-scoped call makes goes straight to the driver.
        self._driver = driver_of(sessions)
        self._project = Loader(self._driver, ProjectRow, alias="p")
        self._project_and_role = (
            f"SELECT {self._project.select}, m.role FROM projects p "
            "LEFT JOIN project_members m ON m.project_id = p.id AND m.user_id = $2 WHERE p.id = $1"
        )

    @db_retry
    async def project_and_role(self, project_id: str, user_id: str) -> tuple[ProjectRow | None, int]:
        """The project and ``user_id``'s role in it (0: not a member), in one read."""
        found = await self._driver.fetchrow(self._project_and_role, project_id, user_id)
        if found is None:
            return None, 0
        return self._project(found), int(found[-1] or 0)

    @db_retry
    async def alias(self, user_id: str, alias: str) -> str | None:
        async with self._sessions() as session:
            row = await session.get(ProjectAlias, (user_id, alias))
            return row.project_id if row is not None else None

    async def create(
        self, project: ProjectRow, owner: ProjectMemberRow, event: MemoryAuditEvent
    ) -> ProjectRow:
        """Writes a new project with its owner; AlreadyExists when the id is taken."""
        async with self._sessions() as session:
            session.add(project)
            session.add(owner)
            try:
                # The audit insert flushes the two rows: a taken id fails here.
                await record(session, event)
                await session.commit()
            except IntegrityError as exc:
                if not is_unique_violation(exc):
                    raise
                raise AlreadyExists(f"project {project.id!r} exists already", field="project.id") from None
            await session.refresh(project)
            return project

    @db_retry
    async def ensure(self, project: ProjectRow, owner: ProjectMemberRow) -> None:
        """Writes the project and its owner unless it exists (a personal
        project created on first use, by any replica)."""
        async with self._sessions() as session:
            await session.exec(
                dialect_insert(session, ProjectRow).values(**project.model_dump()).on_conflict_do_nothing()
            )
            await session.exec(
                dialect_insert(session, ProjectMemberRow)
                .values(**owner.model_dump())
                .on_conflict_do_nothing()
            )
            await session.commit()

    @db_retry
    async def list_for(
        self, user_id: str, after_id: str, limit: int, skip: str
    ) -> Sequence[tuple[ProjectRow, int]]:
        """``user_id``'s projects with its role, by id after ``after_id``, without ``skip``."""
        query = (
            select(ProjectRow, ProjectMemberRow.role)
            .join(ProjectMemberRow, col(ProjectMemberRow.project_id) == col(ProjectRow.id))
            .where(
                col(ProjectMemberRow.user_id) == user_id,
                col(ProjectRow.id) > after_id,
                col(ProjectRow.id) != skip,
            )
            .order_by(col(ProjectRow.id))
            .limit(limit)
        )
        async with self._sessions() as session:
            return [(project, int(role)) for project, role in (await session.exec(query)).all()]

    @db_retry
    async def save(self, project: ProjectRow, event: MemoryAuditEvent) -> ProjectRow:
        async with self._sessions() as session:
            merged = await session.merge(project)
            await record(session, event)
            await session.commit()
            await session.refresh(merged)
            return merged

    @db_retry
    async def members(self, project_id: str, after_user: str, limit: int) -> Sequence[ProjectMemberRow]:
        query = (
            select(ProjectMemberRow)
            .where(col(ProjectMemberRow.project_id) == project_id, col(ProjectMemberRow.user_id) > after_user)
            .order_by(col(ProjectMemberRow.user_id))
            .limit(limit)
        )
        async with self._sessions() as session:
            return (await session.exec(query)).all()

    @db_retry
    async def owners(self, project_id: str) -> int:
        query = (
            select(func.count())
            .select_from(ProjectMemberRow)
            .where(col(ProjectMemberRow.project_id) == project_id, col(ProjectMemberRow.role) == 3)
        )
        async with self._sessions() as session:
            return int((await session.exec(query)).one())

    @db_retry
    async def set_member(self, member: ProjectMemberRow, event: MemoryAuditEvent) -> ProjectMemberRow:
        async with self._sessions() as session:
            statement = dialect_insert(session, ProjectMemberRow).values(**member.model_dump())
            statement = statement.on_conflict_do_update(
                index_elements=[col(ProjectMemberRow.project_id), col(ProjectMemberRow.user_id)],
                set_={"role": statement.excluded.role, "update_time": statement.excluded.update_time},
            )
            await session.exec(statement)
            await record(session, event)
            await session.commit()
        return member

    @db_retry
    async def remove_member(self, project_id: str, user_id: str, event: MemoryAuditEvent) -> bool:
        async with self._sessions() as session:
            result = await session.exec(
                delete(ProjectMemberRow).where(
                    col(ProjectMemberRow.project_id) == project_id, col(ProjectMemberRow.user_id) == user_id
                )
            )
            if not result.rowcount:
                await session.rollback()
                return False
            await record(session, event)
            await session.commit()
            return True
