"""Awaiting several reads at once, and none left behind.

``asyncio.gather`` raises the first failure while the other awaitables go on
running, unowned: a read still holding a database connection then outlives
the call that asked for it, and its connection is reclaimed by the garbage
collector instead of the pool. :func:`all_or_none` cancels the others and
waits for them before it raises."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any


async def all_or_none(*reads: Awaitable[Any]) -> list[Any]:
    """The results of ``reads`` in order; on the first failure, the other
    reads are cancelled and awaited, then that failure is raised."""
    tasks = [asyncio.ensure_future(read) for read in reads]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
