"""A write that commits but whose caller sees the connection drop is retried,
and the retry is a no-op (services/shared/db_retry.py, idempotency keys).
On SQLite and on PostgreSQL.

The fault is injected where it happens in production: the dialect's COMMIT
runs, the rows are in the database, and then the caller gets a connection
error instead of the reply (``LostReplies``)."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pytest
from prometheus_client import REGISTRY
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

from services.engine.models import AgentAction, AgentRun
from services.engine.repository import RunsRepository
from services.engine.schedules.models import Schedule
from services.engine.schedules.repository import SchedulesRepository
from services.engine.server import MIGRATIONS as ENGINE_MIGRATIONS
from services.shared import bootstrap, db_retry, deadlines
from services.shared.db import create_engine, session_factory
from services.shared.migrations import upgrade_to_head
from services.threads.models import Thread
from services.threads.repository import ThreadsRepository
from services.threads.server import MIGRATIONS as THREADS_MIGRATIONS
from services.threads.tables.entries import NewEntry
from switchboard.engine.v1 import engine_pb2, engine_service_pb2
from switchboard.threads.v1 import threads_pb2, threads_service_pb2
from tests.conftest import DatabaseFactory, FakeTimer
from tests.service.harness import as_user
from tests.service.system import collect, system


class LostReplies:
    """Makes COMMITs on the patched engines reach the database, then fail for
    their caller as if the connection dropped before the reply came back:
    the next ``count`` of them, or (``every_other``) one commit in two."""

    def __init__(self, before_commit: bool = False) -> None:
        self.count = 0
        self.every_other = False
        self.commits = 0
        self.lost = 0
        # Or the connection drops before the COMMIT reaches the database:
        # nothing of the transaction is there (``count`` of them).
        self.before_commit = before_commit

    def patch(self, engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch) -> None:
        dialect = engine.sync_engine.dialect
        commit = dialect.do_commit

        def do_commit(dbapi_connection: Any) -> None:
            if self.before_commit and self.count > 0:
                self.count -= 1
                self.lost += 1
                dialect.do_rollback(dbapi_connection)
                raise ConnectionResetError("connection reset before COMMIT was sent (injected)")
            commit(dbapi_connection)  # committed: the rows are there
            self.commits += 1
            if self.count > 0 or (self.every_other and self.commits % 2 == 1):
                self.count = max(0, self.count - 1)
                self.lost += 1
                raise ConnectionResetError("connection reset after COMMIT was sent (injected)")

        monkeypatch.setattr(dialect, "do_commit", do_commit)


@pytest.fixture(params=["reply-lost", "never-arrived"])
def lost(request: pytest.FixtureRequest) -> LostReplies:
    """Failing commits, both ways a retry must survive: the COMMIT is applied
    and its reply lost (the retry meets its own rows), or it never reaches
    the database (the retry must write them)."""
    return LostReplies(before_commit=request.param == "never-arrived")


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Shorter waits, so that tests of lost replies stay fast."""
    monkeypatch.setattr(db_retry, "FIRST_WAIT", 0.01)
    monkeypatch.setattr(db_retry, "JITTER", 0.01)
    db_retry.configure(5.0)
    yield
    db_retry.configure(db_retry.DEFAULT_RETRY_SECONDS)


@asynccontextmanager
async def migrated(url: str, migrations: Any, service: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(url)
    try:
        await upgrade_to_head(engine, migrations, service)
        yield engine
    finally:
        await engine.dispose()


@asynccontextmanager
async def losing_replies(
    db_url: str, migrations: Any, service: str, monkeypatch: pytest.MonkeyPatch, lost: LostReplies
) -> AsyncIterator[AsyncEngine]:
    """The service's migrated database, its next ``lost.count`` commits failing."""
    async with migrated(db_url, migrations, service) as engine:
        lost.patch(engine, monkeypatch)
        yield engine


def entry(role: int, content: str) -> NewEntry:
    return NewEntry(
        requester="alice",
        target="personal",
        correlation_id="c",
        role=role,
        source="user",
        run_id="r",
        content=content,
    )


def conversation_row(request_id: str | None = None) -> Thread:
    return Thread(id=str(uuid.uuid4()), kind="conversation", user_id="alice", request_id=request_id)


# What is retried


class _Context:
    def __init__(self, remaining: float) -> None:
        self._remaining = remaining

    def time_remaining(self) -> float:
        return self._remaining


def test_only_connection_failures_are_transient() -> None:
    assert db_retry.is_transient(ConnectionRefusedError(111, "Connect call failed"))
    assert db_retry.is_transient(OSError("Multiple exceptions: [Errno 111] Connect call failed, …"))
    assert db_retry.is_transient(asyncpg.CannotConnectNowError("the database system is starting up"))
    assert db_retry.is_transient(
        asyncpg.AdminShutdownError("terminating connection due to administrator command")
    )
    assert db_retry.is_transient(asyncpg.ConnectionDoesNotExistError("connection was closed"))
    assert db_retry.is_transient(DBAPIError("SELECT 1", {}, Exception("closed"), connection_invalidated=True))
    wrapped = OperationalError("COMMIT", {}, ConnectionResetError("reset"))
    assert db_retry.is_transient(wrapped)
    assert not db_retry.is_transient(IntegrityError("INSERT", {}, Exception("duplicate key value")))
    assert not db_retry.is_transient(
        OperationalError("SELECT", {}, sqlite3.OperationalError("no such table: x"))
    )
    assert not db_retry.is_transient(ValueError("bad"))
    assert not db_retry.is_transient(FileNotFoundError(2, "No such file or directory"))


async def test_retries_are_bounded_jittered_and_stop_for_other_errors(timer: FakeTimer) -> None:
    db_retry.configure(1.0)
    starts: list[float] = []

    async def always_down(attempt: int) -> None:
        starts.append(timer.now)
        raise ConnectionRefusedError(111, "Connect call failed")

    began = timer.now
    with pytest.raises(ConnectionRefusedError):
        await db_retry.retry_transient(always_down, "test")
    # Every wait is one the retry slept, and they fit in the retry budget.
    waits = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert waits == pytest.approx(timer.sleeps) and 3 <= len(starts) <= 6, (starts, timer.sleeps)
    assert timer.now - began <= 1.0
    # Exponential from FIRST_WAIT, capped, each plus 0..JITTER of random jitter.
    for index, wait in enumerate(waits):
        base = min(db_retry.FIRST_WAIT * 2**index, db_retry.MAX_WAIT)
        assert base <= wait <= base + db_retry.JITTER, (index, wait)
    # The next wait (its base plus at most JITTER) could have overrun the budget.
    next_base = min(db_retry.FIRST_WAIT * 2 ** len(waits), db_retry.MAX_WAIT)
    assert timer.now - began + next_base + db_retry.JITTER > 1.0

    calls = 0

    async def broken_statement(attempt: int) -> None:
        nonlocal calls
        calls += 1
        raise IntegrityError("INSERT", {}, Exception("duplicate key value"))

    sleeps = len(timer.sleeps)
    with pytest.raises(IntegrityError):
        await db_retry.retry_transient(broken_statement, "test")
    assert calls == 1 and len(timer.sleeps) == sleeps

    # Inside a served call, retrying stops in time to answer before its deadline.
    db_retry.configure(30.0)
    deadlines.enter(_Context(0.6))
    try:
        began = timer.now
        with pytest.raises(ConnectionRefusedError):
            await db_retry.retry_transient(always_down, "test")
        assert timer.now - began <= 0.6 - db_retry.DEADLINE_MARGIN
        assert len(timer.sleeps) > sleeps  # it did retry before giving up
    finally:
        deadlines.detach()
        db_retry.configure(db_retry.DEFAULT_RETRY_SECONDS)


async def test_a_connection_that_comes_back_is_used_again(fast_retries: None) -> None:
    outcomes: list[BaseException | str] = [ConnectionRefusedError(), ConnectionResetError(), "ok"]

    async def flaky(attempt: int) -> str:
        outcome = outcomes[attempt - 1]
        if isinstance(outcome, BaseException):
            raise outcome
        return f"{outcome} at {attempt}"

    assert await db_retry.retry_transient(flaky, "test") == "ok at 3"


def retry_counts() -> dict[str, float]:
    """The retry counters this process exports on /metrics."""
    counts = {"retries": REGISTRY.get_sample_value("switchboard_db_retries_total") or 0.0}
    for outcome in ("recovered", "gave_up", "failed"):
        value = REGISTRY.get_sample_value("switchboard_db_retry_outcomes_total", {"outcome": outcome})
        assert value is not None, f"outcome {outcome} is not exported before it happens"
        counts[outcome] = value
    return counts


def counted_since(before: dict[str, float]) -> dict[str, float]:
    return {key: value - before[key] for key, value in retry_counts().items() if value != before[key]}


async def test_retries_and_how_they_ended_are_counted(timer: FakeTimer) -> None:
    db_retry.configure(1.0)
    try:
        before = retry_counts()

        async def fine(attempt: int) -> str:
            return "ok"

        async def broken_statement(attempt: int) -> None:
            raise IntegrityError("INSERT", {}, Exception("duplicate key value"))

        # A unit of work that never met a connection failure counts nothing.
        assert await db_retry.retry_transient(fine, "test") == "ok"
        with pytest.raises(IntegrityError):
            await db_retry.retry_transient(broken_statement, "test")
        assert counted_since(before) == {}

        outcomes: list[BaseException | str] = [ConnectionRefusedError(), ConnectionResetError(), "ok"]

        async def flaky(attempt: int) -> str:
            outcome = outcomes[attempt - 1]
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome

        await db_retry.retry_transient(flaky, "test")
        assert counted_since(before) == {"retries": 2, "recovered": 1}

        async def down_then_broken(attempt: int) -> None:
            if attempt == 1:
                raise ConnectionResetError("reset")
            raise IntegrityError("INSERT", {}, Exception("duplicate key value"))

        with pytest.raises(IntegrityError):
            await db_retry.retry_transient(down_then_broken, "test")
        assert counted_since(before) == {"retries": 3, "recovered": 1, "failed": 1}

        attempts = 0

        async def always_down(attempt: int) -> None:
            nonlocal attempts
            attempts = attempt
            raise ConnectionRefusedError(111, "Connect call failed")

        with pytest.raises(ConnectionRefusedError):
            await db_retry.retry_transient(always_down, "test")
        retries = 3 + attempts - 1
        assert attempts >= 3 and counted_since(before) == {
            "retries": retries, "recovered": 1, "failed": 1, "gave_up": 1,
        }  # fmt: skip

        # Retries off: the connection failure still shows, as a unit of work given up.
        db_retry.configure(0)
        with pytest.raises(ConnectionRefusedError):
            await db_retry.retry_transient(always_down, "test")
        assert attempts == 1
        assert counted_since(before) == {"retries": retries, "recovered": 1, "failed": 1, "gave_up": 2}
    finally:
        db_retry.configure(db_retry.DEFAULT_RETRY_SECONDS)


# Threads: appends and conversations keyed by request id


async def test_an_append_whose_commit_fails_is_written_once(
    db_url: str, monkeypatch: pytest.MonkeyPatch, fast_retries: None, lost: LostReplies
) -> None:
    async with losing_replies(db_url, THREADS_MIGRATIONS, "threads", monkeypatch, lost) as engine:
        repo = ThreadsRepository(session_factory(engine))
        thread = await repo.threads.insert_conversation(conversation_row())

        lost.count = 1
        first = await repo.entries.append(
            thread.id, "alice", "run-1:user", [entry(1, "hello"), entry(2, "hi")], None
        )
        assert lost.lost == 1 and first is not None
        # The caller's own retry (same request id) is the same no-op: it commits nothing.
        again = await repo.entries.append(
            thread.id, "alice", "run-1:user", [entry(1, "hello"), entry(2, "hi")], None
        )
        assert again is not None and lost.lost == 1

        async with engine.connect() as connection:
            rows = (
                await connection.execute(text("SELECT id, sequence FROM entries ORDER BY sequence"))
            ).all()
            last = (await connection.execute(text("SELECT last_sequence FROM threads"))).scalar_one()
        # One copy, numbered 1..2, and every answer names the same rows.
        assert [(row[0], row[1]) for row in rows] == [(e.id, e.sequence) for e in first.entries]
        assert [e.id for e in again.entries] == [e.id for e in first.entries] and last == 2

        # Without a request id nothing tells a retry from a new append: not retried.
        lost.count = 1
        with pytest.raises(ConnectionResetError):
            await repo.entries.append(thread.id, "alice", "", [entry(1, "unkeyed")], None)


async def test_a_conversation_whose_commit_fails_is_created_once(
    db_url: str, monkeypatch: pytest.MonkeyPatch, fast_retries: None, lost: LostReplies
) -> None:
    async with losing_replies(db_url, THREADS_MIGRATIONS, "threads", monkeypatch, lost) as engine:
        repo = ThreadsRepository(session_factory(engine))
        lost.count = 1
        created = await repo.threads.insert_conversation(conversation_row("k1"))
        retried = await repo.threads.insert_conversation(conversation_row("k1"))
        async with engine.connect() as connection:
            ids = (await connection.execute(text("SELECT id FROM threads"))).scalars().all()
        assert lost.lost == 1 and ids == [created.id] and retried.id == created.id


# Engine: the run row, its events, its end


async def test_run_writes_whose_commits_fail_are_written_once(
    make_database: DatabaseFactory, monkeypatch: pytest.MonkeyPatch, fast_retries: None, lost: LostReplies
) -> None:
    async with (
        make_database("engine") as url,
        losing_replies(url, ENGINE_MIGRATIONS, "engine", monkeypatch, lost) as engine,
    ):
        repo = RunsRepository(engine)

        def event(sequence: int) -> tuple[int, bytes]:
            return sequence, engine_pb2.RunEvent(run_id=run.id, sequence=sequence).SerializeToString()

        run = AgentRun(id=str(uuid.uuid4()), user_id="alice", request_id="req-1", conversation_id="c")
        lost.count = 1
        # Not None: the row is this run's own (an earlier attempt wrote it), not a duplicate request.
        assert await repo.insert_run(run, event(1)[1]) is run
        other = AgentRun(id=str(uuid.uuid4()), user_id="alice", request_id="req-1", conversation_id="c")
        assert await repo.insert_run(other, b"") is None  # a real duplicate request is still one

        lost.count = 1
        await repo.append_events(run.id, [event(2), event(3)])
        action = AgentAction(
            id=str(uuid.uuid4()), run_id=run.id, user_id="alice", tool="t", family="f", status="ok"
        )
        lost.count = 1
        await repo.finish_run(run.id, {"status": "done", "error": None}, [event(4)], [action])
        assert lost.lost == 3

        async with engine.connect() as connection:
            runs = (await connection.execute(text("SELECT id, status FROM agent_runs"))).all()
            sequences = (
                await connection.execute(text("SELECT sequence FROM run_events ORDER BY sequence"))
            ).all()
            actions = (await connection.execute(text("SELECT count(*) FROM agent_actions"))).scalar_one()
        assert [tuple(r) for r in runs] == [(run.id, "done")]
        assert [s[0] for s in sequences] == [1, 2, 3, 4] and actions == 1


async def test_a_schedule_whose_commit_fails_is_stored_once_with_or_without_a_request_id(
    make_database: DatabaseFactory, monkeypatch: pytest.MonkeyPatch, fast_retries: None, lost: LostReplies
) -> None:
    async with (
        make_database("engine") as url,
        losing_replies(url, ENGINE_MIGRATIONS, "engine", monkeypatch, lost) as engine,
    ):
        repo = SchedulesRepository(engine)
        stored = []
        for request_id in ("sched-1", None):
            schedule = Schedule(
                id=str(uuid.uuid4()),
                user_id="alice",
                request_id=request_id,
                cron="0 9 * * 1",
                message="Fais le point sur les déploiements de la semaine",
                conversation_id="c",
            )
            lost.count = 1
            stored.append((await repo.insert(schedule)).id)
            assert stored[-1] == schedule.id
        assert lost.lost == 2
        async with engine.connect() as connection:
            rows = (await connection.execute(text("SELECT id, message FROM schedules"))).all()
        assert sorted(row[0] for row in rows) == sorted(stored)
        assert {row[1] for row in rows} == {"Fais le point sur les déploiements de la semaine"}


# A whole run, with one commit reply in two lost


async def test_a_run_completes_once_when_half_its_commit_replies_are_lost(
    make_database: DatabaseFactory, monkeypatch: pytest.MonkeyPatch, fast_retries: None
) -> None:
    engines: dict[str, AsyncEngine] = {}

    def recording_create_engine(url: str, *, prepared_statements: bool = True) -> AsyncEngine:
        engine = create_engine(url, prepared_statements=prepared_statements)
        engines[url] = engine
        return engine

    monkeypatch.setattr(bootstrap, "create_engine", recording_create_engine)
    async with system(make_database) as sb:
        lost = LostReplies()
        for service in ("engine", "threads"):
            lost.patch(engines[sb.database_urls[service]], monkeypatch)
        created = await sb.threads.CreateConversation(
            threads_service_pb2.CreateConversationRequest(request_id="conv-1"), **as_user("alice")
        )
        conversation = created.conversation.id
        lost.every_other = True
        request = engine_service_pb2.StartRunRequest(
            request_id="run-1", conversation_id=conversation, message="where do the leases stand"
        )
        events = await collect(sb.engine.StartRun(request, **as_user("alice")))
        # The client retries the call with the same request id: the same run, replayed.
        replay = await collect(sb.engine.StartRun(request, **as_user("alice")))
        lost.every_other = False

        assert lost.lost >= 5, lost.lost  # every write of the run lost a reply at least once
        assert events[-1].WhichOneof("kind") == "final", events[-1]
        assert [e.sequence for e in events] == list(range(1, len(events) + 1))
        assert [e.SerializeToString() for e in replay] == [e.SerializeToString() for e in events]
        listed = await sb.threads.ListEntries(
            threads_service_pb2.ListEntriesRequest(thread_id=conversation, page_size=50), **as_user("alice")
        )
        roles = [e.role for e in listed.entries]
        assert roles == [threads_pb2.ROLE_USER, threads_pb2.ROLE_ASSISTANT], roles
        runs = await sb.engine.ListRuns(
            engine_service_pb2.ListRunsRequest(conversation_id=conversation), **as_user("alice")
        )
        assert [r.status for r in runs.runs] == [engine_pb2.RUN_STATUS_DONE]


async def test_a_run_whose_end_cannot_be_recorded_is_settled_failed_once_the_database_is_back(
    make_database: DatabaseFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    down = True

    async def finish_run(self: RunsRepository, *args: Any, **kwargs: Any) -> None:
        if down:  # as if every retry of the settling transaction met a closed database
            raise ConnectionRefusedError(111, "Connect call failed (injected)")
        raise AssertionError("the run's own settlement is not attempted again")

    monkeypatch.setattr(RunsRepository, "finish_run", finish_run)
    # A short lease: the lease loop, which settles such runs, turns every 0.2 s.
    async with system(make_database, lease_seconds=0.6) as sb:
        created = await sb.threads.CreateConversation(
            threads_service_pb2.CreateConversationRequest(), **as_user("alice")
        )
        request = engine_service_pb2.StartRunRequest(
            conversation_id=created.conversation.id, message="where do the leases stand"
        )
        events = await collect(sb.engine.StartRun(request, **as_user("alice")))
        # The client's stream ends without an end: none was stored.
        assert events[-1].WhichOneof("kind") not in ("final", "error")
        run_id = events[0].run_id
        down = False
        for _ in range(100):
            got = await sb.engine.GetRun(engine_service_pb2.GetRunRequest(run_id=run_id), **as_user("alice"))
            if got.run.status != engine_pb2.RUN_STATUS_RUNNING:
                break
            await asyncio.sleep(0.1)
        assert got.run.status == engine_pb2.RUN_STATUS_FAILED
        assert "database was unavailable" in got.run.error
        watched = await collect(
            sb.engine.WatchRun(
                engine_service_pb2.WatchRunRequest(run_id=run_id, after_sequence=events[-1].sequence),
                **as_user("alice"),
            )
        )
        assert [e.sequence for e in watched] == [events[-1].sequence + 1]
        assert watched[0].error.code == "ERROR_REASON_DEPENDENCY_UNAVAILABLE"
