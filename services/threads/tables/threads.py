"""SQL of the ``threads`` table: conversations and agent threads (an agent
thread is created with its open segment 1, in the same transaction)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, or_, tuple_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession
from sqlmodel.sql.expression import SelectOfScalar

from services.shared.db import is_unique_violation
from services.shared.db_retry import db_retry, retry_if
from services.shared.driver import Row
from services.threads.models import Thread, table_of
from services.threads.owners import ThreadOwner
from services.threads.tables.base import TableRepository, detached
from services.threads.tables.segments import open_segment


def live_agent_thread_query(agent_id: str) -> SelectOfScalar[Thread]:
    """The agent's one live (not archived) thread; uq_threads_live_agent."""
    return select(Thread).where(
        Thread.kind == "agent", Thread.agent_id == agent_id, col(Thread.archive_time).is_(None)
    )


class ThreadsTable(TableRepository):
    """Conversations are created idempotently only when they carry a request_id."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        super().__init__(sessions)
        self._read_thread = self._driver.reader(*_THREADS.c)

    def _thread(self, row: Row | None) -> Thread | None:
        """A detached Thread from a driver row of every column."""
        if row is None:
            return None
        return detached(Thread, _THREAD_NAMES, self._read_thread(row))

    @db_retry
    async def live_agent_thread(self, agent_id: str) -> Thread | None:
        return self._thread(await self._driver.fetchrow(_LIVE_AGENT_THREAD, agent_id))

    @db_retry
    async def insert_agent_thread(self, thread: Thread) -> bool:
        """False when the agent has a live thread already (the partial unique
        index uq_threads_live_agent refused this one). The thread starts with
        its open segment 1, in the same transaction."""
        async with self._sessions() as session:
            session.add(thread)
            try:
                await session.flush()
                session.add(open_segment(thread.id, 1, 1, thread.create_time))
                await session.commit()
            except IntegrityError as exc:
                if is_unique_violation(exc):
                    return False
                raise
            return True

    async def insert_conversation(self, thread: Thread) -> Thread:
        """Inserts, or returns the conversation created earlier with the same
        (user, request_id): a retried create writes once."""
        return await retry_if(
            bool(thread.request_id),
            lambda: self._insert_conversation(thread),
            "ThreadsTable.insert_conversation",
        )

    async def _insert_conversation(self, thread: Thread) -> Thread:
        async with self._sessions() as session:
            session.add(thread)
            try:
                await session.commit()
                return thread
            except IntegrityError as exc:
                if not (thread.request_id and is_unique_violation(exc)):
                    raise
            await session.rollback()
            query = select(Thread).where(
                Thread.user_id == thread.user_id, Thread.request_id == thread.request_id
            )
            return (await session.exec(query)).one()

    @db_retry
    async def get_thread(self, thread_id: str) -> Thread | None:
        """The thread as a detached object, read on the driver (no ORM loading)."""
        return self._thread(await self._driver.fetchrow(_THREAD, thread_id))

    @db_retry
    async def thread_owner(self, thread_id: str) -> ThreadOwner | None:
        """The thread's immutable ownership facts, in one indexed read."""
        row = await self._driver.fetchrow(_OWNER, thread_id)
        return None if row is None else ThreadOwner(*row)

    @db_retry
    async def list_conversations(
        self,
        user_id: str,
        cursor: tuple[bool, datetime, str] | None,
        limit: int,
        title_query: str = "",
        include_archived: bool = False,
    ) -> Sequence[Thread]:
        """Pinned first, then most recently active; keyset-paginated."""
        async with self._sessions() as session:
            query = select(Thread).where(Thread.kind == "conversation", Thread.user_id == user_id)
            if not include_archived:
                query = query.where(col(Thread.archive_time).is_(None))
            if title_query:
                # LIKE with % and _ escaped; case-insensitive (ASCII only on SQLite).
                query = query.where(col(Thread.title).icontains(title_query, autoescape=True))
            if cursor is not None:
                pinned, update_time, thread_id = cursor
                query = query.where(
                    tuple_(col(Thread.pinned), col(Thread.update_time), col(Thread.id))
                    < tuple_(pinned, update_time, thread_id)
                )
            query = query.order_by(
                col(Thread.pinned).desc(), col(Thread.update_time).desc(), col(Thread.id).desc()
            ).limit(limit)
            return (await session.exec(query)).all()

    @db_retry
    async def update_conversation(
        self,
        user_id: str,
        conversation_id: str,
        values: dict[str, Any],
        only_if_auto: bool = False,
        source_changes: dict[str, Any] | None = None,
    ) -> Thread | None:
        """Updates the user's conversation in one statement; None when it is not
        theirs, does not exist, or (``only_if_auto``) has a manual title.
        ``source_changes`` are allowed sources written over the stored ones
        (None: the source's default), in the same transaction as the read of
        the stored ones (locked where the database can), so two saves of
        different sources both land."""
        conditions = [
            col(Thread.id) == conversation_id,
            col(Thread.kind) == "conversation",
            col(Thread.user_id) == user_id,
        ]
        if only_if_auto:
            # Decided in the UPDATE itself, so a rename racing an automatic
            # title always wins.
            conditions.append(or_(col(Thread.title_auto).is_(True), col(Thread.title) == ""))
        async with self._sessions() as session:
            if source_changes:
                stored = (
                    await session.exec(select(Thread.sources_json).where(and_(*conditions)).with_for_update())
                ).one_or_none()
                if stored is None:
                    return None
                values = {**values, "sources_json": merged_sources(stored, source_changes)}
            result = await session.exec(
                update(Thread).where(and_(*conditions)).values(**values).returning(Thread)
            )
            thread = result.scalar_one_or_none()
            await session.commit()
            return thread


def merged_sources(stored: str, changes: dict[str, Any]) -> str:
    """The stored allowed sources (JSON) with ``changes`` written over them;
    a change to None removes the source's key (its default applies)."""
    sources = json.loads(stored or "{}")
    for name, value in changes.items():
        if value is None:
            sources.pop(name, None)
        else:
            sources[name] = value
    return json.dumps(sources, sort_keys=True)


_THREADS = table_of(Thread)
_THREAD_NAMES = [c.name for c in _THREADS.c]
# Hot-path reads, on the driver.
_THREAD = f"SELECT {', '.join(_THREAD_NAMES)} FROM threads WHERE id = $1"
# The partial unique index uq_threads_live_agent answers it.
_LIVE_AGENT_THREAD = (
    f"SELECT {', '.join(_THREAD_NAMES)} FROM threads"
    " WHERE kind = 'agent' AND agent_id = $1 AND archive_time IS NULL"
)
_OWNER = "SELECT id, kind, user_id, agent_id FROM threads WHERE id = $1"
