"""Hot-path SQL straight on the database driver.

A statement through SQLAlchemy (Core or ORM) costs a compile-cache lookup,
an execution context, result metadata and, on SQLite, aiosqlite's thread
hand-offs: about a tenth of a millisecond of CPU, against a hundredth for
the same statement on the driver. A run makes some twenty of them, so the
statements every run makes go here; SQLAlchemy and Alembic keep the schema,
the migrations and the cold paths.

- The connection is the one SQLAlchemy's pool holds (checked out and back),
  so a process still has one SQLite connection (one writer, no busy-handler
  sleeps between two connections of its own), and PostgreSQL's pool and
  retries stay as they are.
- SQL is written once with PostgreSQL's ``$1, $2`` placeholders; SQLite gets
  ``?1, ?2``, which it binds the same way.
- A batch runs its statements in one transaction: on SQLite in one hand-off
  to the connection's thread, on PostgreSQL with asyncpg's prepared
  statements (its per-connection statement cache). A statement's arguments
  may be worked out from the results before it (a sequence number an UPDATE
  reserved), or skip it, without leaving the transaction.
- Behind a transaction-mode pooler that does not track prepared statements
  (PgBouncer before 1.21), the SQLAlchemy engine's connections are opened with
  asyncpg's cache off (services.shared.db, ``prepared_statements``): the
  same calls here then send unnamed statements, parsed again in the round
  trip that runs them, and nothing of them outlives a transaction. A lone
  query is one implicit transaction; a batch holds one server connection
  from BEGIN to COMMIT.
- A committed batch goes through the dialect's commit (a no-op then), and a
  lost connection is invalidated in the pool, as SQLAlchemy does for its own
  statements: what watches commits sees these, and a retry gets a live
  connection (services.shared.db_retry).
- Values are converted by SQLAlchemy's own types for the dialect (a
  timestamp is stored as SQLAlchemy stores it), so rows written here and
  rows written through SQLAlchemy compare and sort alike.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Column, Table
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util.concurrency import greenlet_spawn

from services.shared.db_retry import is_transient

Row = tuple[Any, ...]
Processor = Callable[[Any], Any] | None

_PLACEHOLDER = re.compile(r"\$(\d+)")


@dataclass(frozen=True, slots=True)
class Result:
    """What a statement gave back: its rows (a query, or RETURNING) and the
    rows it changed. A skipped statement gives an empty one."""

    rows: list[Row] = field(default_factory=list)
    rowcount: int = 0


# A statement's arguments from the results of the statements before it in
# its batch; None skips the statement.
Arguments = Callable[[list[Result]], Sequence[Any] | None]


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement of a batch: ``args`` are its arguments in placeholder
    order, or with ``many`` a sequence of such tuples (one row each); or a
    function of the earlier results giving them (run inside the transaction,
    on SQLite on the connection's thread: no I/O), None to skip it."""

    sql: str
    args: Sequence[Any] | Arguments = ()
    many: bool = False


class ConnectionLost(ConnectionError):
    """The database connection was found closed: the same work may succeed on
    a new one (services.shared.db_retry retries it)."""


def _arguments(args: Sequence[Any] | Arguments, results: list[Result]) -> Sequence[Any] | None:
    return args(results) if callable(args) else args


def _in_transaction(statements: Sequence[Statement]) -> bool:
    """Every batch but a lone query runs in a transaction of its own."""
    return len(statements) > 1 or not _returns_rows(statements[0].sql)


def _returns_rows(sql: str) -> bool:
    """A query, or a write with RETURNING (SQLite 3.35+ and PostgreSQL)."""
    upper = sql.upper()
    return upper.lstrip().startswith(("SELECT", "WITH")) or " RETURNING " in upper


def _sqlite_batch(
    connection: sqlite3.Connection, statements: Sequence[tuple[str, Any, bool]], transaction: bool
) -> list[Result]:
    """On the connection's thread: the statements in one transaction (a lone
    query in none), committed, or rolled back on the first error."""
    results: list[Result] = []
    try:
        if transaction and not connection.in_transaction:
            connection.execute("BEGIN")
        for sql, given, many in statements:
            args = _arguments(given, results)
            if args is None:
                results.append(Result())
                continue
            cursor = connection.executemany(sql, args) if many else connection.execute(sql, args)
            rows = cursor.fetchall() if cursor.description else []
            results.append(Result(rows, cursor.rowcount))
            cursor.close()
        if connection.in_transaction:
            connection.commit()
    except BaseException:
        if connection.in_transaction:
            connection.rollback()
        raise
    return results


class Driver:
    """Hot-path statements of one service's database (its SQLAlchemy
    engine's URL and pool)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self.dialect = engine.dialect
        self.sqlite = engine.dialect.name == "sqlite"
        # Which database (its URL, without the password).
        self.database = engine.url.render_as_string(hide_password=True)
        self._sql: dict[str, str] = {}

    def _native(self, sql: str) -> str:
        if not self.sqlite:
            return sql
        native = self._sql.get(sql)
        if native is None:
            native = self._sql[sql] = _PLACEHOLDER.sub(r"?\1", sql)
        return native

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        return (await self.batch([Statement(sql, args)]))[0].rows

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        rows = await self.fetch(sql, *args)
        return rows[0] if rows else None

    async def execute(self, sql: str, *args: Any) -> int:
        """The rows the statement changed."""
        return (await self.batch([Statement(sql, args)]))[0].rowcount

    async def batch(self, statements: Sequence[Statement]) -> list[Result]:
        """The statements in one transaction, in order; their results. A
        failure rolls the whole batch back and is raised as the driver's
        error (sqlite3's or asyncpg's), or as ConnectionLost when the
        connection turned out closed."""
        if not statements:
            return []
        transaction = _in_transaction(statements)
        fairy = await self._engine.raw_connection()
        failure: BaseException | None = None
        try:
            if self.sqlite:
                return await self._sqlite(fairy, statements, transaction)
            return await self._asyncpg(fairy.driver_connection, statements, transaction)
        except BaseException as error:
            failure = error
            if isinstance(error, Exception) and self._closed(fairy, error):
                failure = ConnectionLost(
                    f"the database connection is closed ({type(error).__name__}: {error})"
                )
                raise failure from error
            raise
        finally:
            await greenlet_spawn(self._release, fairy, transaction, failure)

    def _closed(self, fairy: Any, error: Exception) -> bool:
        """Whether ``error`` came of a PostgreSQL connection found closed (a
        restart, a failover, a dropped socket) that db_retry would not retry:
        asyncpg may report it as a protocol state error ("cannot switch to
        state ...") as well as "connection is closed". The connection's own
        state is the test SQLAlchemy's asyncpg dialect makes of a disconnect."""
        return not self.sqlite and not is_transient(error) and fairy.driver_connection.is_closed()

    def _release(self, fairy: Any, transaction: bool, failure: BaseException | None) -> None:
        """Back to the pool (in SQLAlchemy's greenlet: closing may await).
        After a commit, the dialect's commit runs too: a no-op on a connection
        with no transaction open, but what patches or watches it (the tests of
        a lost COMMIT reply) sees this commit as it sees SQLAlchemy's. A lost
        connection invalidates the pool's connections, as SQLAlchemy does on
        a disconnect, so a retry does not get another dead one."""
        try:
            if failure is None and transaction:
                self.dialect.do_commit(fairy.dbapi_connection)
            elif failure is not None and is_transient(failure):
                self._engine.sync_engine.pool._invalidate(fairy, failure)
        finally:
            fairy.close()

    async def _sqlite(self, fairy: Any, statements: Sequence[Statement], transaction: bool) -> list[Result]:
        adapter = fairy.dbapi_connection  # services.shared.sqlite_driver.Connection
        bridge = fairy.driver_connection  # aiosqlite.Connection: its thread owns the connection
        native = [(self._native(s.sql), s.args, s.many) for s in statements]
        results: list[Result] = await bridge._execute(_sqlite_batch, bridge._conn, native, transaction)
        adapter.in_transaction = False  # committed on the thread: nothing left to end
        return results

    async def _asyncpg(
        self, connection: Any, statements: Sequence[Statement], transaction: bool
    ) -> list[Result]:
        async def one(statement: Statement, results: list[Result]) -> Result:
            args = _arguments(statement.args, results)
            if args is None:
                return Result()
            if statement.many:
                await connection.executemany(statement.sql, args)
                return Result([], len(args))
            if _returns_rows(statement.sql):
                records = await connection.fetch(statement.sql, *args)
                return Result([tuple(r) for r in records], len(records))
            status: str = await connection.execute(statement.sql, *args)
            count = status.rsplit(" ", 1)[-1]
            return Result([], int(count) if count.isdigit() else 0)

        results: list[Result] = []
        if not transaction:
            return [await one(statements[0], results)]
        async with connection.transaction():
            for statement in statements:
                results.append(await one(statement, results))
        return results

    # Values, converted as SQLAlchemy converts them for this dialect.

    def binder(self, *columns: Column[Any]) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
        """Turns Python values into the driver's for ``columns``, in order."""
        processors = [c.type.dialect_impl(self.dialect).bind_processor(self.dialect) for c in columns]

        def bind(values: Sequence[Any]) -> tuple[Any, ...]:
            pairs = zip(processors, values, strict=True)
            return tuple(p(v) if p is not None and v is not None else v for p, v in pairs)

        return bind

    def reader(self, *columns: Column[Any]) -> Callable[[Row], Row]:
        """Turns a row of the driver's values for ``columns`` into Python's."""
        processors = [c.type.dialect_impl(self.dialect).result_processor(self.dialect, None) for c in columns]
        if not any(processors):
            return lambda row: row

        def read(row: Row) -> Row:
            return tuple(p(v) if p is not None else v for p, v in zip(processors, row, strict=True))

        return read


def columns(table: Table, names: str) -> list[Column[Any]]:
    """``table``'s columns named in ``names`` (comma-separated), in that order."""
    return [table.c[name.strip()] for name in names.split(",")]
