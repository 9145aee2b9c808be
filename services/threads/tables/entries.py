"""SQL of the ``entries`` table: appends (which count into the open segment
and may rotate it, in the same transaction) and the views' reads."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, false, insert, or_, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from services.shared.db import is_unique_violation
from services.shared.db_retry import db_retry, retry_if
from services.shared.time import utcnow
from services.threads.models import Entry, Segment, Thread
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


class EntriesTable(TableRepository):
    """Appends are retried only when they carry a request_id, whose unique
    key turns a retry after a lost commit reply into a no-op."""

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
        return await retry_if(
            bool(request_id),
            lambda: self._append(thread_id, user_id, request_id, entries, rotation),
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
                    closed = await count_and_rotate(session, thread_id, rows, now, rotation)
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


def _agent_thread_accepts(entries: Sequence[NewEntry]) -> Any:
    """An agent thread takes entries from any caller (one trust domain, seed
    000) when each names a requester and targets the thread's agent."""
    targets = {entry.target for entry in entries}
    if len(targets) != 1 or not all(entry.requester for entry in entries):
        return false()
    return and_(col(Thread.kind) == "agent", col(Thread.agent_id) == targets.pop())
