"""The hot-path driver on both databases, and on PostgreSQL through
PgBouncer in transaction mode (with prepared statements off, as its
settings say there): placeholders, batches in one transaction, rollback on
failure, values converted as SQLAlchemy converts them, and the pool's one
connection shared with SQLAlchemy."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import pytest
from sqlalchemy import Column, DateTime, Integer, MetaData, Table, Text, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from services.shared.db import is_unique_violation
from services.shared.db_retry import is_transient
from services.shared.driver import ConnectionLost, Driver, Statement, columns
from tests.databases import ADMIN_URL, ALSO_THROUGH_PGBOUNCER, engine_with_tables
from tests.pgbouncer import PGBOUNCER

pytestmark = ALSO_THROUGH_PGBOUNCER

metadata = MetaData()
items = Table(
    "driver_items",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("label", Text, nullable=False),
    Column("at", DateTime(timezone=True)),
)
INSERT = "INSERT INTO driver_items (id, label) VALUES ($1, $2)"


@pytest.fixture
async def engine(db_url: str, prepared_statements: bool) -> AsyncIterator[AsyncEngine]:
    async with engine_with_tables(db_url, metadata, prepared_statements) as engine:
        yield engine


async def test_a_batch_runs_in_order_in_one_transaction(engine: AsyncEngine) -> None:
    driver = Driver(engine)
    results = await driver.batch(
        [
            Statement(INSERT, [(1, "un"), (2, "deux")], many=True),
            Statement("UPDATE driver_items SET label = $1 WHERE id >= $2", ("été", 2)),
            Statement("SELECT * FROM driver_items WHERE label = $1 OR id = $2 ORDER BY id", ("été", 1)),
        ]
    )
    assert results[1].rowcount == 1
    assert results[2].rows == [(1, "un", None), (2, "été", None)]
    assert await driver.fetchrow("SELECT label FROM driver_items WHERE id = $1", 9) is None


async def test_a_failing_statement_rolls_the_whole_batch_back(engine: AsyncEngine) -> None:
    driver = Driver(engine)
    await driver.execute(INSERT, 1, "one")
    with pytest.raises(Exception, match="(?i)unique|duplicate"):
        await driver.batch(
            [
                Statement("INSERT INTO driver_items (id, label) VALUES ($1, $2)", (2, "two")),
                Statement("INSERT INTO driver_items (id, label) VALUES ($1, $2)", (1, "again")),
            ]
        )
    assert await driver.fetch("SELECT id, label FROM driver_items ORDER BY id") == [(1, "one")]
    # The connection went back to the pool clean: SQLAlchemy writes and reads on it.
    async with engine.begin() as connection:
        await connection.execute(insert(items).values(id=3, label="three"))
    assert await driver.fetch("SELECT count(*) FROM driver_items") == [(2,)]


async def test_values_round_trip_as_sqlalchemy_stores_them(engine: AsyncEngine) -> None:
    """A timestamp written by the driver reads back through SQLAlchemy as the
    same instant, and the other way round, so both sort together."""
    driver = Driver(engine)
    at_columns = columns(items, "id, label, at")
    bind, read = driver.binder(*at_columns), driver.reader(*at_columns)
    moment = datetime(2026, 12, 5, 18, 30, 15, 123456, tzinfo=UTC)
    await driver.execute("INSERT INTO driver_items VALUES ($1, $2, $3)", *bind((1, "a", moment)))
    async with engine.begin() as connection:
        await connection.execute(insert(items).values(id=2, label="b", at=moment.replace(second=16)))
        stored = await connection.execute(select(items.c.at).where(items.c.id == 1))
        through_sqlalchemy = stored.scalar_one()
    assert through_sqlalchemy.replace(tzinfo=UTC) == moment
    rows = [read(r) for r in await driver.fetch("SELECT id, label, at FROM driver_items ORDER BY at DESC")]
    assert [r[0] for r in rows] == [2, 1]
    assert rows[1][2].replace(tzinfo=UTC) == moment


async def test_a_statement_takes_its_arguments_from_the_results_before_it(engine: AsyncEngine) -> None:
    """Arguments worked out inside the transaction from an earlier RETURNING;
    None skips the statement (an empty result) and the batch goes on."""
    driver = Driver(engine)
    await driver.execute(INSERT, 1, "one")
    results = await driver.batch(
        [
            Statement("UPDATE driver_items SET id = id + 10 WHERE label = $1 RETURNING id", ("one",)),
            Statement(INSERT, lambda done: [(done[0].rows[0][0] + 1, "next")], many=True),
            Statement(INSERT, lambda done: None),
            Statement("SELECT id, label FROM driver_items ORDER BY id", lambda done: ()),
        ]
    )
    assert results[0].rows == [(11,)]
    assert results[2].rows == [] and results[2].rowcount == 0
    assert results[3].rows == [(11, "one"), (12, "next")]


async def test_a_committed_batch_goes_through_the_dialect_commit(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What watches SQLAlchemy's commits sees the driver's: writes, not a lone query."""
    driver = Driver(engine)
    commits: list[object] = []
    commit = engine.dialect.do_commit
    monkeypatch.setattr(engine.dialect, "do_commit", lambda connection: commits.append(commit(connection)))
    await driver.execute(INSERT, 1, "one")
    await driver.fetch("SELECT id FROM driver_items")
    assert len(commits) == 1


async def test_a_lost_connection_is_not_handed_out_again(engine: AsyncEngine, backend: str) -> None:
    """The server ends the pooled connection: the statement on it fails as a
    transient error (db_retry retries it), and the next one gets a live
    connection instead of the dead one back from the pool. Through PgBouncer
    the server connection is the pooler's: it either drops it unseen (the
    next statement gets another) or closes the client's connection too,
    which then fails as transient as well; the one after works either way."""
    if engine.dialect.name != "postgresql":
        pytest.skip("an embedded SQLite connection is not lost")
    driver = Driver(engine)
    pid = (await driver.fetch("SELECT pg_backend_pid()"))[0][0]
    admin = await asyncpg.connect(f"{ADMIN_URL.rsplit('/', 1)[0]}/{engine.url.database}")
    try:
        await admin.execute("SELECT pg_terminate_backend($1)", pid)
    finally:
        await admin.close()
    lost: Exception | None = None
    try:
        await driver.fetch("SELECT 1")
    except Exception as error:  # noqa: BLE001 - classified below
        lost = error
    if lost is None:
        assert backend == PGBOUNCER, "the statement on a terminated connection succeeded"
    else:
        assert is_transient(lost) or isinstance(lost, ConnectionLost), lost
    assert await driver.fetch("SELECT 1") == [(1,)]


async def test_a_unique_violation_of_the_driver_is_recognised_and_not_retried(engine: AsyncEngine) -> None:
    """The driver raises sqlite3's or asyncpg's own errors: the repositories'
    unique-violation handling and db_retry classify them as they classify
    SQLAlchemy's."""
    driver = Driver(engine)
    await driver.execute(INSERT, 1, "one")
    with pytest.raises(Exception) as failed:
        await driver.execute(INSERT, 1, "again")
    assert is_unique_violation(failed.value), repr(failed.value)
    assert not is_transient(failed.value)
    assert await driver.execute(INSERT + " ON CONFLICT DO NOTHING", 1, "again") == 0
