"""SQL of the ``segments`` table, and the rule and statements an append
applies to its thread's open segment."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Table, true, update
from sqlmodel import col, select

from services.shared.db_retry import db_retry
from services.shared.driver import Driver, Result, Statement
from services.shared.time import utcnow
from services.threads.models import Segment, table_of
from services.threads.tables.base import TableRepository, detached


@dataclass(frozen=True)
class RotationPolicy:
    """When the open segment of an agent thread closes."""

    after_entries: int
    after_chars: int

    def closes(self, entry_count: int, char_count: int) -> bool:
        """True once the segment holds this many entries or characters. The
        append that reaches a threshold stays whole in the closing segment."""
        return entry_count >= self.after_entries or char_count >= self.after_chars


class SegmentsTable(TableRepository):
    @db_retry
    async def list_segments(
        self, thread_id: str, after: int, limit: int, descending: bool = False
    ) -> Sequence[Segment]:
        """Segments numbered after ``after``, or before it (0: from the
        newest) when ``descending``."""
        async with self._sessions() as session:
            number = col(Segment.number)
            query = select(Segment).where(Segment.thread_id == thread_id)
            if descending:
                query = query.where((number < after) if after else true()).order_by(number.desc())
            else:
                query = query.where(number > after).order_by(number)
            query = query.limit(limit)
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

    async def all_segments(self, thread_id: str) -> Sequence[Segment]:
        return await self.list_segments(thread_id, 0, 2**31 - 1)


def open_segment(thread_id: str, number: int, first_sequence: int, now: datetime) -> Segment:
    return Segment(
        thread_id=thread_id,
        number=number,
        first_sequence=first_sequence,
        last_sequence=first_sequence - 1,
        status="open",
        open_time=now,
    )


class SegmentCounter:
    """The last statements of an append's batch: they count the appended
    entries into the agent thread's open segment and, when the rotation
    policy says it is full, close it (handoff pending) and open the next.
    Each runs only when the results before it call for it; the thread row
    the append's UPDATE locked serializes appends to the thread, so two
    appends racing at the threshold close one segment, never two."""

    def __init__(self, driver: Driver) -> None:
        self._bind_time = driver.binder(SEGMENTS.c.close_time)
        self._bind_segment = driver.binder(*SEGMENTS.c)
        self._read_segment = driver.reader(*SEGMENTS.c)

    def statements(
        self,
        thread_id: str,
        reserved: Callable[[list[Result]], int | None],
        count: int,
        chars: int,
        now: datetime,
        rotation: RotationPolicy | None,
    ) -> list[Statement]:
        """``reserved`` reads, from the batch's earlier results, the last
        sequence number the append reserved on an agent thread: None when it
        wrote nothing or the thread is a conversation (no segments)."""

        def count_args(results: list[Result]) -> tuple[Any, ...] | None:
            last = reserved(results)
            return None if last is None else (count, chars, last, thread_id)

        def close_args(results: list[Result]) -> tuple[Any, ...] | None:
            if reserved(results) is None:
                return None
            counted = results[-1].rows
            # Every agent thread has its open segment: created with the thread
            # (or by the import, or the 0003 migration), and the next opened
            # when one closes.
            if not counted:
                raise LookupError(f"agent thread {thread_id} has no open segment")
            number, entry_count, char_count = counted[0]
            if rotation is None or not rotation.closes(entry_count, char_count):
                return None
            return (*self._bind_time((now,)), thread_id, number)

        def open_args(results: list[Result]) -> tuple[Any, ...] | None:
            closed = self.closed(results[-1])
            if not closed:
                return None
            following = open_segment(thread_id, closed[0].number + 1, closed[0].last_sequence + 1, now)
            return self._bind_segment([getattr(following, c.name) for c in SEGMENTS.c])

        return [Statement(_COUNT, count_args), Statement(_CLOSE, close_args), Statement(_OPEN, open_args)]

    def closed(self, closing: Result) -> list[Segment]:
        """The segment the close statement (the second of ``statements``)
        closed, if it ran."""
        return [detached(Segment, _SEGMENT_NAMES, self._read_segment(row)) for row in closing.rows]


SEGMENTS: Table = table_of(Segment)
_SEGMENT_NAMES = [c.name for c in SEGMENTS.c]
_SEGMENT_COLUMNS = ", ".join(_SEGMENT_NAMES)
# " RETURNING " with its spaces: the driver reads the rows of such a write.
_COUNT = (
    "UPDATE segments SET entry_count = entry_count + $1, char_count = char_count + $2, last_sequence = $3"
    " WHERE thread_id = $4 AND status = 'open' RETURNING number, entry_count, char_count"
)
_CLOSE = (
    "UPDATE segments SET status = 'closed', handoff_status = 'pending', close_time = $1"
    f" WHERE thread_id = $2 AND number = $3 RETURNING {_SEGMENT_COLUMNS}"
)
_OPEN = (
    f"INSERT INTO segments ({_SEGMENT_COLUMNS})"
    f" VALUES ({', '.join(f'${n}' for n in range(1, len(_SEGMENT_NAMES) + 1))})"
)
