"""Async database engines: SQLite (embedded default) or PostgreSQL (asyncpg)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine
from sqlmodel.ext.asyncio.session import AsyncSession

# Each PostgreSQL process's pool: connections kept open, and opened beyond
# them under load (closed again when returned). A pooler in front of
# PostgreSQL must accept this many clients per replica (deploy/ checks it).
POOL_SIZE = 10
MAX_OVERFLOW = 10


def create_engine(url: str, *, prepared_statements: bool = True) -> AsyncEngine:
    """An engine for ``url``; for SQLite, creates the folder and turns on WAL so
    readers never wait for the writer, and a busy timeout instead of errors.

    On PostgreSQL, ``prepared_statements`` keeps asyncpg's per-connection
    cache of named prepared statements (SQLAlchemy's statements and the
    driver's, services.shared.driver): each statement is parsed and planned
    once per connection. Off, every statement is an unnamed one, parsed in
    the same round trip that runs it: what a pooler that hands a client a
    different server connection for each transaction needs when it does not
    track named statements itself (PgBouncer before 1.21 in transaction
    mode: a named statement prepared on one server connection is missing,
    or another client's, on the next; docs/operations.md#pgbouncer)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        # One connection per process: writers queue in the pool (a cheap
        # async wait) instead of colliding in SQLite's busy handler, which
        # sleeps 1-100 ms per retry. Statements here take well under 1 ms.
        # aiosqlite's adapter, one thread hand-off per statement (imported
        # here: a PostgreSQL service never loads aiosqlite).
        from services.shared import sqlite_driver

        options = {"module": sqlite_driver.module()} if parsed.get_driver_name() == "aiosqlite" else {}
        engine = create_async_engine(url, pool_size=1, max_overflow=0, **options)

        @event.listens_for(engine.sync_engine, "connect")
        def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA busy_timeout=5000")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        return engine
    # statement_cache_size is asyncpg's own cache (the driver's statements);
    # prepared_statement_cache_size is SQLAlchemy's, of asyncpg statements it
    # prepared. With both at 0 asyncpg names no statement.
    unnamed = {"statement_cache_size": 0, "prepared_statement_cache_size": 0}
    connect_args = {} if prepared_statements else unnamed
    return create_async_engine(url, pool_size=POOL_SIZE, max_overflow=MAX_OVERFLOW, connect_args=connect_args)


class RetryableSession(AsyncSession):
    """A session whose failed COMMIT is rolled back at once. The rollback
    turns the objects added in the transaction back into new ones, so that
    a retry inserts them again; without it they look stored (they were
    flushed before the COMMIT failed), and a retry after a COMMIT that never
    reached the database wrote nothing while saying it had. A retry after a
    COMMIT whose reply was lost meets its own row (a unique violation), as
    any concurrent retry does."""

    async def commit(self) -> None:
        try:
            await super().commit()
        except Exception:
            # The objects' state is restored even when the connection is gone
            # and its own rollback fails; the COMMIT's error is the one raised.
            with contextlib.suppress(Exception):
                await self.rollback()
            raise


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, class_=RetryableSession, expire_on_commit=False)


def is_unique_violation(exc: BaseException) -> bool:
    """True for a unique-constraint failure on SQLite or PostgreSQL."""
    text = str(getattr(exc, "orig", exc))
    return "UNIQUE constraint failed" in text or "duplicate key value" in text or "UniqueViolation" in text


def dialect_insert(session: AsyncSession, table: Any) -> Any:
    """INSERT for the session's dialect (SQLite or PostgreSQL), which has
    ``on_conflict_do_update`` and ``on_conflict_do_nothing``."""
    dialect = session.bind.dialect.name if session.bind is not None else ""
    if dialect == "postgresql":
        return postgresql.insert(table)
    if dialect == "sqlite":
        return sqlite.insert(table)
    raise RuntimeError(f"Switchboard runs on SQLite or PostgreSQL, not {dialect!r}")
