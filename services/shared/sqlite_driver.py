"""SQLAlchemy's aiosqlite adapter with one thread hand-off per statement.

aiosqlite runs every call on its connection's thread and hands the result back
to the event loop. SQLAlchemy's adapter makes four such calls per statement
(open a cursor, execute, fetch the rows, close the cursor) and one per commit
or rollback, even when no transaction is open. Each hand-off wakes a thread
and the loop: a chat run made about 120 of them for 24 statements.

Here a statement is one call that does all four on the connection's thread,
the same thread aiosqlite uses, so SQLite's threading is unchanged. A commit
or rollback with no transaction open is a no-op in SQLite, so it is not handed
off: every statement reports whether it left a transaction open.

SQLAlchemy takes it as the DBAPI module of the ``sqlite+aiosqlite`` dialect
(``create_async_engine(..., module=module())``), so the dialect, pooling and
error translation stay SQLAlchemy's own.
"""

from __future__ import annotations

import collections
import sqlite3
from collections.abc import Sequence
from typing import Any

import aiosqlite
from sqlalchemy.dialects.sqlite.aiosqlite import (
    AsyncAdapt_aiosqlite_connection,
    AsyncAdapt_aiosqlite_cursor,
    AsyncAdapt_aiosqlite_dbapi,
    AsyncAdapt_aiosqlite_ss_cursor,
)
from sqlalchemy.util.concurrency import await_

# What a statement hands back: description, rows, lastrowid, rowcount, and
# whether the connection is inside a transaction afterwards.
Outcome = tuple[Any, Sequence[Any], int | None, int, bool]


def _statement(connection: sqlite3.Connection, operation: str, parameters: Any, many: bool) -> Outcome:
    """On the connection's thread: run one statement and read all it returns."""
    cursor = connection.cursor()
    try:
        if many:
            cursor.executemany(operation, parameters)
        elif parameters is None:
            cursor.execute(operation)
        else:
            cursor.execute(operation, parameters)
        description = cursor.description
        rows = cursor.fetchall() if description else ()
        return description, rows, cursor.lastrowid, cursor.rowcount, connection.in_transaction
    finally:
        cursor.close()


class Cursor(AsyncAdapt_aiosqlite_cursor):
    """A cursor whose statements are one hand-off each; it holds no aiosqlite
    cursor, so closing it costs nothing."""

    __slots__ = ("_description", "_lastrowid", "_rowcount")
    _awaitable_cursor_close = False

    def __init__(self, adapt_connection: Any) -> None:
        super().__init__(adapt_connection)
        self._description: Any = None
        self._lastrowid: int | None = None
        self._rowcount = -1

    def _make_new_cursor(self, connection: Any) -> Any:
        return None

    def _aenter_cursor(self, cursor: Any) -> Any:
        return cursor

    @property
    def description(self) -> Any:
        return self._description

    @property
    def rowcount(self) -> int:
        return self._rowcount

    @property
    def lastrowid(self) -> Any:
        return self._lastrowid

    @property
    def arraysize(self) -> int:
        return 1  # the DBAPI's default; fetchmany() without a size

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        pass

    def execute(self, operation: Any, parameters: Any = None) -> Any:
        try:
            return await_(self._run(operation, parameters, many=False))
        except Exception as error:
            self._adapt_connection._handle_exception(error)

    def executemany(self, operation: Any, seq_of_parameters: Any) -> Any:
        try:
            return await_(self._run(operation, seq_of_parameters, many=True))
        except Exception as error:
            self._adapt_connection._handle_exception(error)

    async def _run(self, operation: str, parameters: Any, many: bool) -> None:
        connection = self._adapt_connection
        assert isinstance(connection, Connection)
        async with connection._execute_mutex:
            # Until the statement reports back, a failure may have left a
            # transaction open: the next commit or rollback is handed off.
            connection.in_transaction = True
            raw = self._connection._conn
            outcome: Outcome = await self._connection._execute(_statement, raw, operation, parameters, many)
        self._description, rows, self._lastrowid, self._rowcount, connection.in_transaction = outcome
        self._rows = collections.deque(rows)


class ServerSideCursor(AsyncAdapt_aiosqlite_ss_cursor):
    """A streamed result (``stream_results``) keeps aiosqlite's own cursor,
    which reports nothing back: after it, a transaction may be open."""

    __slots__ = ()

    def execute(self, operation: Any, parameters: Any = None) -> Any:
        self._may_open_a_transaction()
        return super().execute(operation, parameters)

    def executemany(self, operation: Any, seq_of_parameters: Any) -> Any:
        self._may_open_a_transaction()
        return super().executemany(operation, seq_of_parameters)

    def _may_open_a_transaction(self) -> None:
        connection = self._adapt_connection
        assert isinstance(connection, Connection)
        connection.in_transaction = True


class Connection(AsyncAdapt_aiosqlite_connection):
    """aiosqlite's connection adapter, with single hand-off cursors and no
    hand-off to end a transaction that is not open."""

    __slots__ = ("in_transaction",)
    _cursor_cls = Cursor
    _ss_cursor_cls = ServerSideCursor

    def __init__(self, dbapi: Any, connection: Any) -> None:  # an aiosqlite.Connection
        super().__init__(dbapi, connection)
        self.in_transaction = True  # unknown until the first statement

    def commit(self) -> None:
        if self.in_transaction:
            super().commit()
            self.in_transaction = False

    def rollback(self) -> None:
        if self.in_transaction:
            super().rollback()
            self.in_transaction = False


class DBAPI(AsyncAdapt_aiosqlite_dbapi):
    def connect(self, *arg: Any, **kw: Any) -> Connection:
        adapted = super().connect(*arg, **kw)
        return Connection(self, adapted._connection)


def module() -> DBAPI:
    """The DBAPI module to give ``create_async_engine`` for ``sqlite+aiosqlite``."""
    return DBAPI(aiosqlite, sqlite3)
