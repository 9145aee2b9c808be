"""SQLite statements on the event loop's own thread.

aiosqlite runs every call (execute, fetch, commit, even closing a cursor) on
a thread of its own and wakes the event loop with the result: two thread
switches and a loop wake-up per call, which cost more CPU than the statement
itself (a primary-key read is about 10 µs in sqlite3, about 100 µs through
aiosqlite). A service process holds one connection to its own file
(services.shared.db) and its statements are short (writes and reads of a few
rows; maintenance works in batches of short transactions), so
:class:`InlineConnection` runs them where the caller is.

The one wait that is not short is another process holding the file's write
lock (a maintenance command, or a second process on the same file): the
connection has no busy timeout of its own, so such a statement fails at once
with "database is locked", and is then run again on aiosqlite's thread with
the usual busy timeout, where waiting blocks nothing else. A statement that
found the file locked changed nothing (SQLite takes the write lock before it
writes), so running it again is what SQLite's own busy handler would do."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import aiosqlite

# How long a statement waits for another process's write lock, on the
# connection's thread (SQLite's busy_timeout, in milliseconds).
BUSY_TIMEOUT_MS = 5000


# SQLITE_BUSY_SNAPSHOT: the transaction read an older snapshot than the one
# it now wants to write on. Waiting cannot cure it (SQLite's busy handler does
# not retry it either): the transaction has to start again.
_BUSY_SNAPSHOT = 517


def is_locked(exc: BaseException) -> bool:
    """SQLITE_BUSY: another connection holds the lock this statement needs."""
    code = getattr(exc, "sqlite_errorcode", None)
    return (
        isinstance(exc, sqlite3.OperationalError)
        and code is not None
        and code & 0xFF == sqlite3.SQLITE_BUSY
        and code != _BUSY_SNAPSHOT
    )


class InlineConnection(aiosqlite.Connection):
    """An aiosqlite connection whose calls run on the calling thread; only
    opening, closing and waiting for a lock use aiosqlite's thread."""

    # Calls that ran on aiosqlite's thread because the file was locked
    # (tests and the benchmark read it).
    waited = 0

    async def _execute(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if not self._running or not self._connection:
            raise ValueError("Connection closed")
        try:
            return fn(*args, **kwargs)
        except sqlite3.OperationalError as exc:
            if not is_locked(exc):
                raise
        InlineConnection.waited += 1
        return await super()._execute(self._waiting, fn, args, kwargs)  # type: ignore[no-untyped-call]

    def _waiting(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``fn`` again, on aiosqlite's thread, with a busy timeout."""
        connection = self._conn
        connection.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        try:
            return fn(*args, **kwargs)
        finally:
            connection.execute("PRAGMA busy_timeout=0")


def connect(database: str | bytes | Path, *, iter_chunk_size: int = 64, **kwargs: Any) -> InlineConnection:
    """What ``aiosqlite.connect`` takes and does, with an :class:`InlineConnection`
    and no busy timeout (see the module's docstring)."""
    location = database.decode() if isinstance(database, bytes) else str(database)
    kwargs["timeout"] = 0
    connection = InlineConnection(partial(sqlite3.connect, location, **kwargs), iter_chunk_size)
    # As SQLAlchemy does for the connections it makes: an engine never
    # disposed must not keep the process alive at exit.
    connection._thread.daemon = True
    return connection
