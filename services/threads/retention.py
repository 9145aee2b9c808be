"""Retention of archived conversations: a conversation archived more than
the configured time ago is deleted with its entries. Off by default (no
limit). Agent threads (also given an archive time when retired) are never
pruned here: their log is the agents' record.

The prune runs once per interval across every replica (a lease taken for
the interval, services.shared.lease), in batches of short transactions; the
delete re-checks the conversation's archive time in its own statement, so a
conversation unarchived meanwhile is kept."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, and_, delete, select
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel import col

from services.shared.lease import OncePerInterval
from services.shared.metrics import RETENTION_PRUNED
from services.shared.time import utcnow
from services.threads.lease_models import ThreadsLease
from services.threads.models import Entry, Segment, Thread

log = logging.getLogger(__name__)

LEASE = "retention"
BATCH = 200


def _archived_before(cutoff: datetime) -> ColumnElement[bool]:
    return and_(
        col(Thread.kind) == "conversation",
        col(Thread.archive_time).is_not(None),
        col(Thread.archive_time) < cutoff,
    )


class ConversationRetention:
    def __init__(self, engine: AsyncEngine, keep: timedelta, interval_seconds: float, holder: str) -> None:
        self._engine = engine
        self._keep = keep
        self._interval = OncePerInterval(engine, ThreadsLease, LEASE, holder, interval_seconds)

    async def prune_if_due(self) -> int | None:
        """Prunes when this replica takes the interval's lease; None when
        another replica (or this one) pruned within the interval."""
        if not await self._interval.due():
            return None
        return await self.prune(utcnow())

    async def prune(self, now: datetime) -> int:
        """Deletes conversations archived before now - keep; returns how many."""
        cutoff = now - self._keep
        pruned = 0
        while True:
            async with self._engine.begin() as connection:
                ids = (
                    (
                        await connection.execute(
                            select(col(Thread.id)).where(_archived_before(cutoff)).limit(BATCH)
                        )
                    )
                    .scalars()
                    .all()
                )
                if not ids:
                    break
                still = select(col(Thread.id)).where(col(Thread.id).in_(ids), _archived_before(cutoff))
                await connection.execute(delete(Entry).where(col(Entry.thread_id).in_(still)))
                await connection.execute(delete(Segment).where(col(Segment.thread_id).in_(still)))
                result = await connection.execute(
                    delete(Thread).where(col(Thread.id).in_(ids), _archived_before(cutoff))
                )
                pruned += result.rowcount
        if pruned:
            RETENTION_PRUNED.labels("conversations").inc(pruned)
            log.info("retention pruned %d archived conversations", pruned)
        return pruned

    async def loop(self) -> None:
        """Tries every interval until cancelled; a failed prune is logged."""
        while True:
            try:
                await self.prune_if_due()
            except Exception:  # noqa: BLE001 - keep pruning through a database blip
                log.exception("retention prune failed")
            await asyncio.sleep(self._interval.seconds)
