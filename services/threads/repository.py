"""SQL of the threads service, through SQLModel async sessions."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import insert, or_, tuple_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from services.shared.db import is_unique_violation
from services.shared.time import utcnow
from services.threads.models import Agent, Entry, Thread


@dataclass(frozen=True)
class NewEntry:
    requester: str
    target: str
    correlation_id: str
    role: int
    source: str
    run_id: str
    content: str


class ThreadsRepository:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    # Agents

    async def insert_agent(self, agent: Agent) -> bool:
        """False when an agent with this id exists already."""
        async with self._sessions() as session:
            session.add(agent)
            try:
                await session.commit()
            except IntegrityError as exc:
                if is_unique_violation(exc):
                    return False
                raise
            return True

    async def get_agent(self, agent_id: str) -> Agent | None:
        async with self._sessions() as session:
            return await session.get(Agent, agent_id)

    async def list_agents(self, after_id: str, limit: int) -> Sequence[Agent]:
        async with self._sessions() as session:
            query = select(Agent).where(col(Agent.id) > after_id).order_by(col(Agent.id)).limit(limit)
            return (await session.exec(query)).all()

    # Threads

    async def insert_conversation(self, thread: Thread) -> Thread:
        """Inserts, or returns the conversation created earlier with the same
        (user, request_id): a retried create writes once."""
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

    async def get_thread(self, thread_id: str) -> Thread | None:
        async with self._sessions() as session:
            return await session.get(Thread, thread_id)

    async def list_conversations(
        self, user_id: str, cursor: tuple[bool, str, str] | None, limit: int
    ) -> Sequence[Thread]:
        """Pinned first, then most recently active; keyset-paginated."""
        async with self._sessions() as session:
            query = select(Thread).where(Thread.kind == "conversation", Thread.user_id == user_id)
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

    # Entries

    async def append_entries(
        self, thread_id: str, user_id: str, request_id: str, entries: Sequence[NewEntry]
    ) -> list[Entry] | None:
        """Appends atomically with consecutive sequence numbers, in one
        transaction that also checks the thread is the user's (None when it is
        not, or does not exist). A retry with the same request_id changes
        nothing and returns the entries written the first time."""
        now = utcnow()
        async with self._sessions() as session:
            try:
                # One UPDATE reserves the sequence numbers and checks ownership:
                # a row lock on PostgreSQL, the write lock on SQLite; no gap, no
                # duplicate. Conversations belong to one user; agent threads
                # to the project's agents.
                result = await session.exec(
                    update(Thread)
                    .where(
                        col(Thread.id) == thread_id,
                        or_(col(Thread.kind) == "agent", col(Thread.user_id) == user_id),
                    )
                    .values(last_sequence=Thread.last_sequence + len(entries), update_time=now)
                    .returning(col(Thread.last_sequence))
                )
                last = result.scalar_one_or_none()
                if last is None:
                    return None
                rows = [
                    Entry(
                        id=str(uuid.uuid4()),
                        thread_id=thread_id,
                        sequence=last - len(entries) + index + 1,
                        request_id=request_id or None,
                        request_index=index,
                        create_time=now,
                        **entry.__dict__,
                    )
                    for index, entry in enumerate(entries)
                ]
                await session.exec(insert(Entry), params=[row.model_dump() for row in rows])
                await session.commit()
                return rows
            except IntegrityError as exc:
                if not (request_id and is_unique_violation(exc)):
                    raise
        # A retry (or a concurrent one) of the same request: the insert rolled
        # back with the sequence reservation; return what the first one wrote.
        return await self._entries_of_request(thread_id, request_id)

    async def _entries_of_request(self, thread_id: str, request_id: str) -> list[Entry]:
        async with self._sessions() as session:
            query = (
                select(Entry)
                .where(Entry.thread_id == thread_id, Entry.request_id == request_id)
                .order_by(col(Entry.request_index))
            )
            return list((await session.exec(query)).all())

    async def list_entries(
        self, thread_id: str, correlation_id: str, position: int | None, descending: bool, limit: int
    ) -> Sequence[Entry]:
        """Entries by sequence, strictly after ``position`` (ascending) or before
        it (descending, newest first). Index-backed on (thread_id, correlation_id, sequence)."""
        async with self._sessions() as session:
            query = select(Entry).where(Entry.thread_id == thread_id)
            if correlation_id:
                query = query.where(Entry.correlation_id == correlation_id)
            if descending:
                if position is not None:
                    query = query.where(col(Entry.sequence) < position)
                query = query.order_by(col(Entry.sequence).desc())
            else:
                query = query.where(col(Entry.sequence) > (position or 0)).order_by(col(Entry.sequence))
            return (await session.exec(query.limit(limit))).all()
