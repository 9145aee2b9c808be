"""The process's timer for waits and deadlines: monotonic seconds, and how
it waits. A leaf module (the error mapping and deadlines import it), with a
seam for tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

# The process's timer for waits and deadlines (seconds, monotonic), and how
# it waits: the system's, unless a test replaced them (:func:`set_timer`) to
# run backoffs and deadlines without spending their time.
_monotonic: Callable[[], float] = time.monotonic
_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep


def monotonic() -> float:
    return _monotonic()


async def sleep(seconds: float) -> None:
    await _sleep(seconds)


def set_timer(
    monotonic: Callable[[], float] | None, sleep: Callable[[float], Awaitable[None]] | None
) -> None:
    """A test seam: ``monotonic`` and ``sleep`` answer every :func:`monotonic`
    and :func:`sleep` of this process (None: the system's again). Services
    never call it."""
    global _monotonic, _sleep
    _monotonic = monotonic or time.monotonic
    _sleep = sleep or asyncio.sleep
