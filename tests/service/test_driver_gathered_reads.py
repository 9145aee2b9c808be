"""Rows read on the driver become the models a session would load
(services/shared/driver_rows.py), and reads started together inside
``gathered_reads()`` go to SQLite as one batch (services/shared/gathered_reads.py):
each read gets its own rows, an error reaches every read of its batch, and
a cancelled read leaves the others answered. On SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime

import pytest
from sqlalchemy import inspect
from sqlalchemy.ext.asyncio import AsyncEngine

from services.memory.handoff.models import HandoffSummaryRow
from services.shared.db import create_engine, session_factory
from services.shared.driver import Result, Statement
from services.shared.driver_rows import Loader
from services.shared.gathered_reads import GatheringDriver, driver_of, gathered_reads
from services.shared.together import all_or_none
from tests.conftest import DatabaseFactory


@pytest.fixture
async def engine(make_database: DatabaseFactory) -> AsyncIterator[AsyncEngine]:
    async with make_database("memory") as url:
        engine = create_engine(url)
        yield engine
        await engine.dispose()


class CountedDriver(GatheringDriver):
    """Records the size of every batch it sends as a gathering's leader."""

    def __init__(self, engine: AsyncEngine) -> None:
        super().__init__(engine)
        self.sent: list[int] = []

    async def send(self, statements: Sequence[Statement]) -> list[Result]:
        self.sent.append(len(statements))
        return await super().send(statements)


async def test_a_loaded_row_is_the_model_a_session_loads(engine: AsyncEngine) -> None:
    checkpoint = datetime(2026, 12, 5, 18, 30, 15, 123456, tzinfo=UTC)
    sessions = session_factory(engine)
    async with sessions() as session:
        session.add(HandoffSummaryRow(thread_id="t", state_json='{"a": "été"}', checkpoint_time=checkpoint))
        await session.commit()
    async with sessions() as session:
        through_session = await session.get(HandoffSummaryRow, "t")
    driver = driver_of(sessions)
    load = Loader(driver, HandoffSummaryRow)
    row = await driver.fetchrow(f"SELECT {load.select} FROM handoff_summaries WHERE thread_id = $1", "t")
    assert row is not None and through_session is not None
    loaded = load(row)
    assert loaded.model_dump() == through_session.model_dump()
    assert loaded.checkpoint_time is not None and loaded.checkpoint_time.replace(tzinfo=UTC) == checkpoint
    assert inspect(loaded).detached and inspect(loaded).key == inspect(through_session).key
    loaded.summariser = "rules"  # settable, as a session's model
    assert loaded.model_dump()["summariser"] == "rules"


async def test_reads_started_together_go_as_one_batch_on_sqlite(engine: AsyncEngine) -> None:
    driver = CountedDriver(engine)
    reads = [
        driver.fetchrow("SELECT CAST($1 AS TEXT) || '-' || CAST($2 AS TEXT)", "lu", str(n)) for n in range(4)
    ]
    with gathered_reads():
        rows = await all_or_none(*reads)
    assert rows == [("lu-0",), ("lu-1",), ("lu-2",), ("lu-3",)]
    # PostgreSQL's pool serves the reads in parallel instead: nothing gathered.
    assert driver.sent == ([4] if driver.sqlite else [])
    # Outside the context, each read goes on its own.
    driver.sent.clear()
    assert await all_or_none(driver.fetchrow("SELECT 1"), driver.fetchrow("SELECT 2")) == [(1,), (2,)]
    assert driver.sent == []


async def test_an_error_reaches_every_read_of_its_batch_only(engine: AsyncEngine) -> None:
    driver = CountedDriver(engine)

    async def later() -> list[tuple[object, ...]]:
        await asyncio.sleep(0.01)  # a turn after the failing batch: a batch of its own
        return await driver.fetch("SELECT count(*) FROM handoff_summaries")

    with gathered_reads():
        outcomes = await asyncio.gather(
            driver.fetchrow("SELECT 1"),
            driver.fetchrow("SELECT missing_column FROM handoff_summaries"),
            later(),
            return_exceptions=True,
        )
    if driver.sqlite:
        assert isinstance(outcomes[0], Exception) and outcomes[0] is outcomes[1]
        assert driver.sent == [2, 1]
    else:
        assert outcomes[0] == (1,) and isinstance(outcomes[1], Exception)
    assert "missing_column" in str(outcomes[1])
    assert outcomes[2] == [(0,)]


async def test_a_cancelled_leader_leaves_the_others_answered(engine: AsyncEngine) -> None:
    driver = CountedDriver(engine)
    with gathered_reads():
        leader = asyncio.ensure_future(driver.fetchrow("SELECT 'leader'"))
        followers = [
            asyncio.ensure_future(driver.fetchrow("SELECT CAST($1 AS TEXT)", f"suite {n}")) for n in range(2)
        ]
        await asyncio.sleep(0)  # every read has joined; the leader waits for its turn
        leader.cancel()
        answers = await asyncio.gather(*followers)
    assert answers == [("suite 0",), ("suite 1",)] and leader.cancelled()
    assert driver.sent == ([1, 1] if driver.sqlite else [])


async def test_reads_of_two_databases_go_to_their_own(
    engine: AsyncEngine, make_database: DatabaseFactory
) -> None:
    async with make_database("router") as url:
        router_engine = create_engine(url)
        try:
            memory, router = CountedDriver(engine), CountedDriver(router_engine)
            with gathered_reads():
                counts = await all_or_none(
                    memory.fetchrow("SELECT count(*) FROM handoff_summaries"),
                    router.fetchrow("SELECT count(*) FROM skill_enablements"),
                    memory.fetchrow("SELECT count(*) FROM live_state"),
                )
        finally:
            await router_engine.dispose()
    assert counts == [(0,), (0,), (0,)]
    assert (memory.sent, router.sent) == (([2], [1]) if memory.sqlite else ([], []))


async def test_a_batch_whose_arguments_come_from_its_results_is_never_gathered(engine: AsyncEngine) -> None:
    driver = CountedDriver(engine)
    chained = [
        Statement("SELECT 41"),
        Statement("SELECT CAST($1 AS INTEGER) + 1", lambda done: done[0].rows[0]),
    ]
    with gathered_reads():
        first, (_, second) = await all_or_none(driver.fetchrow("SELECT 7"), driver.batch(chained))
    assert first == (7,) and second.rows == [(42,)]
    assert driver.sent == ([1] if driver.sqlite else [])
