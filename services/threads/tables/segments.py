"""SQL of the ``segments`` table, and the rule and statements an append
applies to its thread's open segment."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Table, bindparam, true, update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from services.shared.db_retry import db_retry
from services.shared.time import utcnow
from services.threads.models import Segment, table_of
from services.threads.tables.base import TableRepository


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


async def count_and_rotate(
    session: AsyncSession,
    thread_id: str,
    last: int,
    chars: int,
    count: int,
    now: datetime,
    rotation: RotationPolicy | None,
) -> list[Segment]:
    """Inside the append's transaction: adds ``count`` entries (up to sequence
    ``last``, ``chars`` characters) to the open segment and, when ``rotation``
    says it is full, closes it (handoff pending) and opens the next one.
    Returns the closed segment, if any. The counting UPDATE returns only the
    counters: a segment is loaded as an object only when it closes."""
    connection = await session.connection()
    result = await connection.execute(
        _COUNT, {"p_thread": thread_id, "p_count": count, "p_chars": chars, "p_last": last}
    )
    # Every agent thread has its open segment: created with the thread (or by
    # the import, or the 0003 migration), and the next opened when one closes.
    number, entry_count, char_count = result.one()
    if rotation is None or not rotation.closes(entry_count, char_count):
        return []
    closed = await session.exec(
        update(Segment)
        .where(col(Segment.thread_id) == thread_id, col(Segment.number) == number)
        .values(status="closed", handoff_status="pending", close_time=now)
        .returning(Segment)
    )
    closed_segment = closed.scalar_one()
    session.add(open_segment(thread_id, number + 1, last + 1, now))
    await session.flush()
    return [closed_segment]


SEGMENTS: Table = table_of(Segment)

# Built once (SQLAlchemy caches its compiled form): counts an append into the
# thread's open segment.
_COUNT = (
    update(SEGMENTS)
    .where(SEGMENTS.c.thread_id == bindparam("p_thread"), SEGMENTS.c.status == "open")
    .values(
        entry_count=SEGMENTS.c.entry_count + bindparam("p_count"),
        char_count=SEGMENTS.c.char_count + bindparam("p_chars"),
        last_sequence=bindparam("p_last"),
    )
    .returning(SEGMENTS.c.number, SEGMENTS.c.entry_count, SEGMENTS.c.char_count)
)
