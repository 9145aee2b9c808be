"""The SQLite adapter of services/shared/sqlite_driver.py: every statement
gives what SQLAlchemy's own aiosqlite adapter gives, in one hand-off to the
connection's thread, and a commit or rollback goes to SQLite only when a
transaction is open."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiosqlite.core
import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from services.shared import sqlite_driver
from services.shared.db import create_engine

STATEMENTS: list[tuple[str, dict[str, Any] | list[dict[str, Any]] | None]] = [
    ("CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT UNIQUE, body TEXT)", None),
    ("INSERT INTO notes (title, body) VALUES (:t, :b)", {"t": "fenêtre", "b": "Déploiement jeudi à 14 h ✓"}),
    (
        "INSERT INTO notes (title, body) VALUES (:t, :b)",
        [{"t": "window", "b": "Deploy"}, {"t": "été", "b": "Œuvre"}],
    ),
    ("SELECT id, title, body FROM notes ORDER BY id", None),
    ("UPDATE notes SET body = body || '!' WHERE id > :n", {"n": 1}),
    ("INSERT INTO notes (title, body) VALUES (:t, :b) RETURNING id, title", {"t": "retour", "b": "x"}),
    ("DELETE FROM notes WHERE title = :t", {"t": "window"}),
    ("SELECT count(*) FROM notes WHERE body LIKE :p", {"p": "%!"}),
]


@contextmanager
def hand_offs() -> Iterator[list[str]]:
    """Every call made on an aiosqlite connection's thread, by function name."""
    calls: list[str] = []
    original = aiosqlite.core.Connection._execute

    async def counted(self: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(getattr(fn, "__name__", repr(fn)))
        return await original(self, fn, *args, **kwargs)

    aiosqlite.core.Connection._execute = counted  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        aiosqlite.core.Connection._execute = original  # type: ignore[method-assign]


async def outcomes(engine: AsyncEngine) -> list[tuple[Any, ...]]:
    seen: list[tuple[Any, ...]] = []
    async with engine.begin() as connection:
        for sql, parameters in STATEMENTS:
            result = await connection.execute(text(sql), parameters)
            rows = [tuple(row) for row in result.all()] if result.returns_rows else None
            keys = list(result.keys()) if result.returns_rows else None
            seen.append((sql, rows, keys, result.rowcount if not result.returns_rows else None))
    return seen


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'one.db'}")
    yield engine
    await engine.dispose()


async def test_the_engine_of_a_sqlite_url_uses_the_adapter(engine: AsyncEngine) -> None:
    async with engine.connect() as connection:
        raw = await connection.get_raw_connection()
        assert isinstance(raw.dbapi_connection, sqlite_driver.Connection)


async def test_every_statement_gives_what_sqlalchemys_adapter_gives(
    tmp_path: Path, engine: AsyncEngine
) -> None:
    plain = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'plain.db'}")
    try:
        assert await outcomes(engine) == await outcomes(plain)
    finally:
        await plain.dispose()


async def test_a_statement_is_one_hand_off_and_an_idle_commit_or_rollback_none(engine: AsyncEngine) -> None:
    async with engine.begin() as connection:
        await connection.execute(text("CREATE TABLE t (x TEXT)"))
    async with engine.connect() as connection:
        await connection.execute(text("SELECT 1"))  # warms the pool: connect-time pragmas
    with hand_offs() as calls:
        async with engine.connect() as connection:
            rows = (await connection.execute(text("SELECT x FROM t"))).all()
        assert rows == [] and calls == ["_statement"]  # no rollback: SELECT opened no transaction
        calls.clear()
        async with engine.begin() as connection:
            await connection.execute(text("INSERT INTO t VALUES ('a')"))
        assert calls == ["_statement", "commit"]


async def test_a_rollback_after_a_write_undoes_it(engine: AsyncEngine) -> None:
    async with engine.begin() as connection:
        await connection.execute(text("CREATE TABLE t (x TEXT)"))
    with hand_offs() as calls:
        async with engine.connect() as connection:
            await connection.execute(text("INSERT INTO t VALUES ('brouillon')"))
            await connection.rollback()
        assert calls == ["_statement", "rollback"]
    async with engine.connect() as connection:
        assert (await connection.execute(text("SELECT count(*) FROM t"))).scalar_one() == 0


async def test_a_failed_statement_raises_sqlalchemys_error_and_the_connection_goes_on(
    engine: AsyncEngine,
) -> None:
    async with engine.begin() as connection:
        await connection.execute(text("CREATE TABLE t (x TEXT UNIQUE)"))
        await connection.execute(text("INSERT INTO t VALUES ('même')"))
    with hand_offs() as calls, pytest.raises(IntegrityError, match="UNIQUE"):
        async with engine.begin() as connection:
            await connection.execute(text("INSERT INTO t VALUES ('autre')"))
            await connection.execute(text("INSERT INTO t VALUES ('même')"))
    assert calls[-1] == "rollback"  # the failure may have left a transaction: rolled back, not skipped
    async with engine.connect() as connection:
        values = (await connection.execute(text("SELECT x FROM t ORDER BY x"))).scalars().all()
    assert values == ["même"]


async def test_a_streamed_write_is_committed(engine: AsyncEngine, tmp_path: Path) -> None:
    """A server-side cursor (stream_results) is aiosqlite's own and reports
    no transaction state: the commit after it still reaches SQLite."""
    async with engine.begin() as connection:
        await connection.execute(text("CREATE TABLE t (x TEXT)"))  # leaves no transaction open
    async with engine.connect() as connection:
        result = await connection.stream(text("INSERT INTO t VALUES ('flux') RETURNING x"))
        assert [tuple(row) async for row in result] == [("flux",)]
        await connection.commit()
    with sqlite3.connect(tmp_path / "one.db") as other:  # sees committed rows only
        assert other.execute("SELECT x FROM t").fetchall() == [("flux",)]
