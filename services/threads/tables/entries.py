"""SQL of the ``entries`` table: appends (which count into the open segment
and may rotate it, in the same transaction) and the views' reads."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Table, and_, bindparam, insert, or_, select, update
from sqlalchemy.engine import Row
from sqlalchemy.exc import IntegrityError
from sqlmodel import col
from sqlmodel import select as sqlmodel_select

from services.shared.db import is_unique_violation
from services.shared.db_retry import db_retry, retry_if
from services.shared.time import utcnow
from services.threads.models import Entry, Segment, Thread, table_of
from services.threads.tables.base import TableRepository
from services.threads.tables.segments import RotationPolicy, count_and_rotate


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


@dataclass(frozen=True, slots=True)
class EntryRow:
    """An entry as read or written on the hot path: a plain row, no ORM
    object (no identity map, no attribute instrumentation)."""

    id: str
    thread_id: str
    sequence: int
    requester: str
    target: str
    correlation_id: str
    role: int
    source: str
    run_id: str
    content: str
    tool_calls_json: str
    tool_call_id: str
    request_id: str | None
    request_index: int
    create_time: datetime

    @classmethod
    def of(cls, row: Row[Any]) -> EntryRow:
        return cls(**row._mapping)


@dataclass(frozen=True)
class EntryFilter:
    """Which entries of a thread a view shows; empty fields do not filter."""

    correlation_id: str = ""
    requester: str = ""
    target: str = ""


@dataclass(frozen=True)
class AppendResult:
    entries: list[EntryRow]
    # Segments this append closed (at most one): their handoff is pending.
    closed: list[Segment]


class EntriesTable(TableRepository):
    """Appends are retried only when they carry a request_id, whose unique
    key turns a retry after a lost commit reply into a no-op."""

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
        return await retry_if(
            bool(request_id),
            lambda: self._append(thread_id, user_id, request_id, entries, rotation),
            "EntriesTable.append",
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
                connection = await session.connection()
                result = await connection.execute(
                    _RESERVE,
                    {
                        "p_thread": thread_id,
                        "p_user": user_id,
                        "p_agent": _agent_target(entries),
                        "p_count": len(entries),
                        "p_now": now,
                    },
                )
                reserved = result.one_or_none()
                if reserved is None:
                    return None
                last, kind = int(reserved[0]), str(reserved[1])
                first = last - len(entries) + 1
                rows = [
                    EntryRow(
                        id=str(uuid.uuid4()),
                        thread_id=thread_id,
                        sequence=first + index,
                        requester=entry.requester,
                        target=entry.target,
                        correlation_id=entry.correlation_id,
                        role=entry.role,
                        source=entry.source,
                        run_id=entry.run_id,
                        content=entry.content,
                        tool_calls_json=entry.tool_calls_json,
                        tool_call_id=entry.tool_call_id,
                        request_id=request_id or None,
                        request_index=index,
                        create_time=now,
                    )
                    for index, entry in enumerate(entries)
                ]
                await connection.execute(insert(ENTRIES), [_values(row) for row in rows])
                closed: list[Segment] = []
                if kind == "agent":
                    chars = sum(len(row.content) for row in rows)
                    closed = await count_and_rotate(session, thread_id, last, chars, len(rows), now, rotation)
                await session.commit()
                return AppendResult(rows, closed)
            except IntegrityError as exc:
                if not (request_id and is_unique_violation(exc)):
                    raise
        # A retry (or a concurrent one) of the same request: the insert rolled
        # back with the sequence reservation; return what the first one wrote.
        return AppendResult(await self._entries_of_request(thread_id, request_id), [])

    @db_retry
    async def _entries_of_request(self, thread_id: str, request_id: str) -> list[EntryRow]:
        query = (
            select(ENTRIES)
            .where(ENTRIES.c.thread_id == thread_id, ENTRIES.c.request_id == request_id)
            .order_by(ENTRIES.c.request_index)
        )
        async with self._connect() as connection:
            return [EntryRow.of(row) for row in await connection.execute(query)]

    @db_retry
    async def list_entries(
        self, thread_id: str, view: EntryFilter, position: int | None, ascending: bool, limit: int
    ) -> list[EntryRow]:
        """Entries by sequence, strictly after ``position`` (ascending) or before
        it (descending, newest first). Each filter has an index ending in
        sequence: (thread_id, sequence), (thread_id, correlation_id, sequence),
        (thread_id, requester, target, sequence); no scan of the thread."""
        c = ENTRIES.c
        query = select(ENTRIES).where(c.thread_id == thread_id)
        if view.correlation_id:
            query = query.where(c.correlation_id == view.correlation_id)
        if view.requester:
            query = query.where(c.requester == view.requester)
        if view.target:
            query = query.where(c.target == view.target)
        if ascending:
            query = query.where(c.sequence > (position or 0)).order_by(c.sequence)
        else:
            if position is not None:
                query = query.where(c.sequence < position)
            query = query.order_by(c.sequence.desc())
        async with self._connect() as connection:
            return [EntryRow.of(row) for row in await connection.execute(query.limit(limit))]

    @db_retry
    async def has_entries_outside(self, thread_id: str, view: EntryFilter) -> bool:
        """Whether the thread holds an entry the filter leaves out: a filtered
        view that happens to cover the whole thread is not partial."""
        c = ENTRIES.c
        wanted = [
            (column, value)
            for column, value in (
                (c.correlation_id, view.correlation_id),
                (c.requester, view.requester),
                (c.target, view.target),
            )
            if value
        ]
        if not wanted:
            return False
        # A NULL column (a turn with no correlation id) is outside the view too.
        outside = or_(*(or_(column.is_(None), column != value) for column, value in wanted))
        query = select(c.sequence).where(c.thread_id == thread_id, outside).limit(1)
        async with self._connect() as connection:
            return (await connection.execute(query)).first() is not None

    @db_retry
    async def entries_between(self, thread_id: str, first: int, last: int) -> Sequence[Entry]:
        """Entries first..last (sequence numbers, inclusive), in order."""
        async with self._sessions() as session:
            query = (
                sqlmodel_select(Entry)
                .where(
                    Entry.thread_id == thread_id, col(Entry.sequence) >= first, col(Entry.sequence) <= last
                )
                .order_by(col(Entry.sequence))
            )
            return (await session.exec(query)).all()


def _agent_target(entries: Sequence[NewEntry]) -> str | None:
    """The agent whose thread may take these entries from any caller (one
    trust domain: the agents of one workspace ask each other): each names a
    requester and all target that one agent. None otherwise (``agent_id =
    NULL`` matches no thread)."""
    targets = {entry.target for entry in entries}
    if len(targets) != 1 or not all(entry.requester for entry in entries):
        return None
    return targets.pop()


def _values(row: EntryRow) -> dict[str, Any]:
    return {name: getattr(row, name) for name in EntryRow.__slots__}


THREADS: Table = table_of(Thread)
ENTRIES: Table = table_of(Entry)

# The append's first statement, built once (SQLAlchemy caches its compiled
# form): reserves the sequence numbers of the thread the caller may write to.
_RESERVE = (
    update(THREADS)
    .where(
        THREADS.c.id == bindparam("p_thread"),
        or_(
            and_(THREADS.c.kind == "agent", THREADS.c.agent_id == bindparam("p_agent")),
            THREADS.c.user_id == bindparam("p_user"),
        ),
    )
    .values(last_sequence=THREADS.c.last_sequence + bindparam("p_count"), update_time=bindparam("p_now"))
    .returning(THREADS.c.last_sequence, THREADS.c.kind)
)
