"""The audit log of admin actions, the same in every service that owns
objects admins manage (the router's skill catalog, the threads service's
agent registry). Each such service keeps its own table of these columns and
writes a row in the transaction of the write it records, so an action is
never recorded without having happened, nor the other way round. Only
admins read it, newest first, paged by keyset on (create_time, id)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import DateTime, Text
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import Field, SQLModel, and_, col, or_, select
from sqlmodel.ext.asyncio.session import AsyncSession

from services.shared.db import dialect_insert
from services.shared.db_retry import db_retry
from services.shared.errors import PermissionDenied
from services.shared.pagination import as_instant, as_text, page_of, page_request
from services.shared.time import aware, from_timestamp, to_timestamp, utcnow
from switchboard.common.v1 import common_pb2

MAX_DETAIL_CHARS = 2_000


class AuditColumns(SQLModel):
    """The columns of a service's audit table (a subclass with table=True
    names the table: one per service database)."""

    id: str = Field(primary_key=True, max_length=36)
    actor: str = Field(max_length=128)
    actor_role: str = Field(max_length=16)
    # "<object>.<verb>": skill.create, agent.member_add...
    action: str = Field(max_length=64)
    target: str = Field(max_length=128)
    # sa_type, not sa_column: each service's table needs its own Column.
    detail: str = Field(default="", sa_type=Text, nullable=False)
    create_time: datetime = Field(sa_type=DateTime(timezone=True), nullable=False)


Row = TypeVar("Row", bound=AuditColumns)


@dataclass(frozen=True)
class Actor:
    """Who calls: the user and the role the gateway vouched for."""

    user: str
    role: str

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


def require_admin(actor: Actor, what: str) -> None:
    """PERMISSION_DENIED, naming what needs the admin role, unless ``actor`` is one."""
    if not actor.is_admin:
        raise PermissionDenied(
            f"{what} is for admins; {actor.user} has the role {actor.role}", role=actor.role
        )


def new_event(table: type[Row], actor: Actor, action: str, target: str, detail: str = "") -> Row:
    """A row to write with the action it records (its id fixed here, so a
    retried transaction writes it once)."""
    return table(
        id=str(uuid.uuid4()),
        actor=actor.user,
        actor_role=actor.role,
        action=action,
        target=target[:128],
        detail=detail[:MAX_DETAIL_CHARS],
        create_time=utcnow(),
    )


async def record(session: AsyncSession, event: AuditColumns) -> None:
    """Adds ``event`` in the session's transaction; a retry of that
    transaction that finds it written already writes nothing more."""
    values = {name: getattr(event, name) for name in AuditColumns.model_fields}
    table: Any = type(event).__table__  # type: ignore[attr-defined]
    await session.exec(dialect_insert(session, table).values(**values).on_conflict_do_nothing())


def to_proto(row: AuditColumns) -> common_pb2.AuditEvent:
    return common_pb2.AuditEvent(
        id=row.id,
        actor=row.actor,
        actor_role=row.actor_role,
        action=row.action,
        target=row.target,
        detail=row.detail,
        create_time=to_timestamp(row.create_time),
    )


Position = tuple[datetime, str]


def _read(cursor: dict[str, Any]) -> Position:
    return as_instant(cursor["t"]), as_text(cursor["id"])


class AuditLog:
    """A service's audit table: the page reads, newest first."""

    def __init__(self, table: type[AuditColumns], sessions: async_sessionmaker[AsyncSession]) -> None:
        self._table = table
        self._sessions = sessions

    @db_retry
    async def _before(self, position: Position | None, limit: int) -> Sequence[AuditColumns]:
        table = self._table
        query = select(table)
        if position is not None:
            time, event_id = position
            query = query.where(
                or_(
                    col(table.create_time) < time,
                    and_(col(table.create_time) == time, col(table.id) < event_id),
                )
            )
        query = query.order_by(col(table.create_time).desc(), col(table.id).desc()).limit(limit)
        async with self._sessions() as session:
            return (await session.exec(query)).all()

    async def list(
        self, actor: Actor, requested_size: int, token: str, before: common_pb2.AuditPosition | None
    ) -> tuple[list[common_pb2.AuditEvent], str]:
        """One page for an admin: after ``token``'s position, or strictly
        before ``before`` when it is set (a merging caller's own keyset)."""
        require_admin(actor, "reading the audit log")
        size, position = page_request(requested_size, token, _read)
        if before is not None and (before.id or before.time.seconds or before.time.nanos):
            position = (from_timestamp(before.time, "before.time"), before.id)
        rows = await self._before(position, size + 1)
        page, next_token = page_of(
            rows, size, lambda row: {"t": aware(row.create_time).isoformat(), "id": row.id}
        )
        return [to_proto(row) for row in page], next_token
