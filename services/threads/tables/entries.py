"""SQL of the threads service, through SQLModel async sessions."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, delete, false, insert, or_, tuple_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession
from sqlmodel.sql.expression import SelectOfScalar

from services.shared.db import is_unique_violation
from services.shared.db_retry import db_retry, retry_transient
from services.shared.time import utcnow
from services.threads.models import Agent, Entry, ProviderSession, Segment, Thread
from services.threads.rotation import RotationPolicy


@dataclass(frozen=True)
class NewEntry:
    requester: str
    target: str
    correlation_id: str
    role: int
    source: str
    run_id: str
    content: str
    tool_calls_json: str = "[]"
    tool_call_id: str = ""


@dataclass(frozen=True)
class EntryFilter:
    """Which entries of a thread a view shows; empty fields do not filter."""

    correlation_id: str = ""
    requester: str = ""
    target: str = ""


@dataclass(frozen=True)
class AppendResult:
    entries: list[Entry]
    # Segments this append closed (at most one): their handoff is pending.
    closed: list[Segment]


@dataclass(frozen=True)
class ImportedThread:
    """An agent thread to write in one transaction (ImportAgentThread)."""

    thread_id: str
    agent_id: str
    entries: list[Entry]
    segments: list[Segment]
    sessions: list[ProviderSession]


class ThreadsRepository:
    """Reads and idempotent writes are retried when the database connection
    drops (services.shared.db_retry): appends and conversation creations only
    when they carry a request_id, whose unique key turns a retry after a lost
    commit reply into a no-op. Imports and provider-session writes are not."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    # Agents

    @db_retry
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

    @db_retry
    async def get_agent(self, agent_id: str) -> Agent | None:
        async with self._sessions() as session:
            return await session.get(Agent, agent_id)

    @db_retry
    async def list_agents(self, after_id: str, limit: int) -> Sequence[Agent]:
        async with self._sessions() as session:
            query = select(Agent).where(col(Agent.id) > after_id).order_by(col(Agent.id)).limit(limit)
            return (await session.exec(query)).all()

    @db_retry
    async def update_agent(self, agent_id: str, values: dict[str, Any]) -> Agent | None:
        async with self._sessions() as session:
            result = await session.exec(
                update(Agent)
                .where(col(Agent.id) == agent_id)
                .values(**values, update_time=utcnow())
                .returning(Agent)
            )
            agent = result.scalar_one_or_none()
            await session.commit()
            return agent

    # Agent threads

    @db_retry
    async def live_agent_thread(self, agent_id: str) -> Thread | None:
        async with self._sessions() as session:
            return (await session.exec(_live_agent_thread(agent_id))).one_or_none()

    @db_retry
    async def insert_agent_thread(self, thread: Thread) -> bool:
        """False when the agent has a live thread already (the partial unique
        index uq_threads_live_agent refused this one). The thread starts with
        its open segment 1, in the same transaction."""
        async with self._sessions() as session:
            session.add(thread)
            try:
                await session.flush()
                session.add(_open_segment(thread.id, 1, 1, thread.create_time))
                await session.commit()
            except IntegrityError as exc:
                if is_unique_violation(exc):
                    return False
                raise
            return True

    # Threads

    async def insert_conversation(self, thread: Thread) -> Thread:
        """Inserts, or returns the conversation created earlier with the same
        (user, request_id): a retried create writes once."""
        if not thread.request_id:
            return await self._insert_conversation(thread)
        return await retry_transient(
            lambda _attempt: self._insert_conversation(thread), "ThreadsRepository.insert_conversation"
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
        async with self._sessions() as session:
            return await session.get(Thread, thread_id)

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
        self, user_id: str, conversation_id: str, values: dict[str, Any], only_if_auto: bool = False
    ) -> Thread | None:
        """Updates the user's conversation in one statement; None when it is not
        theirs, does not exist, or (``only_if_auto``) has a manual title."""
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
            result = await session.exec(
                update(Thread).where(and_(*conditions)).values(**values).returning(Thread)
            )
            thread = result.scalar_one_or_none()
            await session.commit()
            return thread

    # Entries

    async def append_entries(
        self, thread_id: str, user_id: str, request_id: str, entries: Sequence[NewEntry]
    ) -> list[Entry] | None:
        """:meth:`append` without rotation (segment counters still kept)."""
        result = await self.append(thread_id, user_id, request_id, entries, None)
        return None if result is None else result.entries

    async def append(
        self,
        thread_id: str,
        user_id: str,
        request_id: str,
        entries: Sequence[NewEntry],
        rotation: RotationPolicy | None,
    ) -> AppendResult | None:
        """Appends atomically with consecutive sequence numbers, in one
        transaction that also checks the thread is the user's (None when it is
        not, or does not exist). A retry with the same request_id changes
        nothing and returns the entries written the first time.

        On an agent thread the same transaction counts the entries into the
        open segment and, when ``rotation`` says the segment is full, closes
        it and opens the next. The thread row locked by the first UPDATE
        serializes appends to the thread, so two appends racing at the
        threshold close one segment, never two."""
        if not request_id:
            return await self._append(thread_id, user_id, request_id, entries, rotation)
        return await retry_transient(
            lambda _attempt: self._append(thread_id, user_id, request_id, entries, rotation),
            "ThreadsRepository.append",
        )

    async def _append(
        self,
        thread_id: str,
        user_id: str,
        request_id: str,
        entries: Sequence[NewEntry],
        rotation: RotationPolicy | None,
    ) -> AppendResult | None:
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
                        or_(_agent_thread_accepts(entries), col(Thread.user_id) == user_id),
                    )
                    .values(last_sequence=Thread.last_sequence + len(entries), update_time=now)
                    .returning(col(Thread.last_sequence), col(Thread.kind))
                )
                reserved = result.one_or_none()
                if reserved is None:
                    return None
                last, kind = int(reserved[0]), str(reserved[1])
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
                closed: list[Segment] = []
                if kind == "agent":
                    closed = await _count_and_rotate(session, thread_id, rows, now, rotation)
                await session.commit()
                return AppendResult(rows, closed)
            except IntegrityError as exc:
                if not (request_id and is_unique_violation(exc)):
                    raise
        # A retry (or a concurrent one) of the same request: the insert rolled
        # back with the sequence reservation; return what the first one wrote.
        return AppendResult(await self._entries_of_request(thread_id, request_id), [])

    @db_retry
    async def _entries_of_request(self, thread_id: str, request_id: str) -> list[Entry]:
        async with self._sessions() as session:
            query = (
                select(Entry)
                .where(Entry.thread_id == thread_id, Entry.request_id == request_id)
                .order_by(col(Entry.request_index))
            )
            return list((await session.exec(query)).all())

    @db_retry
    async def list_entries(
        self, thread_id: str, view: EntryFilter, position: int | None, ascending: bool, limit: int
    ) -> Sequence[Entry]:
        """Entries by sequence, strictly after ``position`` (ascending) or before
        it (descending, newest first). Each filter has an index ending in
        sequence: (thread_id, sequence), (thread_id, correlation_id, sequence),
        (thread_id, requester, target, sequence); no scan of the thread."""
        async with self._sessions() as session:
            query = select(Entry).where(Entry.thread_id == thread_id)
            if view.correlation_id:
                query = query.where(Entry.correlation_id == view.correlation_id)
            if view.requester:
                query = query.where(Entry.requester == view.requester)
            if view.target:
                query = query.where(Entry.target == view.target)
            if ascending:
                query = query.where(col(Entry.sequence) > (position or 0)).order_by(col(Entry.sequence))
            else:
                if position is not None:
                    query = query.where(col(Entry.sequence) < position)
                query = query.order_by(col(Entry.sequence).desc())
            return (await session.exec(query.limit(limit))).all()

    # Segments (rotation)

    @db_retry
    async def list_segments(self, thread_id: str, after: int, limit: int) -> Sequence[Segment]:
        async with self._sessions() as session:
            query = (
                select(Segment)
                .where(Segment.thread_id == thread_id, col(Segment.number) > after)
                .order_by(col(Segment.number))
                .limit(limit)
            )
            return (await session.exec(query)).all()

    @db_retry
    async def get_segment(self, thread_id: str, number: int) -> Segment | None:
        async with self._sessions() as session:
            return await session.get(Segment, (thread_id, number))

    @db_retry
    async def set_segment_handoff(self, thread_id: str, number: int, summary: str) -> Segment | None:
        """Stores the handoff of a closed segment (replacing an earlier one);
        None when there is no such closed segment."""
        async with self._sessions() as session:
            result = await session.exec(
                update(Segment)
                .where(
                    col(Segment.thread_id) == thread_id,
                    col(Segment.number) == number,
                    col(Segment.status) == "closed",
                )
                .values(handoff_summary=summary, handoff_status="ready", handoff_time=utcnow())
                .returning(Segment)
            )
            segment = result.scalar_one_or_none()
            await session.commit()
            return segment

    # Export and import

    @db_retry
    async def entries_between(self, thread_id: str, first: int, last: int) -> Sequence[Entry]:
        """Entries first..last (sequence numbers, inclusive), in order."""
        async with self._sessions() as session:
            query = (
                select(Entry)
                .where(
                    Entry.thread_id == thread_id, col(Entry.sequence) >= first, col(Entry.sequence) <= last
                )
                .order_by(col(Entry.sequence))
            )
            return (await session.exec(query)).all()

    async def all_segments(self, thread_id: str) -> Sequence[Segment]:
        return await self.list_segments(thread_id, 0, 2**31 - 1)

    @db_retry
    async def all_provider_sessions(self, thread_id: str) -> Sequence[ProviderSession]:
        async with self._sessions() as session:
            query = (
                select(ProviderSession)
                .where(ProviderSession.agent_thread_id == thread_id)
                .order_by(col(ProviderSession.create_time), col(ProviderSession.id))
            )
            return (await session.exec(query)).all()

    async def import_agent_thread(self, imported: ImportedThread) -> str | None:
        """Writes an imported agent thread in one transaction: the agent if it
        is missing, the thread (or the agent's empty live thread, reused), its
        entries, segments and provider sessions; returns the thread id. None when the agent has a
        live thread with entries, or a unique index refuses a row (another
        import won, the thread id or a live provider session is taken)."""
        now = utcnow()
        last = imported.entries[-1].sequence if imported.entries else 0
        async with self._sessions() as session:
            try:
                if await session.get(Agent, imported.agent_id) is None:
                    session.add(Agent(id=imported.agent_id, display_name=imported.agent_id))
                    await session.flush()
                live = (await session.exec(_live_agent_thread(imported.agent_id))).one_or_none()
                if live is None:
                    thread_id = imported.thread_id
                    session.add(
                        Thread(
                            id=thread_id,
                            kind="agent",
                            agent_id=imported.agent_id,
                            last_sequence=last,
                            create_time=now,
                            update_time=now,
                        )
                    )
                    await session.flush()
                else:
                    thread_id = live.id
                    # Compare-and-set on the empty thread: a concurrent append
                    # or import makes this match nothing.
                    claimed = await session.exec(
                        update(Thread)
                        .where(col(Thread.id) == thread_id, col(Thread.last_sequence) == 0)
                        .values(last_sequence=last, update_time=now)
                        .returning(col(Thread.id))
                    )
                    if claimed.one_or_none() is None:
                        return None
                    await session.exec(delete(Segment).where(col(Segment.thread_id) == thread_id))
                for entry in imported.entries:
                    entry.thread_id = thread_id
                for segment in imported.segments:
                    segment.thread_id = thread_id
                for row in imported.sessions:
                    row.agent_thread_id = thread_id
                if imported.entries:
                    await session.exec(insert(Entry), params=[e.model_dump() for e in imported.entries])
                session.add_all([*imported.segments, *imported.sessions])
                await session.commit()
            except IntegrityError as exc:
                if is_unique_violation(exc):
                    return None
                raise
            return thread_id

    # Provider sessions

    @db_retry
    async def live_provider_session(self, thread_id: str, provider_id: str) -> ProviderSession | None:
        async with self._sessions() as session:
            query = select(ProviderSession).where(
                ProviderSession.agent_thread_id == thread_id,
                ProviderSession.provider_id == provider_id,
                col(ProviderSession.release_time).is_(None),
            )
            return (await session.exec(query)).one_or_none()

    async def bind_provider_session(self, row: ProviderSession, replace: bool) -> bool:
        """Inserts ``row`` as the live session of its key, first releasing a live
        one when ``replace``, in one transaction. False when another live
        session holds the key (the partial unique index refused the insert)."""
        async with self._sessions() as session:
            try:
                if replace:
                    await session.exec(
                        update(ProviderSession)
                        .where(
                            col(ProviderSession.agent_thread_id) == row.agent_thread_id,
                            col(ProviderSession.provider_id) == row.provider_id,
                            col(ProviderSession.release_time).is_(None),
                        )
                        .values(release_time=row.create_time)
                    )
                session.add(row)
                await session.commit()
                return True
            except IntegrityError as exc:
                if is_unique_violation(exc):
                    return False
                raise

    async def release_provider_session(self, thread_id: str, provider_id: str) -> ProviderSession | None:
        async with self._sessions() as session:
            result = await session.exec(
                update(ProviderSession)
                .where(
                    col(ProviderSession.agent_thread_id) == thread_id,
                    col(ProviderSession.provider_id) == provider_id,
                    col(ProviderSession.release_time).is_(None),
                )
                .values(release_time=utcnow())
                .returning(ProviderSession)
            )
            released = result.scalar_one_or_none()
            await session.commit()
            return released

    @db_retry
    async def list_provider_sessions(
        self, thread_id: str, include_released: bool, after: tuple[str, str] | None, limit: int
    ) -> Sequence[ProviderSession]:
        """By provider, then id; keyset-paginated."""
        async with self._sessions() as session:
            query = select(ProviderSession).where(ProviderSession.agent_thread_id == thread_id)
            if not include_released:
                query = query.where(col(ProviderSession.release_time).is_(None))
            if after is not None:
                query = query.where(
                    tuple_(col(ProviderSession.provider_id), col(ProviderSession.id)) > tuple_(*after)
                )
            query = query.order_by(col(ProviderSession.provider_id), col(ProviderSession.id)).limit(limit)
            return (await session.exec(query)).all()


def _live_agent_thread(agent_id: str) -> SelectOfScalar[Thread]:
    """The agent's one live (not archived) thread; uq_threads_live_agent."""
    return select(Thread).where(
        Thread.kind == "agent", Thread.agent_id == agent_id, col(Thread.archive_time).is_(None)
    )


def _agent_thread_accepts(entries: Sequence[NewEntry]) -> Any:
    """An agent thread takes entries from any caller (one trust domain, seed
    000) when each names a requester and targets the thread's agent."""
    targets = {entry.target for entry in entries}
    if len(targets) != 1 or not all(entry.requester for entry in entries):
        return false()
    return and_(col(Thread.kind) == "agent", col(Thread.agent_id) == targets.pop())


def _open_segment(thread_id: str, number: int, first_sequence: int, now: datetime) -> Segment:
    return Segment(
        thread_id=thread_id,
        number=number,
        first_sequence=first_sequence,
        last_sequence=first_sequence - 1,
        status="open",
        open_time=now,
    )


async def _count_and_rotate(
    session: AsyncSession,
    thread_id: str,
    rows: Sequence[Entry],
    now: datetime,
    rotation: RotationPolicy | None,
) -> list[Segment]:
    """Inside the append's transaction: adds ``rows`` to the open segment and,
    when ``rotation`` says it is full, closes it (handoff pending) and opens
    the next one. Returns the closed segment, if any."""
    last = rows[-1].sequence
    chars = sum(len(row.content) for row in rows)
    result = await session.exec(
        update(Segment)
        .where(col(Segment.thread_id) == thread_id, col(Segment.status) == "open")
        .values(
            entry_count=Segment.entry_count + len(rows),
            char_count=Segment.char_count + chars,
            last_sequence=last,
        )
        .returning(Segment)
    )
    # Every agent thread has its open segment: created with the thread (or by
    # the import, or the 0003 migration), and the next opened when one closes.
    segment = result.scalar_one()
    if rotation is None or not rotation.closes(segment.entry_count, segment.char_count):
        return []
    closed = await session.exec(
        update(Segment)
        .where(col(Segment.thread_id) == thread_id, col(Segment.number) == segment.number)
        .values(status="closed", handoff_status="pending", close_time=now)
        .returning(Segment)
    )
    closed_segment = closed.scalar_one()
    session.add(_open_segment(thread_id, segment.number + 1, last + 1, now))
    await session.flush()
    return [closed_segment]
