"""Wake-ups between replicas (services/shared/wakeups.py) on both databases.
On PostgreSQL the writer and the waiter are two hubs, as two replicas would
be: the writer's NOTIFY reaches the waiter's listener. On SQLite one hub
wakes in-process. Either way a waiter reads the data once woken, never
before it is committed, and a wake-up between two reads is never lost."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import pytest
from prometheus_client import REGISTRY
from sqlalchemy import Column, Integer, MetaData, Table, Text
from sqlalchemy.ext.asyncio import AsyncEngine

from services.shared.driver import Driver, Statement
from services.shared.wakeups import LIVE_STATE, RUN_EVENTS, Channel, Waiter, Wakeups, announcing, asyncpg_dsn
from tests.databases import engine_with_tables

metadata = MetaData()
items = Table(
    "wakeup_items",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("key", Text, nullable=False),
)
INSERT = "INSERT INTO wakeup_items (id, key) VALUES ($1, $2)"
# Long enough that a wait that ends was woken, not timed out: no test here
# waits for the safety poll to pass (pytest's own timeout bounds a failure).
NEVER = 3600.0


@dataclass
class Replicas:
    """The writing replica's hub and driver, and the waiting replica's hub
    (the same one on SQLite: one process)."""

    driver: Driver
    writer: Wakeups
    waiter: Wakeups
    url: str


@pytest.fixture
async def engine(db_url: str) -> AsyncIterator[AsyncEngine]:
    async with engine_with_tables(db_url, metadata) as engine:
        yield engine


@pytest.fixture
async def replicas(engine: AsyncEngine, db_url: str) -> AsyncIterator[Replicas]:
    driver = Driver(engine)
    writer = Wakeups(NEVER, driver, db_url, name="writer")
    waiter = writer if driver.sqlite else Wakeups(NEVER, Driver(engine), db_url, name="waiter")
    yield Replicas(driver, writer, waiter, db_url)
    await writer.close()
    await waiter.close()


async def listening(hub: Wakeups, *waiters: Waiter) -> None:
    """Until the hub's listener is connected (a no-op in-process); then the
    wake-up every waiter gets on a connection (its catch-up) is taken."""
    while hub._listen_dsn is not None and not hub.listening:
        await asyncio.sleep(0.01)
    for waiter in waiters:
        await waiter.wait(0)


async def test_a_write_wakes_the_waiters_of_its_key_once_its_rows_are_visible(replicas: Replicas) -> None:
    async with (
        replicas.waiter.subscribe(RUN_EVENTS, "run-1") as mine,
        replicas.waiter.subscribe(RUN_EVENTS, "run-2") as other,
    ):
        await listening(replicas.waiter, mine, other)
        await replicas.writer.batch(
            replicas.driver, [Statement(INSERT, (1, "run-1"))], RUN_EVENTS.of("run-1")
        )
        assert await mine.wait(NEVER)
        # Announced in the write's own transaction: woken, the row is there.
        assert await replicas.driver.fetch("SELECT key FROM wakeup_items") == [("run-1",)]
        assert not await other.wait(0)


async def test_a_wake_up_between_two_reads_is_kept_for_the_next_wait(replicas: Replicas) -> None:
    async with replicas.waiter.subscribe(LIVE_STATE, "projet-été") as waiter:
        await listening(replicas.waiter, waiter)
        # The write lands while the waiter is busy reading, not waiting.
        await replicas.writer.notify(LIVE_STATE.of("projet-été"))
        await asyncio.sleep(0.05)
        assert await waiter.wait(NEVER)
        assert not await waiter.wait(0), "one wake-up wakes one wait"


async def test_a_new_channel_is_one_line_and_a_batch_without_wakes_announces_nothing(
    replicas: Replicas,
) -> None:
    notes = Channel("switchboard_test_notes")
    async with (
        replicas.waiter.subscribe(notes, "acme") as acme,
        replicas.waiter.subscribe(notes, "globex") as globex,
    ):
        await listening(replicas.waiter, acme, globex)
        await replicas.writer.batch(replicas.driver, [Statement(INSERT, (2, "plain"))])
        # Notifications arrive in commit order: once this one is heard, one
        # the plain write had sent would have been heard before it.
        results = await replicas.writer.batch(
            replicas.driver, [Statement("SELECT count(*) FROM wakeup_items")], notes.of("globex")
        )
        assert await globex.wait(NEVER)
        assert not await acme.wait(0)
    assert results[0].rows == [(1,)], "the announcement is not one of the batch's results"


async def test_a_failed_write_announces_nothing(replicas: Replicas) -> None:
    await replicas.driver.execute(INSERT, 1, "first")
    async with replicas.waiter.subscribe(RUN_EVENTS, "run-9") as waiter:
        await listening(replicas.waiter, waiter)
        with pytest.raises(Exception, match="(?i)unique|duplicate"):
            await replicas.writer.batch(
                replicas.driver, [Statement(INSERT, (1, "again"))], RUN_EVENTS.of("run-9")
            )
        # A later announcement on the same channel arrives; the rolled-back one never did.
        await replicas.writer.notify(RUN_EVENTS.of("run-other"), RUN_EVENTS.of("run-9"))
        assert await waiter.wait(NEVER)
        assert not await waiter.wait(0)


async def postgres_only(replicas: Replicas) -> None:
    if replicas.driver.sqlite:
        pytest.skip("the listener is PostgreSQL's; SQLite wakes in-process")


async def test_a_lost_listener_reconnects_and_wakes_every_waiter(replicas: Replicas) -> None:
    await postgres_only(replicas)

    def exported(metric: str) -> float | None:
        return REGISTRY.get_sample_value(metric, {"service": "waiter"})

    connects_before = exported("switchboard_wakeup_listener_connects_total") or 0.0
    async with replicas.waiter.subscribe(RUN_EVENTS, "run-lost") as waiter:
        await listening(replicas.waiter, waiter)
        assert replicas.waiter.connections == 1
        assert exported("switchboard_wakeup_listener_up") == 1
        pid = replicas.waiter.listener_pid()
        admin = await asyncpg.connect(asyncpg_dsn(replicas.url))
        try:
            assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
            # Announced while nobody listens: this notification is lost.
            await admin.execute("SELECT pg_notify($1, $2)", RUN_EVENTS.name, "run-lost")
        finally:
            await admin.close()
        # The catch-up wake of the reconnection stands in for it.
        assert await waiter.wait(NEVER)
        await listening(replicas.waiter)
        assert replicas.waiter.connections == 2
        assert exported("switchboard_wakeup_listener_connects_total") == connects_before + 2
        assert exported("switchboard_wakeup_listener_up") == 1
        assert replicas.waiter.listener_pid() != pid
        await waiter.wait(0)
        # And the new connection hears what comes next.
        await replicas.writer.notify(RUN_EVENTS.of("run-lost"))
        assert await waiter.wait(NEVER)
    await replicas.waiter.close()
    assert exported("switchboard_wakeup_listener_up") == 0


async def test_without_push_a_waiter_is_woken_only_by_its_safety_poll(
    replicas: Replicas, engine: AsyncEngine
) -> None:
    await postgres_only(replicas)
    deaf = Wakeups(0.05, Driver(engine), replicas.url, push=False)
    try:
        async with deaf.subscribe(RUN_EVENTS, "run-deaf") as waiter:
            await replicas.writer.notify(RUN_EVENTS.of("run-deaf"))
            assert not await waiter.wait(NEVER), "the safety poll (0.05 s) ends the wait, unwoken"
            assert not deaf.listening
    finally:
        await deaf.close()


async def test_a_statement_that_announces_itself_wakes_once_per_transaction(replicas: Replicas) -> None:
    """A run's event batch announces itself from its INSERT (no statement of
    its own on PostgreSQL): every row calls pg_notify, one notification is
    delivered per transaction. On SQLite the same call wakes in-process."""
    sql = INSERT
    if not replicas.driver.sqlite:
        announce = announcing(RUN_EVENTS, "$2")
        sql = f"INSERT INTO wakeup_items (id, key) SELECT $1, $2 FROM (SELECT {announce}) AS a"
    heard: list[str] = []
    counter = None if replicas.driver.sqlite else await asyncpg.connect(asyncpg_dsn(replicas.url))
    try:
        if counter is not None:
            await counter.add_listener(RUN_EVENTS.name, lambda *args: heard.append(str(args[3])))
        async with replicas.waiter.subscribe(RUN_EVENTS, "run-5") as waiter:
            await listening(replicas.waiter, waiter)
            rows = [(n, "run-5") for n in range(1, 4)]
            await replicas.writer.batch(
                replicas.driver, [Statement(sql, rows, many=True)], RUN_EVENTS.of("run-5"), announced=True
            )
            assert await waiter.wait(NEVER)
            if counter is not None:
                # A later notification from the same writer arrives after it.
                await replicas.writer.notify(RUN_EVENTS.of("run-later"))
                while "run-later" not in heard:
                    await asyncio.sleep(0.01)
                assert heard == ["run-5", "run-later"]
    finally:
        if counter is not None:
            await counter.close()
    assert len(await replicas.driver.fetch("SELECT id FROM wakeup_items")) == 3
