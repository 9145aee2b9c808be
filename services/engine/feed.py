"""Event feeds of the runs live in this process: subscribers get every event
as it is published, from any sequence. The database keeps the same events
for resumption by other processes; the feed only spares them a poll.

Followers share each event's StreamedEvent, so its JSON is made once for all
the streams that send it (and never for an event no stream sends)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from functools import cached_property

from services.shared.api_json import event_json
from switchboard.engine.v1 import engine_pb2


class StreamedEvent:
    """A run event as the engine's streams send it: the proto, and its JSON
    as the gateway's SSE ``data:`` carries it, made on first use."""

    def __init__(self, event: engine_pb2.RunEvent) -> None:
        self.event = event

    @cached_property
    def json(self) -> str:
        return event_json(self.event)


class RunFeed:
    def __init__(self) -> None:
        self._events: list[StreamedEvent] = []
        self._closed = False
        self._changed = asyncio.Condition()

    async def publish(self, event: engine_pb2.RunEvent, *, last: bool = False) -> None:
        async with self._changed:
            self._events.append(StreamedEvent(event))
            self._closed = self._closed or last
            self._changed.notify_all()

    async def close(self) -> None:
        """Ends every follower's stream without a further event (the run's
        end could not be recorded; they resume from the database later)."""
        async with self._changed:
            self._closed = True
            self._changed.notify_all()

    async def follow(self, after: int) -> AsyncIterator[StreamedEvent]:
        """Events with sequence > after, then new ones until the last."""
        index = 0

        def ready() -> bool:
            return index < len(self._events) or self._closed

        while True:
            async with self._changed:
                await self._changed.wait_for(ready)
                batch = self._events[index:]
                closed = self._closed
            index += len(batch)
            for streamed in batch:
                if streamed.event.sequence > after:
                    yield streamed
            if closed and index >= len(self._events):
                return
