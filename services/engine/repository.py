"""SQL of the engine: runs, their events, instance leases."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, delete, func, insert, or_, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlmodel import col, select

from services.engine.models import AgentAction, AgentRun, EngineInstance, RunEventRow, RunStatus, SkillRun
from services.engine.quotas import RunQuota
from services.engine.run_sql import QUOTA_LOCK_CLASS, RunStatements
from services.engine.webhooks.models import WebhookOutbox
from services.engine.webhooks.outbox import outbox_row
from services.shared.db import is_unique_violation, session_factory
from services.shared.db_retry import db_retry, retry_transient
from services.shared.driver import Driver
from services.shared.errors import Exhausted, FailedPrecondition
from services.shared.time import utcnow
from services.shared.wakeups import RUN_CANCEL, RUN_EVENTS, THREAD_FREE, WEBHOOKS, Wake, Wakeups


class RunsRepository:
    """The statements of every run (insert, queue check, events, finish) run
    on the driver (services.engine.run_sql), a tenth of the CPU of the same
    statements through SQLAlchemy. Reads and rare writes use sessions.

    Every method is retried when the database connection drops
    (services.shared.db_retry), and each is safe to run twice: a retry after
    a commit whose reply was lost finds its rows and adds none."""

    def __init__(self, engine: AsyncEngine, wakeups: Wakeups | None = None) -> None:
        """``wakeups``: the process's (shared with every waiter); by default
        one of this repository's own, with the default safety poll."""
        self._engine = engine
        self._sessions = session_factory(engine)
        self._driver = Driver(engine)
        self._sql = RunStatements(self._driver)
        self.wakeups = wakeups or Wakeups(driver=self._driver)

    @db_retry
    async def insert_run(
        self, run: AgentRun, first_event: bytes, reject_busy: bool = False, quota: RunQuota | None = None
    ) -> AgentRun | None:
        """Writes the run row with its first event in one transaction. None when
        the user already has a run with this request_id (the caller replays it).
        ``reject_busy``: FailedPrecondition instead when a run is active on the
        thread — checked in the same transaction (under the thread's lock on
        PostgreSQL), so concurrent requests cannot all find the thread idle.
        ``quota``: the user's run quota, checked the same way under a lock of
        the user's (TooManyRuns / RateLimited), so concurrent requests on
        several replicas cannot all fit under it."""
        try:
            if await self._insert_if_room(run, first_event, reject_busy, quota):
                return run
            # Refused in the first transaction: this one says why, or inserts
            # the run when a run ended meanwhile.
            return await self._insert_deciding(run, first_event, reject_busy, quota)
        except Exception as exc:  # the driver's own errors too (sqlite3, asyncpg)
            if not is_unique_violation(exc):
                raise
            if (stored := await self.get_run(run.id)) is not None:
                run.started_at = stored.started_at  # the stamp that committed (runs_ahead)
                return run  # an earlier attempt committed, its reply was lost: this is our run
            if run.request_id:
                return None
            raise

    async def _insert_if_room(
        self, run: AgentRun, first_event: bytes, reject_busy: bool, quota: RunQuota | None
    ) -> bool:
        """One transaction that writes the run and its first event when the
        thread is idle (``reject_busy``) and the quota has room, and nothing
        otherwise (False). The common case: a run that is not refused."""
        limits = quota if quota is not None and quota.limits_anything else None
        statements = self._sql.insert_run(run, first_event, reject_busy, limits, utcnow())
        inserted = (await self._driver.batch(statements))[-2]
        if not inserted.rowcount:
            return False
        if inserted.rows:  # PostgreSQL: the database's clock, read under the thread's lock
            run.started_at = inserted.rows[0][0]
        return True

    async def _insert_deciding(
        self, run: AgentRun, first_event: bytes, reject_busy: bool, quota: RunQuota | None
    ) -> AgentRun | None:
        """insert_run's refusals, decided in one transaction (SQLAlchemy's:
        refusals are rare): FailedPrecondition, the quota's refusal, None for
        a retry of a run that fitted, or the run inserted after all."""
        async with self._engine.begin() as connection:
            if connection.dialect.name == "postgresql" and run.conversation_id:
                # The runs of a thread are inserted one at a time and stamped
                # in that order, so the start order is the commit order: a
                # run that finds no run ahead of it (runs_ahead) cannot have
                # an earlier one commit after it looked (two runs on one
                # thread at once). SQLite has a single writer per file.
                lock = func.pg_advisory_xact_lock(func.hashtext(run.conversation_id))
                await connection.execute(select(lock))
                run.started_at = (await connection.execute(select(func.clock_timestamp()))).scalar_one()
            if reject_busy and run.conversation_id:
                active = await connection.execute(
                    select(AgentRun.id, AgentRun.user_id).where(
                        AgentRun.conversation_id == run.conversation_id, AgentRun.status == RunStatus.RUNNING
                    )
                )
                if rows := active.all():
                    # Another user's run id (a shared agent thread) is not theirs to know.
                    own = [row[0] for row in rows if row[1] == run.user_id]
                    raise FailedPrecondition(
                        "a run is already active on this conversation; retry later or queue",
                        **({"active_run_id": own[0]} if own else {}),
                    )
            if quota is not None and quota.limits_anything:
                refusal = await self._quota_refusal(connection, run, quota)
                if refusal is not None:
                    if run.request_id and await self._has_request(connection, run):
                        return None  # a retry of a run that fitted: it is replayed, not refused
                    raise refusal
            await connection.execute(insert(AgentRun), [run.model_dump()])
            await connection.execute(
                insert(RunEventRow), [{"run_id": run.id, "sequence": 1, "payload": first_event}]
            )
        return run

    @staticmethod
    async def _quota_refusal(connection: AsyncConnection, run: AgentRun, quota: RunQuota) -> Exhausted | None:
        """The user's running runs and recent starts, read after taking the
        user's lock on PostgreSQL (SQLite has a single writer per file), and
        what the quota says of one more run."""
        if connection.dialect.name == "postgresql":
            lock = func.pg_advisory_xact_lock(QUOTA_LOCK_CLASS, func.hashtext(run.user_id))
            await connection.execute(select(lock))
        now = utcnow()
        mine = AgentRun.user_id == run.user_id
        in_window = col(AgentRun.created_at) > quota.window_start(now)
        # Both counts in one round trip, each on its own index.
        counts = select(
            select(func.count()).where(mine, AgentRun.status == RunStatus.RUNNING).scalar_subquery(),
            select(func.count()).where(mine, in_window).scalar_subquery(),
        )
        running, recent = (await connection.execute(counts)).one()
        leaving = None
        if (index := quota.leaving_index(int(recent))) is not None:
            query = (
                select(AgentRun.created_at)
                .where(mine, in_window)
                .order_by(col(AgentRun.created_at))
                .offset(index)
                .limit(1)
            )
            leaving = await connection.scalar(query)
        return quota.refusal(int(running), int(recent), leaving, now)

    @staticmethod
    async def _has_request(connection: AsyncConnection, run: AgentRun) -> bool:
        query = select(AgentRun.id).where(
            AgentRun.user_id == run.user_id, AgentRun.request_id == run.request_id
        )
        return (await connection.execute(query)).first() is not None

    @db_retry
    async def run_by_request(self, user_id: str, request_id: str) -> AgentRun | None:
        async with self._sessions() as session:
            query = select(AgentRun).where(AgentRun.user_id == user_id, AgentRun.request_id == request_id)
            return (await session.exec(query)).first()

    @db_retry
    async def get_run(self, run_id: str) -> AgentRun | None:
        async with self._sessions() as session:
            return await session.get(AgentRun, run_id)

    async def append_events(self, run_id: str, events: Sequence[tuple[int, bytes]]) -> None:
        rows = [(run_id, seq, payload) for seq, payload in events]

        async def write(attempt: int) -> None:
            # A retry skips the events an attempt whose reply was lost wrote.
            # The INSERT announces the batch itself on PostgreSQL: no extra round trip.
            statements = [self._sql.announced_events.of(rows, retry=attempt > 1)]
            await self.wakeups.batch(self._driver, statements, RUN_EVENTS.of(run_id), announced=True)

        await retry_transient(write, "RunsRepository.append_events")

    async def finish_run(
        self,
        run_id: str,
        values: dict[str, Any],
        events: Sequence[tuple[int, bytes]],
        journal: Sequence[AgentAction | SkillRun] = (),
        thread_id: str | None = None,
    ) -> None:
        """Settles the run and writes its last events, its actions and its
        skill runs in one transaction; with its webhook's outbox row when its
        row names one as it ends (so an ended run is always delivered, and
        delivered once, to the webhook it had last). Wakes its followers, the
        runs queued on its thread and, when it queued a delivery, the webhook
        workers (the outbox INSERT announces them on PostgreSQL)."""
        wakes = _ended(run_id, thread_id)

        async def write(attempt: int) -> None:
            # Fixed keys (ids, sequences): a retry skips what a lost-reply attempt wrote.
            retry = attempt > 1
            statements = [self._sql.finish_run(run_id, values, utcnow())]
            for inserts, table in ((self._sql.actions, AgentAction), (self._sql.skill_runs, SkillRun)):
                rows = [row.model_dump() for row in journal if isinstance(row, table)]
                if rows:
                    statements.append(inserts.of_dicts(rows, retry))
            if events:
                statements.append(self._sql.events.of([(run_id, seq, data) for seq, data in events], retry))
            statements.append(self._sql.run_outbox(run_id, retry))
            results = await self.wakeups.batch(self._driver, statements, *wakes)
            if results[-1].rowcount and not self._sql.postgres:
                await self.wakeups.notify(WEBHOOKS.of())

        await retry_transient(write, "RunsRepository.finish_run")

    @db_retry
    async def journal(self, run_id: str) -> tuple[Sequence[AgentAction], Sequence[SkillRun]]:
        """A run's actions and skill runs, in order."""
        async with self._sessions() as session:
            actions = await session.exec(
                select(AgentAction).where(AgentAction.run_id == run_id).order_by(col(AgentAction.create_time))
            )
            skills = await session.exec(select(SkillRun).where(SkillRun.run_id == run_id))
            return actions.all(), skills.all()

    @db_retry
    async def events_after(self, run_id: str, after: int) -> Sequence[RunEventRow]:
        async with self._sessions() as session:
            query = (
                select(RunEventRow)
                .where(RunEventRow.run_id == run_id, col(RunEventRow.sequence) > after)
                .order_by(col(RunEventRow.sequence))
            )
            return (await session.exec(query)).all()

    @db_retry
    async def last_sequence(self, run_id: str) -> int:
        async with self._sessions() as session:
            query = select(func.max(RunEventRow.sequence)).where(RunEventRow.run_id == run_id)
            return int((await session.exec(query)).one() or 0)

    @db_retry
    async def list_runs(
        self,
        user_id: str,
        conversation_id: str,
        before: tuple[datetime, str] | None,
        limit: int,
        correlation_id: str = "",
    ) -> Sequence[AgentRun]:
        """A user's runs of a conversation (of one correlation when given),
        newest first, strictly after the (started_at, id) of ``before`` in that order."""
        async with self._sessions() as session:
            query = select(AgentRun).where(
                AgentRun.user_id == user_id, AgentRun.conversation_id == conversation_id
            )
            if correlation_id:
                query = query.where(AgentRun.correlation_id == correlation_id)
            if before is not None:
                started, run_id = before
                query = query.where(
                    or_(
                        col(AgentRun.started_at) < started,
                        (col(AgentRun.started_at) == started) & (col(AgentRun.id) < run_id),
                    )
                )
            query = query.order_by(col(AgentRun.started_at).desc(), col(AgentRun.id).desc()).limit(limit)
            return (await session.exec(query)).all()

    @db_retry
    async def last_model(self, conversation_id: str) -> tuple[str, str] | None:
        """(provider, model) of the newest run that answered on a
        conversation or agent thread; None before any did."""
        async with self._sessions() as session:
            query = (
                select(AgentRun.provider, AgentRun.model)
                .where(
                    AgentRun.conversation_id == conversation_id,
                    AgentRun.status == RunStatus.DONE,
                    col(AgentRun.provider).is_not(None),
                    col(AgentRun.model).is_not(None),
                )
                .order_by(col(AgentRun.started_at).desc(), col(AgentRun.id).desc())
                .limit(1)
            )
            row = (await session.exec(query)).first()
            return (str(row[0]), str(row[1])) if row is not None and row[0] and row[1] else None

    @db_retry
    async def active_runs(self, conversation_id: str) -> Sequence[tuple[str, str]]:
        """Runs still `running` on a conversation or agent thread: (id, user)."""
        async with self._sessions() as session:
            query = select(AgentRun.id, AgentRun.user_id).where(
                AgentRun.conversation_id == conversation_id, AgentRun.status == RunStatus.RUNNING
            )
            return [(row[0], row[1]) for row in (await session.exec(query)).all()]

    @db_retry
    async def runs_ahead(self, run: AgentRun) -> int:
        """Running runs of the same conversation that arrived before ``run``
        (by start time, then id): the queue in front of it."""
        (result,) = await self._driver.batch([self._sql.runs_ahead(run)])
        return int(result.rows[0][0])

    @db_retry
    async def record_approval(self, run_id: str, decision: str) -> bool:
        """Settles a waiting_approval run done with the decision; False when
        the run was not waiting (decided already, or never waited)."""
        async with self._engine.begin() as connection:
            result = await connection.execute(
                update(AgentRun)
                .where(col(AgentRun.id) == run_id, col(AgentRun.status) == RunStatus.WAITING_APPROVAL)
                .values(status=RunStatus.DONE, approval=decision)
            )
            return bool(result.rowcount)

    @db_retry
    async def set_webhook_if_running(self, run_id: str, webhook_url: str | None) -> bool:
        """Sets (None: clears) a running run's webhook; False when the run
        has ended (its end, with or without a delivery, is already written)."""
        async with self._engine.begin() as connection:
            result = await connection.execute(
                update(AgentRun)
                .where(col(AgentRun.id) == run_id, col(AgentRun.status) == RunStatus.RUNNING)
                .values(webhook_url=webhook_url)
            )
            return bool(result.rowcount == 1)

    @db_retry
    async def request_cancel(self, run_id: str) -> None:
        """Flags the run; wakes the engine instance that executes it."""
        async with self._engine.begin() as connection:
            result = await connection.execute(
                update(AgentRun)
                .where(col(AgentRun.id) == run_id, col(AgentRun.status) == RunStatus.RUNNING)
                .values(cancel_requested=True)
                .returning(col(AgentRun.instance_id))
            )
            instances = [str(instance) for instance in result.scalars() if instance]
        await self.wakeups.notify(*(RUN_CANCEL.of(instance) for instance in instances))

    @db_retry
    async def cancel_requested(self, instance_id: str) -> Sequence[str]:
        """Ids of this instance's running runs that someone asked to cancel."""
        async with self._sessions() as session:
            query = select(AgentRun.id).where(
                AgentRun.instance_id == instance_id,
                AgentRun.status == RunStatus.RUNNING,
                col(AgentRun.cancel_requested).is_(True),
            )
            return (await session.exec(query)).all()

    # Instance leases

    @db_retry
    async def heartbeat(self, instance_id: str) -> None:
        async with self._sessions() as session:
            row = await session.get(EngineInstance, instance_id)
            if row is None:
                session.add(EngineInstance(id=instance_id))
            else:
                row.heartbeat_at = utcnow()
            await session.commit()

    @db_retry
    async def release(self, instance_id: str) -> None:
        async with self._sessions() as session:
            await session.exec(delete(EngineInstance).where(col(EngineInstance.id) == instance_id))
            await session.commit()

    @db_retry
    async def orphaned_runs(
        self, lease_seconds: float, also_instance: str | None = None
    ) -> Sequence[AgentRun]:
        """Runs still `running` whose engine instance holds no live lease (or
        that belong to ``also_instance``)."""
        cutoff = utcnow() - timedelta(seconds=lease_seconds)
        async with self._sessions() as session:
            live = select(EngineInstance.id).where(col(EngineInstance.heartbeat_at) > cutoff)
            orphaned: ColumnElement[bool] = col(AgentRun.instance_id).not_in(live)
            if also_instance is not None:
                orphaned = or_(orphaned, col(AgentRun.instance_id) == also_instance)
            query = select(AgentRun).where(AgentRun.status == RunStatus.RUNNING, orphaned)
            return (await session.exec(query)).all()

    async def settle_if_running(
        self, run_id: str, error: str, event: bytes, sequence: int, thread_id: str | None = None
    ) -> bool:
        """Marks a run failed unless it finished meanwhile; writes its
        terminal event, and its webhook's outbox row when its row names one."""
        settled, webhook_url = await self._settle_if_running(run_id, error, event, sequence)
        if settled:
            await self.wakeups.notify(*_ended(run_id, thread_id), *([WEBHOOKS.of()] if webhook_url else []))
        return settled

    @db_retry
    async def _settle_if_running(
        self, run_id: str, error: str, event: bytes, sequence: int
    ) -> tuple[bool, str | None]:
        """Whether it settled the run, and the webhook its row named."""
        async with self._sessions() as session:
            result = await session.exec(
                update(AgentRun)
                .where(col(AgentRun.id) == run_id, col(AgentRun.status) == RunStatus.RUNNING)
                .values(status=RunStatus.FAILED, error=error, finished_at=utcnow())
                .returning(col(AgentRun.webhook_url))
            )
            settled = result.first()
            if settled is None:
                await session.rollback()
                return False, None
            webhook_url: str | None = settled[0]
            session.add(RunEventRow(run_id=run_id, sequence=sequence, payload=event))
            if webhook_url:
                session.add(WebhookOutbox(**outbox_row(run_id, webhook_url)))
            await session.commit()
            return True, webhook_url


def _ended(run_id: str, thread_id: str | None) -> list[Wake]:
    """Who waits for a run's end: its followers and the runs queued behind
    it on its thread (the webhook workers are woken by its outbox row)."""
    wakes = [RUN_EVENTS.of(run_id)]
    if thread_id:
        wakes.append(THREAD_FREE.of(thread_id))
    return wakes
