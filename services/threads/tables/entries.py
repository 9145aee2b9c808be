"""SQL of the ``entries`` table: appends (which count into the open segment
and may rotate it, in the same transaction) and the views' reads."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Table, or_, select
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col
from sqlmodel import select as sqlmodel_select
from sqlmodel.ext.asyncio.session import AsyncSession

from services.shared.db import is_unique_violation
from services.shared.db_retry import db_retry, retry_if
from services.shared.driver import Result, Statement
from services.shared.time import utcnow
from services.threads.models import Entry, Segment, Thread, table_of
from services.threads.tables.base import TableRepository
from services.threads.tables.segments import RotationPolicy, SegmentCounter


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
    key turns a retry after a lost commit reply into a no-op. An append and
    the run's reads of entries go through the driver."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        super().__init__(sessions)
        self._bind_reservation = self._driver.binder(THREADS.c.update_time)
        self._bind_entry = self._driver.binder(*_ENTRY_COLUMNS)
        self._read_entry = self._driver.reader(*_ENTRY_COLUMNS)
        self._segments = SegmentCounter(self._driver)

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
        written: list[EntryRow] = []

        def insert_args(results: list[Result]) -> list[tuple[Any, ...]] | None:
            """The rows, numbered after the sequence the UPDATE reserved;
            nothing when it matched no thread of the caller's."""
            reserved = results[0].rows
            if not reserved:
                return None
            first = int(reserved[0][0]) - len(entries) + 1
            written.extend(
                _entry_row(thread_id, request_id, first, index, entry, now)
                for index, entry in enumerate(entries)
            )
            return [self._bind_entry(_in_column_order(row)) for row in written]

        def agent_last(results: list[Result]) -> int | None:
            reserved = results[0].rows
            return int(reserved[0][0]) if reserved and reserved[0][1] == "agent" else None

        # One UPDATE reserves the sequence numbers and checks ownership: a row
        # lock on PostgreSQL, the write lock on SQLite; no gap, no duplicate.
        # Conversations belong to one user; agent threads to the project's
        # agents. The rest of the batch depends on what it returned.
        reservation = (
            len(entries),
            *self._bind_reservation((now,)),
            thread_id,
            _agent_target(entries),
            user_id,
        )
        chars = sum(len(entry.content) for entry in entries)
        statements = [
            Statement(_RESERVE, reservation),
            Statement(_INSERT, insert_args, many=True),
            *self._segments.statements(thread_id, agent_last, len(entries), chars, now, rotation),
        ]
        try:
            results = await self._driver.batch(statements)
        except Exception as exc:
            if not (request_id and is_unique_violation(exc)):
                raise
            # A retry (or a concurrent one) of the same request: the insert
            # rolled back with the sequence reservation; return what the
            # first one wrote.
            return AppendResult(await self._entries_of_request(thread_id, request_id), [])
        if not results[0].rows:
            return None
        return AppendResult(written, self._segments.closed(results[-2]))

    @db_retry
    async def _entries_of_request(self, thread_id: str, request_id: str) -> list[EntryRow]:
        rows = await self._driver.fetch(_OF_REQUEST, thread_id, request_id)
        return [EntryRow(*self._read_entry(row)) for row in rows]

    @db_retry
    async def list_entries(
        self, thread_id: str, view: EntryFilter, position: int | None, ascending: bool, limit: int
    ) -> list[EntryRow]:
        """Entries by sequence, strictly after ``position`` (ascending) or before
        it (descending, newest first). Each filter has an index ending in
        sequence: (thread_id, sequence), (thread_id, correlation_id, sequence),
        (thread_id, requester, target, sequence); no scan of the thread."""
        args: list[Any] = [thread_id]
        conditions = ["thread_id = $1"]

        def where(condition: str, value: Any) -> None:
            args.append(value)
            conditions.append(f"{condition} ${len(args)}")

        for column, value in (
            ("correlation_id", view.correlation_id),
            ("requester", view.requester),
            ("target", view.target),
        ):
            if value:
                where(f"{column} =", value)
        if ascending:
            where("sequence >", position or 0)
        elif position is not None:
            where("sequence <", position)
        args.append(limit)
        order = "sequence" if ascending else "sequence DESC"
        sql = (
            f"SELECT {_ENTRY_NAMES} FROM entries WHERE {' AND '.join(conditions)}"
            f" ORDER BY {order} LIMIT ${len(args)}"
        )
        return [EntryRow(*self._read_entry(row)) for row in await self._driver.fetch(sql, *args)]

    @db_retry
    async def sequence_in_view(self, thread_id: str, view: EntryFilter, entry_id: str) -> int | None:
        """The sequence of the thread's entry ``entry_id``, when the view shows it."""
        row = await self._driver.fetchrow(_SEQUENCE_OF, thread_id, entry_id)
        if row is None:
            return None
        sequence, *fields = row
        shown = all(
            not wanted or value == wanted
            for wanted, value in zip((view.correlation_id, view.requester, view.target), fields, strict=True)
        )
        return int(sequence) if shown else None

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


def _entry_row(
    thread_id: str, request_id: str, first: int, index: int, entry: NewEntry, now: datetime
) -> EntryRow:
    return EntryRow(
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


def _in_column_order(row: EntryRow) -> tuple[Any, ...]:
    """The row's values in column order (``dataclasses.astuple`` would deep-copy)."""
    return tuple(getattr(row, name) for name in EntryRow.__slots__)


THREADS: Table = table_of(Thread)
ENTRIES: Table = table_of(Entry)
_ENTRY_COLUMNS = [ENTRIES.c[name] for name in EntryRow.__slots__]
_ENTRY_NAMES = ", ".join(EntryRow.__slots__)

# The append's statements (on the driver). Its first reserves the sequence
# numbers of the thread the caller may write to; " RETURNING " keeps its
# spaces: the driver reads the rows of such a write.
_RESERVE = (
    "UPDATE threads SET last_sequence = last_sequence + $1, update_time = $2"
    " WHERE id = $3 AND ((kind = 'agent' AND agent_id = $4) OR user_id = $5)"
    " RETURNING last_sequence, kind"
)
_INSERT = (
    f"INSERT INTO entries ({_ENTRY_NAMES})"
    f" VALUES ({', '.join(f'${n}' for n in range(1, len(EntryRow.__slots__) + 1))})"
)
_SEQUENCE_OF = (
    "SELECT sequence, correlation_id, requester, target FROM entries WHERE thread_id = $1 AND id = $2"
)
_OF_REQUEST = (
    f"SELECT {_ENTRY_NAMES} FROM entries WHERE thread_id = $1 AND request_id = $2 ORDER BY request_index"
)
