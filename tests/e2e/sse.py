"""A small Server-Sent Events reader for tests (the wire format, parsed by hand
so the tests see exactly what a browser would)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True)
class SseEvent:
    id: str | None
    event: str
    data: dict[str, Any]


def read_events(response: httpx.Response) -> Iterator[SseEvent]:
    event_id: str | None = None
    event = "message"
    data: list[str] = []
    for line in response.iter_lines():
        if line == "":
            if data:
                yield SseEvent(event_id, event, json.loads("\n".join(data)))
            event_id, event, data = None, "message", []
        elif line.startswith(":"):
            continue  # keep-alive comment
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "id":
                event_id = value
            elif field == "event":
                event = value
            elif field == "data":
                data.append(value)
