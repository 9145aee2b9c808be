"""Gauges of the gateway process itself, read when /metrics is scraped, for
watching it under load (tests/e2e/test_sse_load.py, the SSE fan-out
benchmark): ``switchboard_asyncio_tasks``, the tasks not yet done on the
gateway's event loop. Memory and file descriptors come from
prometheus_client's process collector (``process_resident_memory_bytes``,
``process_open_fds``), open SSE streams from ``switchboard_sse_clients``
(gateway/streams.py)."""

from __future__ import annotations

import asyncio

from prometheus_client import Gauge

ASYNCIO_TASKS = Gauge("switchboard_asyncio_tasks", "Asyncio tasks not yet done on the gateway's event loop.")


def watch_event_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Counts ``loop``'s tasks at every scrape. The /metrics handler is a
    plain function, so it runs on a worker thread: ``asyncio.all_tasks(loop)``
    is the one asyncio call meant for that (it copies the task registry,
    retrying if the loop changes it meanwhile)."""
    ASYNCIO_TASKS.set_function(lambda: len(asyncio.all_tasks(loop)))
