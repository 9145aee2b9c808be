"""SQL of project context and live state, through SQLModel async sessions.
Every write of live state bumps the project's live revision in the
same transaction (services.memory.revisions), which watchers poll."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, func
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from services.memory.context.models import LiveState, ProjectContextRow
from services.memory.revisions import LIVE, RevisionedRepository, bump
from services.shared.db import dialect_insert
from services.shared.db_retry import db_retry
from services.shared.driver_rows import Loader


class ContextRepository(RevisionedRepository):
    """Reads and writes are retried when the database connection drops
    (services.shared.db_retry): every write here is an upsert or a delete,
    which a second run leaves as the first one did. The reads every chat
    run makes go straight to the driver."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        super().__init__(sessions)
        self._context = Loader(self._driver, ProjectContextRow)
        self._get_context = f"SELECT {self._context.select} FROM project_contexts WHERE project_id = $1"
        self._live = Loader(self._driver, LiveState)
        self._bind_time = self._driver.binder(self._live.columns["expire_time"])
        live = f"SELECT {self._live.select} FROM live_state "
        live += "WHERE project_id = $1 AND expire_time > $2 AND agent_id > $3 ORDER BY agent_id"
        self._list_live = live
        self._list_live_page = live + " LIMIT $4"

    # Project context

    @db_retry
    async def get_context(self, project: str) -> ProjectContextRow | None:
        row = await self._driver.fetchrow(self._get_context, project)
        return self._context(row) if row is not None else None

    @db_retry
    async def put_context(self, row: ProjectContextRow) -> ProjectContextRow:
        async with self._sessions() as session:
            statement = dialect_insert(session, ProjectContextRow).values(**row.model_dump())
            statement = statement.on_conflict_do_update(
                index_elements=[col(ProjectContextRow.project_id)],
                set_={
                    "body": statement.excluded.body,
                    "author_user_id": statement.excluded.author_user_id,
                    "update_time": statement.excluded.update_time,
                },
            )
            await session.exec(statement)
            await session.commit()
        return row

    # Live state

    @db_retry
    async def set_live(self, row: LiveState, now: datetime) -> LiveState:
        """Creates or replaces the agent's entry; drops the project's expired ones."""
        async with self._sessions() as session:
            await session.exec(
                delete(LiveState).where(
                    col(LiveState.project_id) == row.project_id,
                    col(LiveState.expire_time) <= now,
                )
            )
            values = row.model_dump()
            statement = dialect_insert(session, LiveState).values(**values)
            statement = statement.on_conflict_do_update(
                index_elements=[col(LiveState.project_id), col(LiveState.agent_id)],
                set_={
                    name: statement.excluded[name]
                    for name in ("activity", "detail", "author_user_id", "update_time", "expire_time")
                },
            )
            await session.exec(statement)
            await bump(session, row.project_id, LIVE)
            await session.commit()
        return row

    @db_retry
    async def list_live(
        self, project: str, now: datetime, after_agent: str = "", limit: int | None = None
    ) -> Sequence[LiveState]:
        """Unexpired entries by agent id, after ``after_agent``."""
        (expire_after,) = self._bind_time((now,))
        if limit is None:
            rows = await self._driver.fetch(self._list_live, project, expire_after, after_agent)
        else:
            rows = await self._driver.fetch(self._list_live_page, project, expire_after, after_agent, limit)
        return [self._live(row) for row in rows]

    @db_retry
    async def delete_live(self, project: str, agent_id: str | None, now: datetime) -> int:
        """Deletes one agent's entry (or all of the project's when None);
        returns how many unexpired entries went."""
        conditions = [col(LiveState.project_id) == project]
        if agent_id is not None:
            conditions.append(col(LiveState.agent_id) == agent_id)
        async with self._sessions() as session:
            live = (
                await session.exec(
                    select(func.count())
                    .select_from(LiveState)
                    .where(*conditions, col(LiveState.expire_time) > now)
                )
            ).one()
            await session.exec(delete(LiveState).where(*conditions))
            if live:
                await bump(session, project, LIVE)
            await session.commit()
            return int(live)
