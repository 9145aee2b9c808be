"""all_or_none: the first failure is raised only once every other read has
stopped, so no read outlives its call."""

from __future__ import annotations

import asyncio

import pytest

from services.shared.together import all_or_none


async def test_results_come_in_order() -> None:
    async def value(v: int, delay: float) -> int:
        await asyncio.sleep(delay)
        return v

    assert await all_or_none(value(1, 0.02), value(2, 0), value(3, 0.01)) == [1, 2, 3]


async def test_a_failure_cancels_and_awaits_the_other_reads_before_it_is_raised() -> None:
    stopped: list[str] = []

    async def slow() -> None:
        try:
            await asyncio.sleep(30)
        finally:
            await asyncio.sleep(0)  # a cleanup that itself awaits, like returning a connection
            stopped.append("slow")

    async def failing() -> None:
        await asyncio.sleep(0.01)
        raise ValueError("bad page size")

    with pytest.raises(ValueError, match="bad page size"):
        await asyncio.wait_for(all_or_none(slow(), failing()), 5)
    assert stopped == ["slow"]
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []
