"""Reads started together, sent together: inside ``gathered_reads()``, the
driver's queries that concurrent tasks start in one turn of the event loop
go to SQLite as one batch, so one hand-off to the connection's thread and
one transaction (one snapshot of the database) serve them all.

A call that reads several concepts side by side (a chat run's context:
settings, project context, live state, summary, revision) keeps each read in
its own concept's repository and still costs one round trip per wave of
reads. On PostgreSQL reads are not gathered: the pool serves them in
parallel on several connections, which a batch would serialise."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from services.shared.driver import Driver, Result, Statement


class _LeaderGone(Exception):
    """The read that was to send the batch was cancelled before it did."""


class _Gathering:
    """The reads waiting for the next batch. The first read of a turn leads:
    it lets the others of that turn join, then sends the batch for all."""

    def __init__(self) -> None:
        # The leader's statements first, then each follower's, with its waiter.
        self._leader: Sequence[Statement] = ()
        self._followers: list[tuple[Sequence[Statement], asyncio.Future[list[Result]]]] = []

    async def join(self, driver: GatheringDriver, statements: Sequence[Statement]) -> list[Result]:
        if self._leader:
            waiter: asyncio.Future[list[Result]] = asyncio.get_running_loop().create_future()
            self._followers.append((statements, waiter))
            try:
                return await waiter
            except _LeaderGone:
                return await driver.send(statements)
        self._leader = statements
        try:
            await asyncio.sleep(0)  # the tasks ready in this turn add their reads
        except BaseException:
            _fail(self._take(), _LeaderGone())
            raise
        followers = self._take()
        try:
            results = await driver.send([*statements, *(s for part, _ in followers for s in part)])
        except Exception as exc:
            _fail(followers, exc)
            raise
        except BaseException:
            _fail(followers, _LeaderGone())
            raise
        start = len(statements)
        for part, waiter in followers:
            if not waiter.done():  # a follower cancelled meanwhile has gone
                waiter.set_result(results[start : start + len(part)])
            start += len(part)
        return results[: len(statements)]

    def _take(self) -> list[tuple[Sequence[Statement], asyncio.Future[list[Result]]]]:
        """The followers of this turn; the next read leads the next batch."""
        followers, self._leader, self._followers = self._followers, (), []
        return followers


def _fail(followers: list[tuple[Sequence[Statement], asyncio.Future[list[Result]]]], exc: Exception) -> None:
    for _, waiter in followers:
        if not waiter.done():
            waiter.set_exception(exc)


# The gatherings of this context, one per database (engine).
_gatherings: ContextVar[dict[AsyncEngine, _Gathering] | None] = ContextVar("gathered_reads", default=None)


@contextmanager
def gathered_reads() -> Iterator[None]:
    """Driver reads started in this context, including by the tasks it
    starts, are gathered into batches (on SQLite), one per database."""
    token = _gatherings.set({})
    try:
        yield
    finally:
        _gatherings.reset(token)


def _query(statement: Statement) -> bool:
    """A SELECT with its own arguments: arguments worked out from the
    results before it would see other reads' results in a gathered batch."""
    if statement.many or callable(statement.args):
        return False
    return statement.sql.lstrip()[:6].upper() == "SELECT"


class GatheringDriver(Driver):
    """A driver whose queries join the batch being gathered, if any."""

    def __init__(self, engine: AsyncEngine) -> None:
        super().__init__(engine)
        self.engine = engine

    async def batch(self, statements: Sequence[Statement]) -> list[Result]:
        gatherings = _gatherings.get()
        if not statements or gatherings is None or not self.sqlite or not all(map(_query, statements)):
            return await super().batch(statements)
        gathering = gatherings.get(self.engine)
        if gathering is None:
            gathering = gatherings[self.engine] = _Gathering()
        return await gathering.join(self, statements)

    async def send(self, statements: Sequence[Statement]) -> list[Result]:
        """The statements as one batch, now."""
        return await super().batch(statements)


def driver_of(sessions: async_sessionmaker[Any]) -> GatheringDriver:
    """The driver of the engine ``sessions`` are bound to."""
    engine = sessions.kw["bind"]
    assert isinstance(engine, AsyncEngine), "sessions bound to one async engine"
    return GatheringDriver(engine)
