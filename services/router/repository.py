"""SQL of the router service, through SQLModel async sessions. Every catalog
write bumps the catalog revision in its own transaction."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, delete, or_, select
from sqlmodel.ext.asyncio.session import AsyncSession

from services.router.models import (
    CatalogRevision,
    RouterAuditEvent,
    Skill,
    SkillEnablement,
    SkillFeedback,
    SkillVector,
)
from services.shared.audit import AuditLog, record
from services.shared.db import is_unique_violation
from services.shared.db_retry import db_retry, retry_if
from services.shared.driver import Statement
from services.shared.driver_rows import Loader
from services.shared.gathered_reads import driver_of
from services.shared.time import utcnow

_REVISION = "SELECT revision FROM catalog_revision WHERE id = 1"


class NameTaken(Exception):
    """Another skill has this name."""


async def _bump(session: AsyncSession) -> None:
    await session.exec(
        update(CatalogRevision)
        .where(col(CatalogRevision.id) == 1)
        .values(revision=CatalogRevision.revision + 1)
    )


class RouterRepository:
    """Reads and idempotent writes are retried when the database connection
    drops (services.shared.db_retry): a skill's update, deletion, vectors and
    per-user enablement (the same values again), and creations (skills,
    feedback) only when they carry a request id."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions
        self.audit = AuditLog(RouterAuditEvent, sessions)
        # The reads every routing makes go straight to the driver.
        self._driver = driver_of(sessions)
        self._enablement = Loader(self._driver, SkillEnablement)
        self._enablements = f"SELECT {self._enablement.select} FROM skill_enablements WHERE user_id = $1"

    # The catalog

    @db_retry
    async def revision(self) -> int:
        """The catalog revision: one primary-key read, before every routing."""
        row = await self._driver.fetchrow(_REVISION)
        return int(row[0]) if row is not None else 0

    @db_retry
    async def routing_state(self, user_id: str) -> tuple[int, dict[str, SkillEnablement]]:
        """What routing reads for a request, in one transaction: the catalog
        revision and the caller's enablement rows."""
        revision, enablements = await self._driver.batch(
            [Statement(_REVISION), Statement(self._enablements, (user_id,))]
        )
        rows = [self._enablement(row) for row in enablements.rows]
        return (int(revision.rows[0][0]) if revision.rows else 0), {r.skill_id: r for r in rows}

    @db_retry
    async def all_skills(self) -> tuple[int, Sequence[Skill]]:
        """The revision and every skill, read in one transaction."""
        async with self._sessions() as session:
            row = await session.get(CatalogRevision, 1)
            skills = (await session.exec(select(Skill).order_by(col(Skill.name)))).all()
            return (row.revision if row else 0), skills

    @db_retry
    async def list_skills(self, after_name: str, limit: int) -> Sequence[Skill]:
        """Skills by name, strictly after ``after_name``."""
        async with self._sessions() as session:
            query = select(Skill).where(col(Skill.name) > after_name).order_by(col(Skill.name)).limit(limit)
            return (await session.exec(query)).all()

    @db_retry
    async def find_skill(self, id_or_name: str) -> Skill | None:
        async with self._sessions() as session:
            query = select(Skill).where(or_(col(Skill.id) == id_or_name, col(Skill.name) == id_or_name))
            return (await session.exec(query)).first()

    @db_retry
    async def skills_named(self, names: Sequence[str]) -> dict[str, Skill]:
        if not names:
            return {}
        async with self._sessions() as session:
            rows = (await session.exec(select(Skill).where(col(Skill.name).in_(names)))).all()
            return {skill.name: skill for skill in rows}

    async def insert_skill(self, skill: Skill, audit: RouterAuditEvent) -> Skill:
        """Inserts, with ``audit`` in the same transaction, or returns the
        skill created earlier with the same create_request_id (recorded
        then); NameTaken when the name is another skill's."""
        return await retry_if(
            bool(skill.create_request_id),
            lambda: self._insert_skill(skill, audit),
            "RouterRepository.insert_skill",
        )

    async def _insert_skill(self, skill: Skill, audit: RouterAuditEvent) -> Skill:
        async with self._sessions() as session:
            session.add(skill)
            try:
                await session.flush()
                await record(session, audit)
                await _bump(session)
                await session.commit()
                return skill
            except IntegrityError as exc:
                if not is_unique_violation(exc):
                    raise
                await session.rollback()
            if skill.create_request_id:
                query = select(Skill).where(col(Skill.create_request_id) == skill.create_request_id)
                earlier = (await session.exec(query)).first()
                if earlier is not None:
                    return earlier
            raise NameTaken(skill.name)

    @db_retry
    async def update_skill(
        self, skill_id: str, values: dict[str, Any], audit: RouterAuditEvent
    ) -> Skill | None:
        async with self._sessions() as session:
            skill = await session.get(Skill, skill_id)
            if skill is None:
                return None
            for key, value in values.items():
                setattr(skill, key, value)
            skill.update_time = utcnow()
            try:
                await session.flush()
            except IntegrityError as exc:
                if is_unique_violation(exc):  # name is the only unique column written here
                    raise NameTaken(str(values.get("name", ""))) from exc
                raise
            await record(session, audit)
            await _bump(session)
            await session.commit()
            await session.refresh(skill)
            return skill

    @db_retry
    async def delete_skill(self, skill_id: str, audit: RouterAuditEvent) -> bool:
        async with self._sessions() as session:
            # Enablements go first: SQLite enforces no foreign keys by default.
            await session.exec(delete(SkillEnablement).where(col(SkillEnablement.skill_id) == skill_id))
            await session.exec(delete(SkillVector).where(col(SkillVector.skill_id) == skill_id))
            result = await session.exec(delete(Skill).where(col(Skill.id) == skill_id))
            if not result.rowcount:
                await session.rollback()
                return False
            await record(session, audit)
            await _bump(session)
            await session.commit()
            return True

    # Stored skill vectors

    @db_retry
    async def skill_vectors(self, embedder: str, dimension: int) -> dict[str, tuple[str, bytes]]:
        """skill id -> (text hash, vector) of ``embedder`` at ``dimension``."""
        async with self._sessions() as session:
            query = select(SkillVector).where(
                col(SkillVector.embedder) == embedder, col(SkillVector.dimension) == dimension
            )
            return {row.skill_id: (row.text_hash, row.vector) for row in (await session.exec(query)).all()}

    @db_retry
    async def store_skill_vectors(
        self, rows: Mapping[str, tuple[str, bytes]], embedder: str, dimension: int
    ) -> None:
        """Upserts skill id -> (text hash, vector) of ``embedder``, in one
        transaction. Not a catalog change: no revision bump. A skill deleted
        meanwhile loses its row with it (the foreign key)."""
        async with self._sessions() as session:
            existing = set((await session.exec(select(Skill.id).where(col(Skill.id).in_(list(rows))))).all())
            for skill_id, (text_hash, vector) in rows.items():
                if skill_id in existing:
                    await session.merge(
                        SkillVector(
                            skill_id=skill_id,
                            embedder=embedder,
                            dimension=dimension,
                            text_hash=text_hash,
                            vector=vector,
                            update_time=utcnow(),
                        )
                    )
            await session.commit()

    # Per-user enablement

    @db_retry
    async def enablements(self, user_id: str) -> dict[str, SkillEnablement]:
        async with self._sessions() as session:
            query = select(SkillEnablement).where(col(SkillEnablement.user_id) == user_id)
            return {row.skill_id: row for row in (await session.exec(query)).all()}

    @db_retry
    async def enablement(self, user_id: str, skill_id: str) -> SkillEnablement | None:
        async with self._sessions() as session:
            return await session.get(SkillEnablement, (user_id, skill_id))

    @db_retry
    async def set_enablement(self, user_id: str, skill_id: str, enabled: bool, auto_use: bool | None) -> None:
        """Writes the user's row, or deletes it when it says only the defaults."""
        async with self._sessions() as session:
            row = await session.get(SkillEnablement, (user_id, skill_id))
            if enabled and auto_use is None:
                if row is not None:
                    await session.delete(row)
            elif row is None:
                session.add(
                    SkillEnablement(user_id=user_id, skill_id=skill_id, enabled=enabled, auto_use=auto_use)
                )
            else:
                row.enabled, row.auto_use, row.update_time = enabled, auto_use, utcnow()
            await session.commit()

    # Feedback

    async def insert_feedback(self, feedback: SkillFeedback) -> SkillFeedback:
        """Inserts, or returns the feedback of the same (user, request_id)."""
        return await retry_if(
            bool(feedback.request_id),
            lambda: self._insert_feedback(feedback),
            "RouterRepository.insert_feedback",
        )

    async def _insert_feedback(self, feedback: SkillFeedback) -> SkillFeedback:
        async with self._sessions() as session:
            session.add(feedback)
            try:
                await session.commit()
                return feedback
            except IntegrityError as exc:
                if not is_unique_violation(exc):
                    raise
                await session.rollback()
            query = select(SkillFeedback).where(
                col(SkillFeedback.user_id) == feedback.user_id,
                col(SkillFeedback.request_id) == feedback.request_id,
            )
            return (await session.exec(query)).one()

    @db_retry
    async def list_feedback(
        self, user_id: str, before: tuple[datetime, str] | None, limit: int
    ) -> Sequence[SkillFeedback]:
        """The user's feedback, newest first, strictly before ``before``
        (create_time, id)."""
        async with self._sessions() as session:
            query = select(SkillFeedback).where(col(SkillFeedback.user_id) == user_id)
            if before is not None:
                at, last_id = before
                query = query.where(
                    or_(
                        col(SkillFeedback.create_time) < at,
                        (col(SkillFeedback.create_time) == at) & (col(SkillFeedback.id) < last_id),
                    )
                )
            query = query.order_by(col(SkillFeedback.create_time).desc(), col(SkillFeedback.id).desc())
            return (await session.exec(query.limit(limit))).all()
