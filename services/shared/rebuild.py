"""Re-embedding stored text when the configured embedder changes: the one
progress report and the one background runner that the router's ``reindex``
and memory's ``reembed`` share.

A rebuild writes each batch in its own transaction and only ever picks what
has no vector of the configured embedder yet, so it is resumable by
construction: stopped (a deploy, a crash, Ctrl-C), it restarts where it was.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

_log = logging.getLogger(__name__)

# Rows embedded per batch (and per transaction).
BATCH = 64

# Told (done, total) after every batch.
Progress = Callable[[int, int], None]


@dataclass
class ProgressLine:
    """Prints ``what: done/total (n%), rate`` after each batch, to a terminal."""

    what: str
    # None: the process's standard error at the time of writing.
    stream: TextIO | None = None
    _start: float = field(default_factory=time.monotonic)

    def __call__(self, done: int, total: int) -> None:
        elapsed = max(time.monotonic() - self._start, 1e-9)
        share = 100.0 * done / total if total else 100.0
        stream = self.stream or sys.stderr
        stream.write(f"{self.what}: {done}/{total} ({share:.0f}%), {done / elapsed:.0f}/s\n")
        stream.flush()


def logged(what: str) -> Progress:
    """A progress report into the service's log."""

    def report(done: int, total: int) -> None:
        _log.info("%s: %d/%d embedded", what, done, total)

    return report


class Background:
    """At most one rebuild at a time, as a task of this process; ``close``
    cancels it at shutdown (the rows written so far stay: the next start
    resumes)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._task: asyncio.Task[object] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self, work: Callable[[Progress], Coroutine[Any, Any, object]]) -> None:
        """Runs ``work(progress)`` unless a rebuild is running already."""
        if self.running:
            return
        self._task = asyncio.create_task(work(logged(self.what)), name=self.what)
        self._task.add_done_callback(self._done)

    def _done(self, finished: asyncio.Task[object]) -> None:
        if not finished.cancelled() and (error := finished.exception()) is not None:
            _log.error("%s failed: %r; the next start resumes it", self.what, error)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


def command(
    argv: Sequence[str], prog: str, description: str | None, work: Callable[[], Awaitable[int]]
) -> int:
    """The command line of a rebuild: no options; ``work`` returns how many
    rows it embedded (its progress goes to standard error)."""
    argparse.ArgumentParser(prog=prog, description=description).parse_args(argv)
    embedded = asyncio.run(_awaited(work))
    print(f"{prog.rsplit(' ', 1)[-1]}: {embedded} embedded")
    return 0


async def _awaited(work: Callable[[], Awaitable[int]]) -> int:
    return await work()
