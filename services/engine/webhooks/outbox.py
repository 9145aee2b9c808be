"""SQL of webhook deliveries: claiming due outbox rows under a lease,
recording each attempt, and reading a run's deliveries back.

A row is claimed by one worker at a time, whichever replica it runs in: on
PostgreSQL, ``SELECT ... FOR UPDATE SKIP LOCKED`` then the lease in the same
transaction (concurrent claimers skip each other's rows instead of waiting);
on SQLite (one writer), a conditional UPDATE that only succeeds while the
row is unleased. A worker that dies mid-attempt leaves a lease that expires,
and another worker (or the restarted engine) takes the row up again."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, and_, delete, func, or_, update
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel import col, select

from services.engine.webhooks.models import (
    DELIVERED,
    FAILED,
    PENDING,
    WebhookDefault,
    WebhookDelivery,
    WebhookOutbox,
)
from services.shared.db import dialect_insert, session_factory
from services.shared.db_retry import db_retry, insert_skipping_existing
from services.shared.driver import Driver
from services.shared.time import aware, utcnow
from services.shared.wakeups import WEBHOOKS, Wakeups

# Whether any row is due (OutboxRepository._claimable, as SQL for the driver):
# the worker looks after every run, and most runs name no webhook.
ANY_DUE = (
    "SELECT 1 FROM webhook_outbox WHERE state = $1 AND next_attempt_at <= $2"
    " AND (lease_until IS NULL OR lease_until < $2) LIMIT 1"
)
DEFAULT_URL = "SELECT url FROM webhook_defaults WHERE user_id = $1 AND target_kind = $2 AND target_id = $3"


@dataclass(frozen=True)
class Attempt:
    """What one delivery attempt gave."""

    status_code: int
    error: str
    duration_ms: int
    at: datetime
    # The journal row's key: a retried write of the attempt adds no second row.
    id: str = dataclasses.field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def delivered(self) -> bool:
        return 200 <= self.status_code < 300


class OutboxRepository:
    def __init__(self, engine: AsyncEngine, wakeups: Wakeups | None = None) -> None:
        """``wakeups``: the process's; by default one of this repository's own."""
        self._engine = engine
        self._sessions = session_factory(engine)
        self._driver = Driver(engine)
        self.wakeups = wakeups or Wakeups(driver=self._driver)
        self._bind_time = self._driver.binder(WebhookOutbox.__table__.c.next_attempt_at)  # type: ignore[attr-defined]

    @staticmethod
    def _claimable(now: datetime) -> ColumnElement[bool]:
        return and_(
            col(WebhookOutbox.state) == PENDING,
            col(WebhookOutbox.next_attempt_at) <= now,
            or_(col(WebhookOutbox.lease_until).is_(None), col(WebhookOutbox.lease_until) < now),
        )

    @db_retry
    async def claim(self, owner: str, lease_seconds: float, limit: int) -> list[WebhookOutbox]:
        """Up to ``limit`` due rows, leased to ``owner`` for ``lease_seconds``."""
        now = utcnow()
        until = now + timedelta(seconds=lease_seconds)
        claimed: list[WebhookOutbox] = []
        if await self._driver.fetchrow(ANY_DUE, PENDING, *self._bind_time([now])) is None:
            return claimed
        async with self._sessions() as session:
            due = (
                select(WebhookOutbox)
                .where(self._claimable(now))
                .order_by(col(WebhookOutbox.next_attempt_at))
                .limit(limit)
            )
            if self._engine.dialect.name == "postgresql":
                rows = (await session.exec(due.with_for_update(skip_locked=True))).all()
                for row in rows:
                    row.lease_owner, row.lease_until = owner, until
                    claimed.append(row)
                await session.commit()
                return claimed
            for row in (await session.exec(due)).all():
                result = await session.exec(
                    update(WebhookOutbox)
                    .where(col(WebhookOutbox.run_id) == row.run_id, self._claimable(now))
                    .values(lease_owner=owner, lease_until=until)
                )
                if result.rowcount == 1:
                    row.lease_owner, row.lease_until = owner, until
                    claimed.append(row)
            await session.commit()
        return claimed

    @db_retry
    async def next_due(self) -> datetime | None:
        """When the earliest pending row can next be claimed: its next
        attempt, or the end of the lease another attempt holds on it."""
        async with self._sessions() as session:
            pending = col(WebhookOutbox.state) == PENDING
            unleased = or_(
                col(WebhookOutbox.lease_until).is_(None), col(WebhookOutbox.lease_until) < utcnow()
            )
            query = select(
                select(func.min(WebhookOutbox.next_attempt_at)).where(pending, unleased).scalar_subquery(),
                select(func.min(WebhookOutbox.lease_until)).where(pending, ~unleased).scalar_subquery(),
            )
            times = [aware(t) for t in (await session.exec(query)).one() if t is not None]
            return min(times, default=None)

    @db_retry
    async def record(
        self, row: WebhookOutbox, owner: str, attempt: Attempt, retry_at: datetime | None
    ) -> None:
        """Journals the attempt and moves the row on: delivered, due again at
        ``retry_at``, or failed for good (``retry_at`` None). A success
        settles the row whoever holds its lease; a failure only changes a row
        this worker still holds (another may have taken it over)."""
        number = row.attempts + 1
        async with self._engine.begin() as connection:
            # A retry of this transaction (lost reply) must not journal twice.
            await connection.execute(
                insert_skipping_existing(WebhookDelivery, self._engine.dialect.name),
                [
                    {
                        "id": attempt.id,
                        "run_id": row.run_id,
                        "attempt": number,
                        "status_code": attempt.status_code,
                        "error": attempt.error,
                        "create_time": attempt.at,
                        "duration_ms": attempt.duration_ms,
                    }
                ],
            )
            mine = and_(col(WebhookOutbox.run_id) == row.run_id, col(WebhookOutbox.state) == PENDING)
            if attempt.delivered:
                change = {"state": DELIVERED, "finished_at": utcnow()}
            else:
                mine = and_(mine, col(WebhookOutbox.lease_owner) == owner)
                change = (
                    {"state": FAILED, "finished_at": utcnow()}
                    if retry_at is None
                    else {"next_attempt_at": retry_at}
                )
            await connection.execute(
                update(WebhookOutbox)
                .where(mine)
                .values(attempts=number, lease_owner=None, lease_until=None, **change)
            )

    @db_retry
    async def release(self, owner: str) -> None:
        """Frees the rows ``owner`` holds (a clean shutdown mid-attempt): they
        are due again at once for the other replicas."""
        async with self._engine.begin() as connection:
            await connection.execute(
                update(WebhookOutbox)
                .where(col(WebhookOutbox.lease_owner) == owner, col(WebhookOutbox.state) == PENDING)
                .values(lease_owner=None, lease_until=None)
            )
        await self.wakeups.notify(WEBHOOKS.of())

    @db_retry
    async def of_run(self, run_id: str) -> tuple[WebhookOutbox | None, Sequence[WebhookDelivery]]:
        """A run's outbox row (None before it ends) and its attempts, oldest first."""
        async with self._sessions() as session:
            row = await session.get(WebhookOutbox, run_id)
            attempts = await session.exec(
                select(WebhookDelivery)
                .where(WebhookDelivery.run_id == run_id)
                .order_by(col(WebhookDelivery.attempt), col(WebhookDelivery.create_time))
            )
            return row, attempts.all()


class DefaultsRepository:
    """Users' default webhooks of their conversations and agents."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._sessions = session_factory(engine)
        self._driver = Driver(engine)

    @db_retry
    async def get(self, user_id: str, kind: str, target_id: str) -> str:
        """Read for every run that names no webhook: on the driver."""
        row = await self._driver.fetchrow(DEFAULT_URL, user_id, kind, target_id)
        return str(row[0]) if row is not None else ""

    @db_retry
    async def put(self, user_id: str, kind: str, target_id: str, url: str) -> None:
        """Sets the default (``""`` removes it); idempotent."""
        async with self._sessions() as session:
            if not url:
                await session.exec(
                    delete(WebhookDefault).where(
                        col(WebhookDefault.user_id) == user_id,
                        col(WebhookDefault.target_kind) == kind,
                        col(WebhookDefault.target_id) == target_id,
                    )
                )
            else:
                # An upsert: two concurrent first PUTs cannot collide on the key.
                now = utcnow()
                statement = dialect_insert(session, WebhookDefault).values(
                    user_id=user_id, target_kind=kind, target_id=target_id, url=url, update_time=now
                )
                await session.exec(
                    statement.on_conflict_do_update(
                        index_elements=["user_id", "target_kind", "target_id"],
                        set_={"url": url, "update_time": now},
                    )
                )
            await session.commit()


def outbox_row(run_id: str, url: str) -> dict[str, Any]:
    """The outbox row of a run that ends, written in the transaction that
    ends it. Its webhook-id derives from the run: the same on every attempt,
    whichever replica makes it."""
    now = utcnow()
    return {
        "run_id": run_id,
        "url": url,
        "webhook_id": f"msg_{run_id}",
        "state": PENDING,
        "attempts": 0,
        "created_at": now,
        "next_attempt_at": now,
    }
