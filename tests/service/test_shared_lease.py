"""services.shared.lease on both databases: a lease taken for an interval is
taken once per interval whoever asks (holders racing on separate
connections included), is free again when its time is up on the process's
clock, and can be released; the transaction-scoped lock excludes a second
PostgreSQL transaction at once, without waiting. On PostgreSQL directly and
through PgBouncer in transaction mode, where each transaction may run on
another server connection."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from services.shared.db import create_engine
from services.shared.lease import LeaseRow, release, take, try_lock
from tests.conftest import MovableClock
from tests.databases import ALSO_THROUGH_PGBOUNCER

pytestmark = ALSO_THROUGH_PGBOUNCER


class LeaseOfTests(LeaseRow, table=True):
    __tablename__ = "test_leases"


@pytest.fixture
async def database(db_url: str, prepared_statements: bool) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(db_url, prepared_statements=prepared_statements)
    async with engine.begin() as connection:
        await connection.run_sync(lambda sync: LeaseOfTests.__table__.create(sync))  # type: ignore[attr-defined]
    try:
        yield engine
    finally:
        await engine.dispose()


async def taken(engine: AsyncEngine, holder: str, seconds: float = 60.0, name: str = "prune") -> bool:
    async with engine.begin() as connection:
        return await take(connection, LeaseOfTests, name, holder, seconds)


async def test_a_lease_is_taken_once_per_interval(database: AsyncEngine, clock: MovableClock) -> None:
    assert await taken(database, "a")
    assert not await taken(database, "b")
    assert not await taken(database, "a")  # not even by its holder, before the interval ends
    assert await taken(database, "b", name="another")  # names are independent
    clock.advance(59)
    assert not await taken(database, "b")
    clock.advance(2)
    assert await taken(database, "b")
    assert not await taken(database, "a")


async def test_a_released_lease_is_free_at_once(database: AsyncEngine, clock: MovableClock) -> None:
    assert await taken(database, "a")
    async with database.begin() as connection:
        await release(connection, LeaseOfTests, "prune", "b")  # not b's: nothing changes
    assert not await taken(database, "b")
    async with database.begin() as connection:
        await release(connection, LeaseOfTests, "prune", "a")
    assert await taken(database, "b")


async def test_holders_racing_for_a_lease_get_it_once(database: AsyncEngine, clock: MovableClock) -> None:
    for _ in range(5):
        results = await asyncio.gather(*(taken(database, f"h{i}", name="race") for i in range(8)))
        assert sum(results) == 1
        clock.advance(61)


async def test_the_transaction_lock_excludes_a_second_transaction(
    database: AsyncEngine, db_url: str, backend: str, prepared_statements: bool
) -> None:
    second = create_engine(db_url, prepared_statements=prepared_statements)  # another replica's connections
    try:
        async with database.begin() as first:
            assert await try_lock(first, "schedule:x")
            async with second.begin() as other:
                held_elsewhere = await try_lock(other, "schedule:x")
                other_name = await try_lock(other, "schedule:y")
    finally:
        await second.dispose()
    # SQLite's single writer serialises transactions itself: the lock is a no-op there.
    assert held_elsewhere is (backend == "sqlite")
    assert other_name
    async with database.begin() as again:
        assert await try_lock(again, "schedule:x")  # released with its transaction
