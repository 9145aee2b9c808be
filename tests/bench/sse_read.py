"""Reading one run's SSE stream to its end, timing it: the reader both the
run benchmark (tests/bench/bench_runs.py) and the side-by-side benchmark
against the peer (tests/bench/bench_peer.py) use, so that "first event" and
"end" mean the same thing for every server measured.

An event is a complete block of ``field: value`` lines ended by a blank
line (the SSE spec); comment lines (``: ping``) are not events, so a
keep-alive ping never counts as the first event."""

from __future__ import annotations

import time
from collections.abc import AsyncIterable, Callable
from dataclasses import dataclass


class StreamError(RuntimeError):
    """The stream said the run failed, or ended before its final event."""


@dataclass(frozen=True)
class StreamTimes:
    events: int
    first: float  # clock() when the first event was complete
    end: float  # clock() at the final event, or when the stream closed if no final event is named
    kinds: tuple[str, ...]  # the events' names in order ("message" for a block without ``event:``)


async def read_sse(
    lines: AsyncIterable[str],
    final: str | None = None,
    failures: frozenset[str] = frozenset({"error"}),
    clock: Callable[[], float] = time.perf_counter,
) -> StreamTimes:
    """Reads ``lines`` (one SSE line each, without its newline) to the end of
    the stream. With ``final``, the end is the time that event was complete,
    and a stream closing without it is a StreamError; without, the end is
    when the stream closed. An event named in ``failures`` is a StreamError
    carrying its data."""
    first = end = 0.0
    kind, data, fields = "", [], False
    kinds: list[str] = []
    async for line in lines:
        if line == "":
            if not fields:
                continue  # blank lines between blocks, or after a comment
            now = clock()
            first = first or now
            name = kind or "message"
            kinds.append(name)
            if name in failures:
                raise StreamError(f"the stream sent an {name} event: {' '.join(data)[:500]}")
            if name == final:
                end = now
            kind, data, fields = "", [], False
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            fields = True
            if field == "event":
                kind = value
            elif field == "data":
                data.append(value)
    if final is None:
        end = clock()
    elif not end:
        raise StreamError(
            f"the stream ended without a {final!r} event (events: {', '.join(kinds) or 'none'})"
        )
    if not kinds:
        raise StreamError("the stream ended without any event")
    return StreamTimes(len(kinds), first, end, tuple(kinds))
