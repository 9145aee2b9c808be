"""Waiting for work a test does not drive: a schedule's tick, a webhook's
delivery, each done by a service's own loop."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def until(
    read: Callable[[], Awaitable[T]], done: Callable[[T], bool], timeout: float = 30.0, interval: float = 0.05
) -> T:
    """Calls ``read`` every ``interval`` seconds until ``done`` holds for what
    it returned, and returns that; fails with the last value read after
    ``timeout`` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await read()
        if done(value):
            return value
        assert asyncio.get_running_loop().time() < deadline, value
        await asyncio.sleep(interval)
