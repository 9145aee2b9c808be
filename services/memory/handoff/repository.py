"""SQL of handoff summaries, through SQLModel async sessions."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, update
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from services.memory.handoff.models import HandoffPendingEntry, HandoffSummaryRow
from services.shared.db import dialect_insert
from services.shared.db_retry import db_retry
from services.shared.driver_rows import Loader
from services.shared.gathered_reads import driver_of
from services.shared.time import utcnow


class HandoffRepository:
    """Reads and ``record`` (entries keyed by sequence, skipped when present)
    are retried when the database connection drops (services.shared.db_retry);
    a checkpoint is not: a second run would find its own fold and report
    that another checkpoint won. The reads of a chat run's summary go
    straight to the driver."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions
        self._driver = driver_of(sessions)
        self._summary = Loader(self._driver, HandoffSummaryRow, alias="s")
        self._get = f"SELECT {self._summary.select} FROM handoff_summaries s WHERE s.thread_id = $1"
        self._get_with_pending = (
            f"SELECT {self._summary.select}, (SELECT count(*) FROM handoff_entries e "
            "WHERE e.thread_id = s.thread_id AND e.sequence > s.last_folded_sequence) "
            "FROM handoff_summaries s WHERE s.thread_id = $1"
        )

    @db_retry
    async def record(
        self, thread_id: str, entries: Sequence[HandoffPendingEntry], owner: str | None = None
    ) -> tuple[int, int] | None:
        """Stores the entries not seen before (neither pending nor folded) in
        one transaction, creating the thread's summary row on first use (owned
        by ``owner`` when given). Returns (entries stored now, entries pending
        after), or None when the row belongs to another user than ``owner``."""
        async with self._sessions() as session:
            await session.exec(
                dialect_insert(session, HandoffSummaryRow)
                .values(
                    thread_id=thread_id,
                    state_json="{}",
                    last_folded_sequence=0,
                    update_time=utcnow(),
                    owner_user_id=owner,
                    summariser="",
                    fallback_reason="",
                )
                .on_conflict_do_nothing(index_elements=["thread_id"])
            )
            row = await session.get(HandoffSummaryRow, thread_id)
            assert row is not None
            if row.owner_user_id is not None and row.owner_user_id != owner:
                await session.rollback()
                return None
            folded = row.last_folded_sequence
            fresh = [entry for entry in entries if entry.sequence > folded]
            stored = 0
            if fresh:
                result = await session.exec(
                    dialect_insert(session, HandoffPendingEntry)
                    .values([entry.model_dump() for entry in fresh])
                    .on_conflict_do_nothing(index_elements=["thread_id", "sequence"])
                )
                stored = int(getattr(result, "rowcount", 0) or 0)
            await session.commit()
        return stored, await self.pending_count(thread_id, folded)

    @db_retry
    async def get(self, thread_id: str) -> HandoffSummaryRow | None:
        row = await self._driver.fetchrow(self._get, thread_id)
        return self._summary(row) if row is not None else None

    @db_retry
    async def get_with_pending(self, thread_id: str) -> tuple[HandoffSummaryRow | None, int]:
        """The thread's row and how many entries wait after its last fold (0
        without a row), in one read."""
        row = await self._driver.fetchrow(self._get_with_pending, thread_id)
        return (self._summary(row), int(row[-1])) if row is not None else (None, 0)

    @db_retry
    async def pending(self, thread_id: str, after: int) -> Sequence[HandoffPendingEntry]:
        async with self._sessions() as session:
            query = (
                select(HandoffPendingEntry)
                .where(HandoffPendingEntry.thread_id == thread_id, col(HandoffPendingEntry.sequence) > after)
                .order_by(col(HandoffPendingEntry.sequence))
            )
            return (await session.exec(query)).all()

    @db_retry
    async def pending_count(self, thread_id: str, after: int) -> int:
        row = await self._driver.fetchrow(
            "SELECT count(*) FROM handoff_entries WHERE thread_id = $1 AND sequence > $2", thread_id, after
        )
        return int(row[0]) if row is not None else 0

    async def store_checkpoint(
        self,
        thread_id: str,
        folded_before: int,
        folded_now: int,
        state_json: str,
        reason: int,
        summariser: str = "",
        fallback_reason: str = "",
    ) -> bool:
        """Stores the folded state if the thread is still at ``folded_before``
        (False otherwise: another checkpoint won), and deletes the entries it
        covers."""
        now = utcnow()
        async with self._sessions() as session:
            moved = await session.exec(
                update(HandoffSummaryRow)
                .where(
                    col(HandoffSummaryRow.thread_id) == thread_id,
                    col(HandoffSummaryRow.last_folded_sequence) == folded_before,
                )
                .values(
                    state_json=state_json,
                    last_folded_sequence=folded_now,
                    last_checkpoint_reason=reason,
                    checkpoint_time=now,
                    update_time=now,
                    summariser=summariser,
                    fallback_reason=fallback_reason,
                )
            )
            if int(getattr(moved, "rowcount", 0) or 0) != 1:
                await session.rollback()
                return False
            await session.exec(
                delete(HandoffPendingEntry).where(
                    col(HandoffPendingEntry.thread_id) == thread_id,
                    col(HandoffPendingEntry.sequence) <= folded_now,
                )
            )
            await session.commit()
            return True
