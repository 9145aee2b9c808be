"""Retention of the engine's records: run events of runs that ended long
enough ago, and those runs themselves (with their events, actions and skill
runs). Off by default (no limit: everything is kept).

The prune runs once per interval across every replica (a lease taken for
the interval, services.shared.lease), in batches of short transactions.
Every delete names only runs that have ended (status neither `running` nor
`waiting_approval`) before the cutoff, checked in the delete's own
statement: a run still running, or one that ends while the prune works, is
never touched, nor are its events."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, and_, delete, select
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel import col

from services.engine.lease_models import EngineLease
from services.engine.models import AgentAction, AgentRun, RunEventRow, RunStatus, SkillRun
from services.shared.lease import OncePerInterval
from services.shared.metrics import RETENTION_PRUNED
from services.shared.time import utcnow

log = logging.getLogger(__name__)

LEASE = "retention"
# Runs handled per transaction: short transactions, so that runs being
# written meanwhile never wait long on the prune.
BATCH = 500
# Statuses after which a run no longer changes (not running, not waiting for
# the user's decision).
UNSETTLED = (RunStatus.RUNNING, RunStatus.WAITING_APPROVAL)


@dataclass(frozen=True)
class RetentionPolicy:
    """How long records are kept after their run ended; None = forever."""

    run_events: timedelta | None = None
    runs: timedelta | None = None

    @classmethod
    def from_days(cls, run_events_days: float, runs_days: float) -> RetentionPolicy:
        return cls(
            timedelta(days=run_events_days) if run_events_days else None,
            timedelta(days=runs_days) if runs_days else None,
        )

    @property
    def enabled(self) -> bool:
        return self.run_events is not None or self.runs is not None


@dataclass(frozen=True)
class Pruned:
    runs: int = 0
    run_events: int = 0


def _ended_before(cutoff: datetime) -> ColumnElement[bool]:
    return and_(
        col(AgentRun.status).not_in(UNSETTLED),
        col(AgentRun.finished_at).is_not(None),
        col(AgentRun.finished_at) < cutoff,
    )


class Retention:
    def __init__(
        self, engine: AsyncEngine, policy: RetentionPolicy, interval_seconds: float, holder: str
    ) -> None:
        self._engine = engine
        self._policy = policy
        self._interval = OncePerInterval(engine, EngineLease, LEASE, holder, interval_seconds)

    async def prune_if_due(self) -> Pruned | None:
        """Prunes when this replica takes the interval's lease; None when
        another replica (or this one) pruned within the interval."""
        if not await self._interval.due():
            return None
        return await self.prune(utcnow())

    async def prune(self, now: datetime) -> Pruned:
        runs = events = 0
        if self._policy.runs is not None:
            runs, events = await self._prune_runs(now - self._policy.runs)
        if self._policy.run_events is not None:
            events += await self._prune_events(now - self._policy.run_events)
        if runs or events:
            RETENTION_PRUNED.labels("runs").inc(runs)
            RETENTION_PRUNED.labels("run_events").inc(events)
            log.info("retention pruned %d runs and %d run events", runs, events)
        return Pruned(runs, events)

    async def _prune_runs(self, cutoff: datetime) -> tuple[int, int]:
        runs = events = 0
        while True:
            async with self._engine.begin() as connection:
                ids = (
                    (
                        await connection.execute(
                            select(col(AgentRun.id)).where(_ended_before(cutoff)).limit(BATCH)
                        )
                    )
                    .scalars()
                    .all()
                )
                if not ids:
                    return runs, events
                # The run rows go in the same statement-checked way: a row
                # that no longer matches keeps its records too (same transaction).
                ended = select(col(AgentRun.id)).where(col(AgentRun.id).in_(ids), _ended_before(cutoff))
                for table in (AgentAction, SkillRun):
                    await connection.execute(delete(table).where(col(table.run_id).in_(ended)))
                result = await connection.execute(
                    delete(RunEventRow).where(col(RunEventRow.run_id).in_(ended))
                )
                events += result.rowcount
                result = await connection.execute(
                    delete(AgentRun).where(col(AgentRun.id).in_(ids), _ended_before(cutoff))
                )
                runs += result.rowcount

    async def _prune_events(self, cutoff: datetime) -> int:
        events = 0
        while True:
            async with self._engine.begin() as connection:
                ended = select(col(AgentRun.id)).where(_ended_before(cutoff))
                run_ids = (
                    (
                        await connection.execute(
                            select(col(RunEventRow.run_id))
                            .where(col(RunEventRow.run_id).in_(ended))
                            .distinct()
                            .limit(BATCH)
                        )
                    )
                    .scalars()
                    .all()
                )
                if not run_ids:
                    return events
                result = await connection.execute(
                    delete(RunEventRow).where(
                        col(RunEventRow.run_id).in_(run_ids),
                        col(RunEventRow.run_id).in_(select(col(AgentRun.id)).where(_ended_before(cutoff))),
                    )
                )
                events += result.rowcount

    async def loop(self) -> None:
        """Tries every interval (the lease makes it once per interval across
        replicas) until cancelled; a failed prune is logged and retried."""
        while True:
            try:
                await self.prune_if_due()
            except Exception:  # noqa: BLE001 - keep pruning through a database blip
                log.exception("retention prune failed")
            await asyncio.sleep(self._interval.seconds)
