"""SQL of schedules. A tick is claimed by compare-and-set on the row's
``next_run_at`` (under a transaction-scoped lock on PostgreSQL, so a second
replica skips the row instead of waiting on it): only one replica moves a
schedule from a given tick to the next, and the claim records the tick
(counted, pending its run) in that same transaction."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import and_, delete, func, or_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel import col, select

from services.engine.schedules.cron import TickPlan
from services.engine.schedules.models import Schedule
from services.shared.db import is_unique_violation, session_factory
from services.shared.db_retry import db_retry
from services.shared.driver import Driver
from services.shared.lease import try_lock
from services.shared.time import aware
from services.shared.wakeups import SCHEDULES, Wakeups


class SchedulesRepository:
    def __init__(self, engine: AsyncEngine, wakeups: Wakeups | None = None) -> None:
        """``wakeups``: the process's; by default one of this repository's own."""
        self._engine = engine
        self._sessions = session_factory(engine)
        self.wakeups = wakeups or Wakeups(driver=Driver(engine))

    async def insert(self, schedule: Schedule) -> Schedule:
        """Stores a new schedule (every replica's scheduler is woken); a
        retry with the user's same request_id gets the schedule its first
        attempt stored."""
        stored = await self._insert(schedule)
        await self.wakeups.notify(SCHEDULES.of())
        return stored

    @db_retry
    async def _insert(self, schedule: Schedule) -> Schedule:
        try:
            async with self._sessions() as session:
                session.add(schedule)
                await session.commit()
                await session.refresh(schedule)
                return schedule
        except IntegrityError as exc:
            if not is_unique_violation(exc):
                raise
            async with self._sessions() as session:
                # Its own id: a retry after a COMMIT whose reply was lost.
                stored = await session.get(Schedule, schedule.id)
                if stored is None and schedule.request_id:
                    query = select(Schedule).where(
                        Schedule.user_id == schedule.user_id, Schedule.request_id == schedule.request_id
                    )
                    stored = (await session.exec(query)).first()
            if stored is None or stored.user_id != schedule.user_id:
                raise
            return stored

    @db_retry
    async def get(self, user_id: str | None, schedule_id: str) -> Schedule | None:
        """The schedule; None when missing or (unless ``user_id`` is None,
        any user) another user's."""
        async with self._sessions() as session:
            row = await session.get(Schedule, schedule_id)
            return row if row is not None and user_id in (None, row.user_id) else None

    @db_retry
    async def list(
        self, user_id: str | None, after: tuple[datetime, str] | None, limit: int, agent_id: str = ""
    ) -> Sequence[Schedule]:
        """A user's schedules (every user's when ``user_id`` is None), only
        those of the agent ``agent_id`` when given, oldest first, strictly
        after (create_time, id)."""
        async with self._sessions() as session:
            query = select(Schedule)
            if user_id is not None:
                query = query.where(Schedule.user_id == user_id)
            if agent_id:
                query = query.where(Schedule.agent_id == agent_id)
            if after is not None:
                created, schedule_id = after
                query = query.where(
                    or_(
                        col(Schedule.create_time) > created,
                        and_(col(Schedule.create_time) == created, col(Schedule.id) > schedule_id),
                    )
                )
            query = query.order_by(col(Schedule.create_time), col(Schedule.id)).limit(limit)
            return (await session.exec(query)).all()

    @db_retry
    async def set_paused(
        self, user_id: str | None, schedule_id: str, paused: bool, next_run_at: datetime | None
    ) -> bool:
        """Pauses (next tick cleared) or resumes (next tick given); False for
        a missing or (unless ``user_id`` is None) foreign schedule. Unchanged
        when already so."""
        conditions = [col(Schedule.id) == schedule_id, col(Schedule.paused).is_(not paused)]
        if user_id is not None:
            conditions.append(col(Schedule.user_id) == user_id)
        async with self._engine.begin() as connection:
            result = await connection.execute(
                update(Schedule).where(*conditions).values(paused=paused, next_run_at=next_run_at)
            )
        if result.rowcount and not paused:
            await self.wakeups.notify(SCHEDULES.of())
        return bool(result.rowcount)

    @db_retry
    async def delete(self, user_id: str | None, schedule_id: str) -> bool:
        """False for a missing or (unless ``user_id`` is None) foreign schedule."""
        conditions = [col(Schedule.id) == schedule_id]
        if user_id is not None:
            conditions.append(col(Schedule.user_id) == user_id)
        async with self._engine.begin() as connection:
            result = await connection.execute(delete(Schedule).where(*conditions))
            return bool(result.rowcount)

    @db_retry
    async def due(self, now: datetime, stale_before: datetime, limit: int) -> Sequence[Schedule]:
        """Active schedules whose next tick has come, or whose claimed tick
        has waited for its run since before ``stale_before``."""
        async with self._sessions() as session:
            query = (
                select(Schedule)
                .where(
                    col(Schedule.paused).is_(False),
                    or_(
                        col(Schedule.next_run_at) <= now,
                        and_(
                            col(Schedule.pending_tick_at).is_not(None),
                            col(Schedule.pending_since) <= stale_before,
                        ),
                    ),
                )
                .order_by(col(Schedule.next_run_at))
                .limit(limit)
            )
            return (await session.exec(query)).all()

    @db_retry
    async def next_due(self, stale_after: timedelta) -> datetime | None:
        """The earliest time a look may find work: the next tick of an active
        schedule, or when a claimed tick's run goes stale."""
        async with self._sessions() as session:
            active = col(Schedule.paused).is_(False)
            query = select(
                select(func.min(Schedule.next_run_at)).where(active).scalar_subquery(),
                select(func.min(Schedule.pending_since))
                .where(active, col(Schedule.pending_tick_at).is_not(None))
                .scalar_subquery(),
            )
            tick, pending_since = (await session.exec(query)).one()
        times = [aware(tick)] if tick is not None else []
        if pending_since is not None:
            times.append(aware(pending_since) + stale_after)
        return min(times, default=None)

    @db_retry
    async def claim(self, schedule_id: str, observed: datetime, plan: TickPlan, now: datetime) -> bool:
        """Moves the schedule from its tick ``observed`` to ``plan.next_tick``,
        counting the missed ticks and, when the plan runs one, the tick as
        claimed and pending its run — in one transaction. False when another
        replica claimed it first (or it was paused, resumed or deleted)."""
        values: dict[str, object] = {
            "next_run_at": plan.next_tick,
            "missed_count": col(Schedule.missed_count) + len(plan.missed),
        }
        if plan.missed:
            values["last_missed_at"] = plan.missed[-1]
        if plan.run is not None:
            values |= {
                "run_count": col(Schedule.run_count) + 1,
                "last_run_at": plan.run,
                "last_run_id": None,
                "last_error": "",
                "pending_tick_at": plan.run,
                "pending_since": now,
            }
        async with self._engine.begin() as connection:
            if not await try_lock(connection, f"schedule:{schedule_id}"):
                return False
            result = await connection.execute(
                update(Schedule)
                .where(
                    col(Schedule.id) == schedule_id,
                    col(Schedule.paused).is_(False),
                    col(Schedule.next_run_at) == observed,
                )
                .values(**values)
            )
            return bool(result.rowcount)

    @db_retry
    async def reclaim(self, schedule_id: str, tick: datetime, stale_before: datetime, now: datetime) -> bool:
        """Takes over a claimed tick whose run was not recorded as started
        by ``stale_before`` (its claimant stopped); one replica wins."""
        async with self._engine.begin() as connection:
            if not await try_lock(connection, f"schedule:{schedule_id}"):
                return False
            result = await connection.execute(
                update(Schedule)
                .where(
                    col(Schedule.id) == schedule_id,
                    col(Schedule.pending_tick_at) == tick,
                    col(Schedule.pending_since) <= stale_before,
                )
                .values(pending_since=now)
            )
            return bool(result.rowcount)

    @db_retry
    async def started(self, schedule_id: str, tick: datetime, run_id: str, error: str) -> None:
        """The claimed ``tick`` started ``run_id`` ("" and ``error`` when it
        could not): no longer pending."""
        async with self._engine.begin() as connection:
            await connection.execute(
                update(Schedule)
                .where(col(Schedule.id) == schedule_id, col(Schedule.last_run_at) == tick)
                .values(last_run_id=run_id or None, last_error=error)
            )
            await connection.execute(
                update(Schedule)
                .where(col(Schedule.id) == schedule_id, col(Schedule.pending_tick_at) == tick)
                .values(pending_tick_at=None, pending_since=None)
            )
