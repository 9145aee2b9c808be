"""Bounded retries of database work when the connection, not the statement,
fails: a PostgreSQL restart or failover, a dropped TCP connection. The whole
unit of work (one transaction) runs again on a fresh connection after a
jittered exponential backoff, for at most ``retry_seconds`` and never past the
deadline of the gRPC call being served. Any other error is raised at once.

Only work that is safe to run twice is wrapped: reads, and writes made
idempotent by a unique key (a request id, a run's event sequence, a fixed
primary key). That matters because a COMMIT that reached the server can still
look failed to its caller (the reply was lost with the connection): the retry
then meets the rows of the first attempt and must change nothing."""

from __future__ import annotations

import errno
import functools
import logging
import random
import socket
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.dml import Insert
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, wait_exponential_jitter

from services.shared import deadlines, timer
from services.shared.metrics import DB_RETRIES, DB_RETRY_OUTCOMES

log = logging.getLogger(__name__)

T = TypeVar("T")
P = ParamSpec("P")

FIRST_WAIT = 0.1  # seconds before the second attempt, doubled at each attempt ...
MAX_WAIT = 2.0  # ... up to this
JITTER = 0.25  # plus a uniform random 0-JITTER seconds, so processes do not retry in step
# What is left of a served call's deadline when retrying stops: time to answer.
DEADLINE_MARGIN = 0.25
DEFAULT_RETRY_SECONDS = 20.0

_retry_seconds = DEFAULT_RETRY_SECONDS

# SQLSTATEs of a connection that is gone or cannot be had yet: class 08
# (connection exception), 57P01 admin shutdown, 57P02 crash shutdown, 57P03
# cannot connect now (starting up, shutting down).
_TRANSIENT_SQLSTATES = ("57P01", "57P02", "57P03")
# A connect that failed below the driver, as a plain OSError (asyncio raises
# one, "Multiple exceptions: ...", when a name resolves to several addresses).
_CONNECT_ERRNOS = {
    errno.ECONNREFUSED,
    errno.ECONNRESET,
    errno.ECONNABORTED,
    errno.EHOSTUNREACH,
    errno.ENETUNREACH,
    errno.ETIMEDOUT,
    errno.EPIPE,
}


def configure(retry_seconds: float) -> None:
    """How long this process retries a unit of work (0 = never)."""
    global _retry_seconds
    _retry_seconds = max(0.0, retry_seconds)


def _causes(exc: BaseException) -> list[BaseException]:
    """The error, the driver error it wraps (``orig``) and its explicit causes
    (``raise ... from``; not the implicit context, which could be anything)."""
    seen: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo and len(seen) < 8:
        item = todo.pop(0)
        if item is None or any(item is s for s in seen):
            continue
        seen.append(item)
        todo += [getattr(item, "orig", None), item.__cause__]
    return seen


def is_transient(exc: BaseException) -> bool:
    """True when the connection failed or could not be made, so the same work
    may succeed on a new one: SQLAlchemy's ``connection_invalidated`` (the
    server closed the connection mid-statement: asyncpg's
    ConnectionDoesNotExistError, "the underlying connection is closed"), a
    refused or reset connect, a connect timeout, SQLSTATE class 08 or
    57P01-57P03, asyncpg's "connection is closed". A statement that failed
    (a constraint, SQL, any SQLite error) is not transient."""
    for item in _causes(exc):
        if isinstance(item, DBAPIError) and item.connection_invalidated:
            return True
        if isinstance(item, ConnectionError | TimeoutError | socket.gaierror):
            return True
        if isinstance(item, OSError) and (
            item.errno in _CONNECT_ERRNOS or str(item).startswith("Multiple exceptions: ")
        ):
            return True
        sqlstate = getattr(item, "sqlstate", None) or getattr(item, "pgcode", None)
        if isinstance(sqlstate, str) and (sqlstate.startswith("08") or sqlstate in _TRANSIENT_SQLSTATES):
            return True
        if type(item).__name__ == "ConnectionDoesNotExistError":  # asyncpg's, however it arrives
            return True
        # asyncpg's own (the hot-path driver, services.shared.driver) on a
        # connection already closed: what SQLAlchemy's dialect calls a disconnect.
        if type(item).__name__ == "InterfaceError" and "connection is closed" in str(item):
            return True
    return False


def _summary(exc: BaseException | None) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


async def retry_transient(operation: Callable[[int], Awaitable[T]], what: str) -> T:
    """Runs ``operation(attempt)`` (attempt 1, 2, ...) and again while it fails
    with a transient error: waits of 0.1, 0.2, 0.4 ... up to 2 s, each plus
    0-0.25 s of jitter, until ``retry_seconds`` have passed since the first
    failure (or the served call's deadline is near); then re-raises the last
    error. The first attempt costs what a plain call costs. Each attempt
    after the first, and how a unit of work that met a connection failure
    ended, are counted on /metrics (services/shared/metrics.py)."""
    try:
        return await operation(1)
    except Exception as exc:
        if not is_transient(exc):
            raise
        first_error: BaseException = exc
    try:
        result = await _retry(operation, what, first_error)
    except Exception as exc:
        DB_RETRY_OUTCOMES.labels("gave_up" if is_transient(exc) else "failed").inc()
        raise
    DB_RETRY_OUTCOMES.labels("recovered").inc()
    return result


async def _retry(operation: Callable[[int], Awaitable[T]], what: str, first_error: BaseException) -> T:
    """The attempts after the first one, which failed with ``first_error``."""
    if _retry_seconds <= 0:
        raise first_error
    started = timer.monotonic()

    def give_up(upcoming: float) -> bool:
        # The served call's deadline (services.shared.deadlines) bounds the
        # retries too: the service then answers UNAVAILABLE, which callers
        # retry, instead of finishing the work for a caller that has gone.
        left = deadlines.remaining()
        if left is not None and upcoming > left - DEADLINE_MARGIN:
            return True
        return timer.monotonic() - started + upcoming > _retry_seconds

    def stop(state: RetryCallState) -> bool:
        return give_up(state.upcoming_sleep)

    def before_sleep(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        log.warning(
            "database unavailable during %s (attempt %d: %s); retrying in %.2f s",
            what,
            state.attempt_number + 1,
            _summary(error),
            state.upcoming_sleep,
        )

    # tenacity's attempt n is attempt n + 1 here: the first one ran above.
    wait = FIRST_WAIT + random.uniform(0, JITTER)
    if give_up(wait):
        raise first_error
    log.warning(
        "database unavailable during %s (attempt 1: %s); retrying in %.2f s",
        what,
        _summary(first_error),
        wait,
    )
    await timer.sleep(wait)
    attempt_number = 1
    async for attempt in AsyncRetrying(
        retry=retry_if_exception(is_transient),
        wait=wait_exponential_jitter(multiplier=2 * FIRST_WAIT, max=MAX_WAIT, jitter=JITTER),
        stop=stop,
        before_sleep=before_sleep,
        sleep=timer.sleep,
        reraise=True,
    ):
        with attempt:
            attempt_number += 1
            DB_RETRIES.inc()
            result = await operation(attempt_number)
            log.info("%s succeeded at attempt %d", what, attempt_number)
            return result
    raise AssertionError("unreachable: tenacity reraises the last error")


def db_retry(method: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Runs a coroutine function under retry_transient. Only for work that is
    safe to run twice: a read, or one transaction whose writes are idempotent."""
    what = method.__qualname__

    @functools.wraps(method)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        return await retry_transient(lambda _attempt: method(*args, **kwargs), what)

    return wrapper


async def retry_if(safe: bool, operation: Callable[[], Awaitable[T]], what: str) -> T:
    """``operation()`` under retry_transient when ``safe`` (a create carrying
    a request id, whose unique key makes a second run find the first one's
    row), once otherwise."""
    if not safe:
        return await operation()
    return await retry_transient(lambda _attempt: operation(), what)


def insert_skipping_existing(table: Any, dialect: str) -> Insert:
    """``INSERT ... ON CONFLICT DO NOTHING`` on PostgreSQL and SQLite: for the
    retry of a write whose rows have fixed keys, where rows the first attempt
    committed are skipped instead of failing the retry."""
    if dialect == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing()
    if dialect == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing()
    raise ValueError(f"no INSERT ... ON CONFLICT DO NOTHING for {dialect!r}")
