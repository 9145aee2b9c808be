"""SQLite statements run on the event loop's thread; a file another process
has locked is waited for on aiosqlite's thread, with the loop free."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

from services.shared import sqlite_inline
from services.shared.db import create_engine


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'inline.db'}")

    @event.listens_for(engine.sync_engine, "connect")
    def _thread_function(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.create_function("thread_id", 0, threading.get_ident)

    async with engine.begin() as connection:
        await connection.execute(text("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)"))
    yield engine
    await engine.dispose()


def _hold_write_lock(path: Path) -> sqlite3.Connection:
    """Another process's connection in the middle of a write transaction."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO notes (body) VALUES ('other')")
    return other


async def test_statements_run_on_the_event_loop_thread(engine: AsyncEngine) -> None:
    async with engine.connect() as connection:
        ran_on = (await connection.execute(text("SELECT thread_id()"))).scalar_one()
    assert ran_on == threading.get_ident()


async def test_a_locked_file_is_waited_for_without_blocking_the_loop(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    other = _hold_write_lock(tmp_path / "inline.db")
    waited_before = sqlite_inline.InlineConnection.waited

    async def insert() -> None:
        async with engine.begin() as connection:
            await connection.execute(text("INSERT INTO notes (body) VALUES ('mine')"))

    writer = asyncio.create_task(insert())
    # The loop goes on while the insert waits for the lock: these sleeps
    # return, and the insert is still waiting after them.
    for _ in range(5):
        await asyncio.sleep(0.02)
    assert not writer.done()
    assert sqlite_inline.InlineConnection.waited == waited_before + 1
    other.execute("COMMIT")
    other.close()
    await writer
    async with engine.connect() as connection:
        bodies = (await connection.execute(text("SELECT body FROM notes ORDER BY id"))).scalars().all()
    assert bodies == ["other", "mine"]
    # The connection is back to failing fast on a lock (and to running inline).
    async with engine.connect() as connection:
        assert (await connection.execute(text("PRAGMA busy_timeout"))).scalar_one() == 0
        assert (await connection.execute(text("SELECT thread_id()"))).scalar_one() == threading.get_ident()


async def test_a_lock_held_past_the_busy_timeout_fails_the_statement(
    engine: AsyncEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_inline, "BUSY_TIMEOUT_MS", 50)
    other = _hold_write_lock(tmp_path / "inline.db")
    try:
        with pytest.raises(OperationalError, match="database is locked"):
            async with engine.begin() as connection:
                await connection.execute(text("INSERT INTO notes (body) VALUES ('mine')"))
    finally:
        other.execute("ROLLBACK")
        other.close()
    async with engine.begin() as connection:
        await connection.execute(text("INSERT INTO notes (body) VALUES ('later')"))
        bodies = (await connection.execute(text("SELECT body FROM notes"))).scalars().all()
    assert bodies == ["later"]


def test_only_a_wait_for_a_lock_is_a_lock() -> None:
    locked = sqlite3.OperationalError("database is locked")
    locked.sqlite_errorcode = sqlite3.SQLITE_BUSY  # type: ignore[attr-defined]
    snapshot = sqlite3.OperationalError("database is locked")
    snapshot.sqlite_errorcode = 517  # type: ignore[attr-defined]  # SQLITE_BUSY_SNAPSHOT
    other = sqlite3.OperationalError("no such table: notes")
    other.sqlite_errorcode = sqlite3.SQLITE_ERROR  # type: ignore[attr-defined]
    assert sqlite_inline.is_locked(locked)
    assert not sqlite_inline.is_locked(snapshot)
    assert not sqlite_inline.is_locked(other)
    assert not sqlite_inline.is_locked(ValueError("database is locked"))
