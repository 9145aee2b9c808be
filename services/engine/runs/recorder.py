"""The run's recorder: numbers its events and writes each to the database
*before* any client sees it (write-ahead), so a resumed stream, another
replica, or the settlement of a crashed run never reuses a sequence a client
has seen. Chat and ask work both emit through it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

from services.engine import texts
from services.engine.feed import RunFeed
from services.engine.repository import RunsRepository
from services.engine.runs.outcome import Outcome
from switchboard.engine.v1 import engine_pb2
from switchboard.memory.v1 import memory_pb2

log = logging.getLogger(__name__)

TERMINAL_KINDS = ("final", "error")


def is_terminal(event: engine_pb2.RunEvent) -> bool:
    return event.WhichOneof("kind") in TERMINAL_KINDS


class Recorder:
    """Events emitted while a write is in flight go in the next batch: a fast
    producer costs few transactions."""

    def __init__(self, run_id: str, feed: RunFeed, repo: RunsRepository, language: str = "en") -> None:
        self.run_id = run_id
        # The language of the run's texts (services.engine.texts).
        self.language = language
        self._feed = feed
        self._repo = repo
        # What the run has reached so far, and the actions it took: kept by a
        # run that fails, is cancelled or runs out of budget.
        self.outcome = Outcome()
        self._sequence = 0
        self._pending: list[engine_pb2.RunEvent] = []
        self._writer: asyncio.Task[None] | None = None
        self._broken = False

    def make(self, **kind: Any) -> engine_pb2.RunEvent:
        self._sequence += 1
        event = engine_pb2.RunEvent(run_id=self.run_id, sequence=self._sequence, **kind)
        event.create_time.GetCurrentTime()
        return event

    def emit(self, **kind: Any) -> None:
        self._pending.append(self.make(**kind))
        if not self._broken and (self._writer is None or self._writer.done()):
            self._writer = asyncio.create_task(self._write())

    def notice(self, code: str, message: str) -> None:
        self.emit(notice=engine_pb2.Notice(code=code, message=message))

    def live_state(
        self, kind: memory_pb2.LiveStateEventType.ValueType, entries: Iterable[memory_pb2.LiveStateEntry]
    ) -> None:
        """The project's live state as the run read it (SNAPSHOT), or the
        entry it set (SET): in the run's log, so every read of the run, and
        every protocol's encoder, follows the same state."""
        self.emit(live_state=engine_pb2.LiveStateChanged(type=kind, entries=entries))

    def text(self, key: str, **values: object) -> str:
        """The text ``key`` in the run's language."""
        return texts.say(self.language, key, **values)

    def say(self, code: str, key: str = "", **values: object) -> None:
        """The notice ``code``, its message the text ``key`` (the code's own
        text by default) in the run's language."""
        self.notice(code, self.text(key or code, **values))

    @asynccontextmanager
    async def step(self, key: str, label: str) -> AsyncIterator[None]:
        """A named step around real work: started, then completed or failed."""
        self.emit(step=engine_pb2.Step(key=key, label=label, status=engine_pb2.STEP_STATUS_STARTED))
        try:
            yield
        except BaseException:
            self.emit(step=engine_pb2.Step(key=key, label=label, status=engine_pb2.STEP_STATUS_FAILED))
            raise
        self.emit(step=engine_pb2.Step(key=key, label=label, status=engine_pb2.STEP_STATUS_COMPLETED))

    async def _write(self) -> None:
        while self._pending and not self._broken:
            batch, self._pending = self._pending, []
            try:
                await self._repo.append_events(
                    self.run_id, [(e.sequence, e.SerializeToString()) for e in batch]
                )
            except Exception:
                # Stop writing; the run's finishing transaction retries these.
                self._broken = True
                self._pending = batch + self._pending
                log.exception("persisting events of run %s failed; retrying at finish", self.run_id)
                return
            for event in batch:
                await self._feed.publish(event)

    async def drain(self) -> list[engine_pb2.RunEvent]:
        """Waits for the writer; returns the events it has not written."""
        if self._writer is not None:
            await asyncio.shield(self._writer)
        unwritten, self._pending = self._pending, []
        return unwritten
