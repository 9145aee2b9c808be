"""The event loop every service process runs on, chosen in one place.

uvloop (libuv) by default: its loop, sockets and timers cost less CPU per
call than asyncio's own (a few ms per run across the four services, within
the noise of a busy machine: docs/history/benchmarks-2026.md), and the gateway already
runs on it through uvicorn.
``SWITCHBOARD_EVENT_LOOP=asyncio`` falls back to asyncio's loop, e.g. to
tell whether a problem is the loop's; so does a platform without uvloop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

log = logging.getLogger(__name__)

EventLoopName = Literal["uvloop", "asyncio"]
T = TypeVar("T")


def loop_factory(name: EventLoopName) -> Callable[[], asyncio.AbstractEventLoop]:
    """A constructor of the named loop; asyncio's when uvloop is asked for
    but not installed (it is a dependency wherever it builds: not Windows)."""
    if name == "uvloop":
        try:
            import uvloop
        except ImportError:  # pragma: no cover - a platform without uvloop
            log.warning("uvloop is not installed: running on asyncio's event loop")
        else:
            return uvloop.new_event_loop
    return asyncio.new_event_loop


def run(main: Coroutine[Any, Any, T], name: EventLoopName) -> T:
    """``asyncio.run(main)`` on the named loop (the same debug, shutdown of
    async generators and of the default executor)."""
    with asyncio.Runner(loop_factory=loop_factory(name)) as runner:
        return runner.run(main)


def running_loop_name() -> str:
    """What the running loop is, for a start-up log line: ``uvloop`` or
    ``asyncio``."""
    module = type(asyncio.get_running_loop()).__module__
    return "uvloop" if module.startswith("uvloop") else "asyncio"
