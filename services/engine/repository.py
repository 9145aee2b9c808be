"""SQL of the engine: runs, their events, instance leases."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, delete, func, insert, or_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel import col, select

from services.engine.models import AgentAction, AgentRun, EngineInstance, RunEventRow, SkillRun
from services.shared.db import is_unique_violation, session_factory
from services.shared.time import utcnow


class RunsRepository:
    """The writes of every run (insert, events, finish) are Core statements on
    a connection, lighter than an ORM session on the hottest path (about 1 ms
    of CPU per run, docs/benchmarks.md). Reads and rare writes use sessions."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._sessions = session_factory(engine)

    async def insert_run(self, run: AgentRun, first_event: bytes) -> AgentRun | None:
        """Writes the run row with its first event in one transaction. None when
        the user already has a run with this request_id (the caller replays it)."""
        try:
            async with self._engine.begin() as connection:
                await connection.execute(insert(AgentRun), [run.model_dump()])
                await connection.execute(
                    insert(RunEventRow), [{"run_id": run.id, "sequence": 1, "payload": first_event}]
                )
            return run
        except IntegrityError as exc:
            if run.request_id and is_unique_violation(exc):
                return None
            raise

    async def run_by_request(self, user_id: str, request_id: str) -> AgentRun | None:
        async with self._sessions() as session:
            query = select(AgentRun).where(AgentRun.user_id == user_id, AgentRun.request_id == request_id)
            return (await session.exec(query)).first()

    async def get_run(self, run_id: str) -> AgentRun | None:
        async with self._sessions() as session:
            return await session.get(AgentRun, run_id)

    async def append_events(self, run_id: str, events: Sequence[tuple[int, bytes]]) -> None:
        async with self._engine.begin() as connection:
            await connection.execute(
                insert(RunEventRow),
                [{"run_id": run_id, "sequence": seq, "payload": payload} for seq, payload in events],
            )

    async def finish_run(
        self,
        run_id: str,
        values: dict[str, Any],
        events: Sequence[tuple[int, bytes]],
        journal: Sequence[AgentAction | SkillRun] = (),
    ) -> None:
        """Settles the run and writes its last events, its actions and its
        skill runs in one transaction."""
        async with self._engine.begin() as connection:
            await connection.execute(
                update(AgentRun).where(col(AgentRun.id) == run_id).values(finished_at=utcnow(), **values)
            )
            for table in (AgentAction, SkillRun):
                rows = [row.model_dump() for row in journal if isinstance(row, table)]
                if rows:
                    await connection.execute(insert(table), rows)
            if events:
                await connection.execute(
                    insert(RunEventRow),
                    [{"run_id": run_id, "sequence": seq, "payload": payload} for seq, payload in events],
                )

    async def journal(self, run_id: str) -> tuple[Sequence[AgentAction], Sequence[SkillRun]]:
        """A run's actions and skill runs, in order."""
        async with self._sessions() as session:
            actions = await session.exec(
                select(AgentAction).where(AgentAction.run_id == run_id).order_by(col(AgentAction.create_time))
            )
            skills = await session.exec(select(SkillRun).where(SkillRun.run_id == run_id))
            return actions.all(), skills.all()

    async def events_after(self, run_id: str, after: int) -> Sequence[RunEventRow]:
        async with self._sessions() as session:
            query = (
                select(RunEventRow)
                .where(RunEventRow.run_id == run_id, col(RunEventRow.sequence) > after)
                .order_by(col(RunEventRow.sequence))
            )
            return (await session.exec(query)).all()

    async def last_sequence(self, run_id: str) -> int:
        async with self._sessions() as session:
            query = select(func.max(RunEventRow.sequence)).where(RunEventRow.run_id == run_id)
            return int((await session.exec(query)).one() or 0)

    async def list_runs(
        self, user_id: str, conversation_id: str, before: tuple[datetime, str] | None, limit: int
    ) -> Sequence[AgentRun]:
        """A user's runs of a conversation, newest first, strictly after the
        (started_at, id) of ``before`` in that order."""
        async with self._sessions() as session:
            query = select(AgentRun).where(
                AgentRun.user_id == user_id, AgentRun.conversation_id == conversation_id
            )
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

    async def active_run_ids(self, conversation_id: str) -> Sequence[str]:
        """Runs still `running` on a conversation or agent thread."""
        async with self._sessions() as session:
            query = select(AgentRun.id).where(
                AgentRun.conversation_id == conversation_id, AgentRun.status == "running"
            )
            return (await session.exec(query)).all()

    async def runs_ahead(self, run: AgentRun) -> int:
        """Running runs of the same conversation that arrived before ``run``
        (by start time, then id): the queue in front of it."""
        async with self._sessions() as session:
            query = select(func.count()).where(
                AgentRun.conversation_id == run.conversation_id,
                AgentRun.status == "running",
                or_(
                    col(AgentRun.started_at) < run.started_at,
                    (col(AgentRun.started_at) == run.started_at) & (col(AgentRun.id) < run.id),
                ),
            )
            return int((await session.exec(query)).one())

    async def request_cancel(self, run_id: str) -> None:
        async with self._engine.begin() as connection:
            await connection.execute(
                update(AgentRun)
                .where(col(AgentRun.id) == run_id, col(AgentRun.status) == "running")
                .values(cancel_requested=True)
            )

    async def cancel_requested(self, instance_id: str) -> Sequence[str]:
        """Ids of this instance's running runs that someone asked to cancel."""
        async with self._sessions() as session:
            query = select(AgentRun.id).where(
                AgentRun.instance_id == instance_id,
                AgentRun.status == "running",
                col(AgentRun.cancel_requested).is_(True),
            )
            return (await session.exec(query)).all()

    # Instance leases

    async def heartbeat(self, instance_id: str) -> None:
        async with self._sessions() as session:
            row = await session.get(EngineInstance, instance_id)
            if row is None:
                session.add(EngineInstance(id=instance_id))
            else:
                row.heartbeat_at = utcnow()
            await session.commit()

    async def release(self, instance_id: str) -> None:
        async with self._sessions() as session:
            await session.exec(delete(EngineInstance).where(col(EngineInstance.id) == instance_id))
            await session.commit()

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
            query = select(AgentRun).where(AgentRun.status == "running", orphaned)
            return (await session.exec(query)).all()

    async def settle_if_running(self, run_id: str, error: str, event: bytes, sequence: int) -> bool:
        """Marks a run failed unless it finished meanwhile; writes its terminal event."""
        async with self._sessions() as session:
            result = await session.exec(
                update(AgentRun)
                .where(col(AgentRun.id) == run_id, col(AgentRun.status) == "running")
                .values(status="failed", error=error, finished_at=utcnow())
            )
            if result.rowcount != 1:
                await session.rollback()
                return False
            session.add(RunEventRow(run_id=run_id, sequence=sequence, payload=event))
            await session.commit()
            return True
