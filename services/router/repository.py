"""SQL of the router service, through SQLModel async sessions."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, func, select
from sqlmodel.ext.asyncio.session import AsyncSession

from services.router.models import Skill


class RouterRepository:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def list_skills(self, after_name: str, limit: int) -> Sequence[Skill]:
        """Skills by name, strictly after ``after_name``."""
        async with self._sessions() as session:
            query = select(Skill).where(col(Skill.name) > after_name).order_by(col(Skill.name)).limit(limit)
            return (await session.exec(query)).all()

    async def skills_named(self, names: Sequence[str]) -> dict[str, Skill]:
        if not names:
            return {}
        async with self._sessions() as session:
            rows = (await session.exec(select(Skill).where(col(Skill.name).in_(names)))).all()
            return {skill.name: skill for skill in rows}

    async def auto_candidates(self) -> Sequence[Skill]:
        """The skills the router may choose by itself: not built in, marked for
        automatic use, with a description to match against."""
        async with self._sessions() as session:
            query = (
                select(Skill)
                .where(
                    col(Skill.builtin).is_(False),
                    col(Skill.auto_use).is_(True),
                    func.length(func.trim(col(Skill.description))) > 0,
                )
                .order_by(col(Skill.name))
            )
            return (await session.exec(query)).all()
