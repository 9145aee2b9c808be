"""PostgreSQL through PgBouncer in transaction mode, on the version that
does not track prepared statements (Debian 12's 1.18; tests/pgbouncer.py):
with named prepared statements, transactions of different clients that
take turns on one server connection find a statement missing or another
client's; with ``database_prepared_statements=false`` the driver and
SQLAlchemy send unnamed statements only, and nothing of a statement stays
on a server connection after its transaction. (The services' transaction-
scoped advisory locks through the pooler: tests/service/test_shared_lease.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest
from sqlalchemy import Column, Integer, MetaData, Table, Text, func, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from services.shared.bootstrap import service_engine
from services.shared.db import create_engine
from services.shared.driver import Driver, Statement
from services.threads.settings import ThreadsSettings
from tests.pgbouncer import PGBOUNCER, POOL_SIZE

pytestmark = pytest.mark.parametrize("backend", [PGBOUNCER])

metadata = MetaData()
tallies = Table("pooled_tallies", metadata, Column("id", Integer, primary_key=True), Column("who", Text))
# More clients than the pooler gives the database server connections.
CLIENTS = 4 * POOL_SIZE
BACKEND_PID = "SELECT pg_backend_pid()"
INSERT = "INSERT INTO pooled_tallies (id, who) VALUES ($1, $2)"


@pytest.fixture
async def engine(db_url: str) -> AsyncIterator[AsyncEngine]:
    """The service's engine as its settings make it behind this PgBouncer."""
    settings = ThreadsSettings(database_url=db_url, database_prepared_statements=False)
    engine = service_engine(settings)
    async with engine.begin() as connection:
        await connection.run_sync(metadata.create_all)
    yield engine
    await engine.dispose()


async def server_prepared_statements(engine: AsyncEngine) -> list[str]:
    """The prepared statements on every server connection the pooler holds
    for the database: as many transactions as it has server connections,
    open at once, so each one is on a different connection."""
    everyone_in = asyncio.Barrier(POOL_SIZE)

    async def one() -> list[str]:
        async with engine.connect() as connection:
            await connection.execute(select(1))  # BEGIN: the transaction holds a server connection
            await everyone_in.wait()
            rows = await connection.exec_driver_sql("SELECT name FROM pg_prepared_statements")
            return [str(row[0]) for row in rows]

    return [name for names in await asyncio.gather(*(one() for _ in range(POOL_SIZE))) for name in names]


async def busy_clients(engine: AsyncEngine, rounds: int = 15) -> list[BaseException]:
    """CLIENTS tasks, each on a connection of its own, mixing the driver's
    lone queries, batches and executemany with SQLAlchemy's statements; the
    errors they met."""
    driver = Driver(engine)
    errors: list[BaseException] = []

    async def client(number: int) -> None:
        for turn in range(rounds):
            key = number * 1000 + turn
            try:
                await driver.batch(
                    [
                        Statement(INSERT, [(key, "pilote")], many=True),
                        Statement("UPDATE pooled_tallies SET who = $1 WHERE id = $2", ("élu", key)),
                    ]
                )
                assert await driver.fetchrow("SELECT who FROM pooled_tallies WHERE id = $1", key) == ("élu",)
                async with engine.begin() as connection:
                    await connection.execute(insert(tallies).values(id=key + 500, who="orm"))
                    counted = await connection.execute(select(func.count()).select_from(tallies))
                    assert counted.scalar_one() >= 2
            except Exception as error:  # noqa: BLE001 - reported by the caller
                errors.append(error)

    await asyncio.gather(*(client(n) for n in range(CLIENTS)))
    return errors


@pytest.mark.parametrize("prepared", [True, False], ids=["prepared", "unnamed"])
async def test_a_statement_runs_again_on_another_server_connection(db_url: str, prepared: bool) -> None:
    """What the setting is for, step by step: a client runs a statement (on
    the server connection the pooler lends it), another client's
    transaction then holds that server connection, and the first client
    runs the statement again, on another one. A named statement, prepared
    and cached on the first server connection, is missing there; an
    unnamed one is parsed again where it runs."""
    engine = create_engine(db_url, prepared_statements=prepared)
    others: list[asyncpg.Connection] = []
    try:
        async with engine.connect() as connection:
            client = (await connection.get_raw_connection()).driver_connection
            assert client is not None
            first_server = await client.fetchval(BACKEND_PID)
            # Other clients open transactions until one holds that server
            # connection; the others let theirs go.
            holder = None
            for _ in range(POOL_SIZE):
                other = await asyncpg.connect(db_url.replace("+asyncpg", ""), statement_cache_size=0)
                others.append(other)
                await other.execute("BEGIN")
                if await other.fetchval(BACKEND_PID) == first_server:
                    holder = other
                    break
            assert holder is not None, "no transaction got the first server connection"
            for other in others:
                if other is not holder:
                    await other.execute("ROLLBACK")
            if prepared:
                with pytest.raises(asyncpg.InvalidSQLStatementNameError, match="does not exist"):
                    await client.fetchval(BACKEND_PID)
            else:
                assert await client.fetchval(BACKEND_PID) != first_server
    finally:
        for other in others:
            await other.close()
        await engine.dispose()


async def test_with_prepared_statements_off_every_statement_passes(engine: AsyncEngine) -> None:
    errors = await busy_clients(engine)
    assert not errors, errors[:3]
    async with engine.connect() as connection:
        rows = (await connection.execute(select(tallies.c.who, func.count()).group_by(tallies.c.who))).all()
    assert sorted((who, count) for who, count in rows) == [("orm", CLIENTS * 15), ("élu", CLIENTS * 15)]
    # Unnamed statements only: nothing is left on the pooler's server connections.
    assert await server_prepared_statements(engine) == []
