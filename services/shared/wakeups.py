"""Wake-ups between the replicas of one service: what a process waits for
(another replica's run events, a cancellation, a live-state write, a due
webhook or schedule) is announced by the writer, and the waiter reads the
database again.

A notification is a wake-up, never the data: a waiter always reads what it
waits for from the database, from its own cursor, so a lost notification
costs latency, never an event. Every wait also ends after the service's
safety poll (``safety_poll_seconds``, seconds), whatever was announced.

- PostgreSQL: the writer's ``pg_notify(channel, key)`` runs in the same
  transaction as its write (``Wakeups.batch``), so no replica is woken
  before the data is visible; or just after the commit (``notify``) on cold
  paths written through SQLAlchemy. Each process LISTENs on ONE dedicated
  asyncpg connection (``database_listen_url``: a direct connection when the
  pool goes through PgBouncer in transaction mode, where LISTEN cannot
  work). A lost listener reconnects with backoff, then wakes every waiter
  once: what was announced while nobody listened is read then.
- SQLite (one machine, one replica): the same interface, in-process: the
  waiters of every hub of the process on that file are woken once the
  write has committed.

A channel is one line below: its PostgreSQL name, and what its key names.
Waiters ``subscribe`` before they read (a write after the read wakes them),
then ``wait`` between reads."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import weakref
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
from sqlalchemy.engine import make_url

from services.shared.driver import Driver, Result, Statement
from services.shared.metrics import WAKEUP_LISTENER_CONNECTS, WAKEUP_LISTENER_UP

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Wake:
    """One announcement: on ``channel`` (a PostgreSQL channel name), for ``key``."""

    channel: str
    key: str


@dataclass(frozen=True, slots=True)
class Channel:
    """A kind of change that waiters wait for. ``name`` is the PostgreSQL
    channel; a notification's payload is the key of what changed."""

    name: str

    def of(self, key: str = "") -> Wake:
        return Wake(self.name, key)


# The channels: one line each, the key in the comment.
RUN_EVENTS = Channel("switchboard_run_events")  # a run id: events of the run were stored
RUN_CANCEL = Channel("switchboard_run_cancel")  # an engine instance id: a run it executes is to stop
THREAD_FREE = Channel("switchboard_thread_free")  # a thread id: a run on it ended
WEBHOOKS = Channel("switchboard_webhooks")  # "": a webhook delivery is due
SCHEDULES = Channel("switchboard_schedules")  # "": a schedule was created or resumed
LIVE_STATE = Channel("switchboard_live_state")  # a project id: its live state changed

# The safety poll when the service's settings name none, seconds.
SAFETY_POLL_SECONDS = 5.0
# Reconnection of a lost listener: the first wait, doubled up to the last.
RECONNECT_FIRST_SECONDS = 0.1
RECONNECT_MAX_SECONDS = 5.0


def announcing(channel: Channel, key: str) -> str:
    """The SQL expression announcing ``channel`` with ``key`` (an SQL
    expression: a placeholder), for a statement that announces itself."""
    return f"pg_notify('{channel.name}', {key})"


def notify_statement(wakes: Sequence[Wake]) -> Statement:
    """One statement announcing every wake (one round trip, however many)."""
    calls = ", ".join(f"pg_notify(${2 * n + 1}, ${2 * n + 2})" for n in range(len(wakes)))
    return Statement(f"SELECT {calls}", [value for wake in wakes for value in (wake.channel, wake.key)])


def asyncpg_dsn(url: str) -> str:
    """A SQLAlchemy PostgreSQL URL as the DSN asyncpg connects with."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class Waiter:
    """One subscription: ``wait`` returns at a wake-up, or at the timeout."""

    def __init__(self, safety_seconds: float) -> None:
        self._woken = asyncio.Event()
        self._safety_seconds = safety_seconds

    def wake(self) -> None:
        self._woken.set()

    async def wait(self, timeout: float | None = None) -> bool:
        """Until woken or ``timeout`` seconds (the safety poll by default,
        never more); True when woken. A wake-up since the last wait (or since
        subscribing) returns at once: none is lost between two reads."""
        seconds = self._safety_seconds if timeout is None else min(timeout, self._safety_seconds)
        if not self._woken.is_set() and seconds > 0:
            # asyncio.timeout, not wait_for, which on Python 3.11 loses a
            # cancellation (the waiter leaving) that lands as it is woken.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(seconds):
                    await self._woken.wait()
        woken = self._woken.is_set()
        self._woken.clear()
        return woken


class _Board:
    """The waiters of a process, by (channel, key)."""

    def __init__(self) -> None:
        self.waiters: defaultdict[tuple[str, str], set[Waiter]] = defaultdict(set)


# In-process boards by SQLite database: the hubs of one process on one file
# (in-process replicas, as the service tests run them) wake each other.
_SQLITE_BOARDS: weakref.WeakValueDictionary[str, _Board] = weakref.WeakValueDictionary()


def _board_of(driver: Driver | None) -> _Board:
    if driver is None or not driver.sqlite:
        return _Board()
    board = _SQLITE_BOARDS.get(driver.database)
    if board is None:
        board = _SQLITE_BOARDS[driver.database] = _Board()
    return board


class Wakeups:
    """The wake-ups of one process over one service database (``driver``'s).

    On SQLite, or without a driver, in-process only. On PostgreSQL
    ``listen_url`` is the URL the listener connects to (None: no listener);
    ``push`` False leaves it unconnected (waiters then rely on the safety
    poll alone)."""

    def __init__(
        self,
        safety_seconds: float = SAFETY_POLL_SECONDS,
        driver: Driver | None = None,
        listen_url: str | None = None,
        push: bool = True,
        name: str = "switchboard",
    ) -> None:
        self.safety_seconds = safety_seconds
        self._driver = driver
        self._postgres = driver is not None and not driver.sqlite
        self._listen_dsn = asyncpg_dsn(listen_url) if listen_url and self._postgres and push else None
        self._name = name
        self._board = _board_of(driver)
        self._waiters = self._board.waiters
        # Channels LISTENed to (or to LISTEN to once connected), and the
        # lock that orders a new channel with a (re)connection.
        self._channels: set[str] = set()
        self._lock = asyncio.Lock()
        self._connection: asyncpg.Connection | None = None
        self._supervisor: asyncio.Task[None] | None = None
        # Connections made so far (the first, then each reconnection).
        self.connections = 0

    # Waiting

    @contextlib.asynccontextmanager
    async def subscribe(self, channel: Channel, key: str = "") -> AsyncIterator[Waiter]:
        """A waiter for ``channel``'s announcements of ``key``, from now on
        (its owner may wake it too). Subscribe before reading: a write
        committed after the read wakes it."""
        waiter = Waiter(self.safety_seconds)
        waiters = self._waiters[(channel.name, key)]
        waiters.add(waiter)
        try:
            await self._listen(channel.name)
            yield waiter
        finally:
            waiters.discard(waiter)
            if not waiters:
                self._waiters.pop((channel.name, key), None)

    def deliver(self, wake: Wake) -> None:
        """Wakes this process's waiters of ``wake`` (what a notification does)."""
        for waiter in self._waiters.get((wake.channel, wake.key), ()):
            waiter.wake()

    def wake_all(self) -> None:
        """Wakes every waiter of the process (each reads what it missed)."""
        for waiters in self._waiters.values():
            for waiter in waiters:
                waiter.wake()

    # Announcing

    async def batch(
        self, driver: Driver, statements: Sequence[Statement], *wakes: Wake, announced: bool = False
    ) -> list[Result]:
        """``statements`` in one transaction (``driver.batch``), announcing
        ``wakes`` once it commits: on PostgreSQL by one pg_notify statement
        inside the transaction (none when the statements announce them
        themselves: ``announced``), on SQLite in-process after it."""
        if not wakes or (announced and self._postgres):
            return await driver.batch(statements)
        if self._postgres:
            return (await driver.batch([*statements, notify_statement(wakes)]))[:-1]
        results = await driver.batch(statements)
        for wake in wakes:
            self.deliver(wake)
        return results

    async def notify(self, *wakes: Wake) -> None:
        """Announces ``wakes`` of a write already committed (cold paths
        written through SQLAlchemy). A failure is logged, not raised: the
        write is done, and its waiters find it at their safety poll."""
        if not wakes:
            return
        if self._driver is None or not self._postgres:
            for wake in wakes:
                self.deliver(wake)
            return
        try:
            await self._driver.batch([notify_statement(wakes)])
        except Exception:  # noqa: BLE001 - a lost wake-up costs latency, never data
            log.warning("could not announce %s; waiters find it at their safety poll", wakes, exc_info=True)

    # The PostgreSQL listener

    async def _listen(self, channel: str) -> None:
        """LISTENs to ``channel`` from now on (a no-op in-process)."""
        if self._listen_dsn is None or channel in self._channels:
            return
        async with self._lock:
            if channel in self._channels:
                return
            self._channels.add(channel)
            if self._supervisor is None:
                self._supervisor = asyncio.create_task(self._supervise(), name=f"{self._name} wakeups")
                return  # LISTENed once connected, then every waiter is woken
            if self._connection is not None:
                try:
                    await self._connection.add_listener(channel, self._deliver)
                except Exception:  # noqa: BLE001 - the supervisor reconnects and LISTENs again
                    log.warning("LISTEN %s failed; reconnecting", channel, exc_info=True)
                    self._connection.terminate()

    def _deliver(self, _connection: object, _pid: int, channel: str, payload: object) -> None:
        self.deliver(Wake(channel, str(payload)))

    async def _supervise(self) -> None:
        """Keeps the listener connected: connects, LISTENs to every channel,
        wakes every waiter (a catch-up of what nobody heard), then watches the
        connection; a lost one is made again with backoff."""
        assert self._listen_dsn is not None
        delay = RECONNECT_FIRST_SECONDS
        while True:
            connection = None
            try:
                connection = await asyncpg.connect(
                    self._listen_dsn,
                    timeout=10,
                    server_settings={"application_name": f"{self._name} wakeups"},
                )
                lost = asyncio.Event()
                connection.add_termination_listener(_setter(lost))
                async with self._lock:
                    for channel in self._channels:
                        await connection.add_listener(channel, self._deliver)
                    self._connection = connection
                self.connections += 1
                WAKEUP_LISTENER_CONNECTS.labels(self._name).inc()
                WAKEUP_LISTENER_UP.labels(self._name).set(1)
                delay = RECONNECT_FIRST_SECONDS
                self.wake_all()
                await self._watch(connection, lost)
                log.warning("%s: the wake-up listener's connection was lost; reconnecting", self._name)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - keep listening through database outages
                log.warning("%s: wake-up listener unavailable (%s); retrying", self._name, error)
            finally:
                self._connection = None
                WAKEUP_LISTENER_UP.labels(self._name).set(0)
                if connection is not None:
                    connection.terminate()
            await asyncio.sleep(delay * (0.5 + random.random() / 2))
            delay = min(delay * 2, RECONNECT_MAX_SECONDS)

    async def _watch(self, connection: asyncpg.Connection, lost: asyncio.Event) -> None:
        """Until the connection is lost: its closing socket ends the watch at
        once; a query each safety interval finds one that went silent."""
        while not lost.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.safety_seconds):
                    await lost.wait()
            if not lost.is_set():
                async with asyncio.timeout(self.safety_seconds):
                    await connection.execute("SELECT 1")

    @property
    def listening(self) -> bool:
        """Whether the PostgreSQL listener is connected now."""
        return self._connection is not None and not self._connection.is_closed()

    def listener_pid(self) -> int | None:
        """The listener's backend process id (tests end it to prove reconnection)."""
        return self._connection.get_server_pid() if self.listening and self._connection else None

    async def close(self) -> None:
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
            self._supervisor = None


def _setter(event: asyncio.Event) -> Callable[[Any], None]:
    """A termination listener that sets ``event``."""
    return lambda _connection: event.set()
