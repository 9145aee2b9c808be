"""Work that one replica does at a time, or once per interval, across every
replica of a service sharing one database.

Two tools, both inside the caller's transaction so that what the work
writes commits (or rolls back) with the claim:

- :func:`try_lock`: an exclusive claim for the length of the transaction.
  PostgreSQL: ``pg_try_advisory_xact_lock`` on the name, which answers at
  once (a replica that does not get it skips the work instead of queueing
  behind the one that does) and is released when the transaction ends.
  SQLite: always granted: an SQLite file has one writer at a time, so the
  caller's conditional writes in the transaction already decide alone.
- :func:`take`: a lease row (name, holder, expiry) taken by a conditional
  UPDATE when it is free or expired. Taken for an interval and not
  released, it makes work run once per interval whichever replica gets
  there first; a holder that crashes loses it when it expires. Expiries are
  read on the process's clock (services.shared.time), so tests move time
  instead of waiting.

Each service declares its own table of leases: a subclass of
:class:`LeaseRow` with ``table=True`` (one table per service database)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import DateTime, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlmodel import Field, SQLModel, col

from services.shared.db_retry import insert_skipping_existing
from services.shared.time import utcnow


class LeaseRow(SQLModel):
    """A named lease: who holds it, until when (UTC)."""

    name: str = Field(primary_key=True, max_length=200)
    holder: str = Field(max_length=64)
    expires_at: datetime = Field(sa_type=DateTime(timezone=True))


async def try_lock(connection: AsyncConnection, name: str) -> bool:
    """An exclusive claim on ``name`` until the connection's transaction
    ends; False at once when another transaction holds it (PostgreSQL). On
    SQLite always True: the database file's single writer serialises the
    transactions, and the caller's conditional writes decide."""
    if connection.dialect.name != "postgresql":
        return True
    lock = func.pg_try_advisory_xact_lock(func.hashtext(name))
    return bool((await connection.execute(select(lock))).scalar_one())


async def take(
    connection: AsyncConnection, table: type[LeaseRow], name: str, holder: str, seconds: float
) -> bool:
    """Takes the lease ``name`` for ``holder`` until now + ``seconds`` when
    nobody holds it or its holder's time is up; False when another holder's
    lease is still running (even when it is ``holder`` itself: a lease taken
    for an interval is not taken again before the interval ends)."""
    if not await try_lock(connection, f"lease:{name}"):
        return False
    now = utcnow()
    expires = now + timedelta(seconds=seconds)
    result = await connection.execute(
        update(table)
        .where(col(table.name) == name, col(table.expires_at) <= now)
        .values(holder=holder, expires_at=expires)
    )
    if result.rowcount == 1:
        return True
    # No row yet (the first take ever), or a live one: an insert that skips
    # an existing row tells the two apart, atomically.
    inserted = await connection.execute(
        insert_skipping_existing(table, connection.dialect.name).values(
            name=name, holder=holder, expires_at=expires
        )
    )
    return bool(inserted.rowcount == 1)


async def release(connection: AsyncConnection, table: type[LeaseRow], name: str, holder: str) -> None:
    """Ends ``holder``'s lease now (nothing when another holds it)."""
    await connection.execute(
        update(table).where(col(table.name) == name, col(table.holder) == holder).values(expires_at=utcnow())
    )


@dataclass(frozen=True)
class OncePerInterval:
    """Work that runs once per ``seconds`` across the replicas sharing
    ``engine``'s database (a prune): :meth:`due` takes the lease ``name`` for
    ``holder`` in its own transaction and says whether this replica won it."""

    engine: AsyncEngine
    table: type[LeaseRow]
    name: str
    holder: str
    seconds: float

    async def due(self) -> bool:
        async with self.engine.begin() as connection:
            return await take(connection, self.table, self.name, self.holder, self.seconds)
