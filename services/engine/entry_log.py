"""The earlier entries of recent conversations, kept between runs.

A chat run sends the model every turn after the conversation's summary, so
without this each run of a long conversation read its whole unfolded history
from the threads service again: hundreds of entries per message, a cost that
grew with every turn. A conversation's entries never change once written
(an append-only log: only retention deletes them, with their archived
conversation), and the threads service commits a thread's entries in
sequence order, so what a run read stays true: the next run of the same user
on the same conversation asks only for the entries after the last one it has.
That read still goes through the threads service with the user's rights, so
a user who lost access to a conversation fails there as before.

Bounded by the entries' encoded size, least recently used conversation first.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from switchboard.threads.v1 import threads_pb2

# Reads the thread's entries with a sequence above ``after_sequence``, oldest
# first, in pages of ``page_size`` (Collaborators.entries_after).
ReadAfter = Callable[[str, str, int, int], Awaitable[list[threads_pb2.Entry]]]

# A run usually adds two entries (the message and the answer), a few more
# with tool calls: the read of what is new asks for a small page first.
NEW_ENTRIES_PAGE = 16
FULL_PAGE = 200


@dataclass
class _Log:
    # Every entry of the thread with a sequence above ``floor``, oldest first.
    floor: int
    entries: list[threads_pb2.Entry]
    size: int

    @property
    def last(self) -> int:
        return self.entries[-1].sequence if self.entries else self.floor


class EntryLog:
    def __init__(self, read_after: ReadAfter, max_bytes: int) -> None:
        self._read_after = read_after
        self._max_bytes = max_bytes
        self._logs: OrderedDict[tuple[str, str], _Log] = OrderedDict()
        self._size = 0

    @property
    def size(self) -> int:
        """The encoded size of the entries kept, in bytes."""
        return self._size

    async def after(self, user: str, thread_id: str, after_sequence: int) -> list[threads_pb2.Entry]:
        """The thread's entries with a sequence above ``after_sequence``, oldest
        first, as ``user`` reads them."""
        key = (user, thread_id)
        log = self._logs.get(key)
        if log is None or log.floor > after_sequence:
            entries = await self._read_after(user, thread_id, after_sequence, FULL_PAGE)
            size = sum(e.ByteSize() for e in entries)
        else:
            start = max(after_sequence, log.last)
            new = await self._read_after(user, thread_id, start, NEW_ENTRIES_PAGE)
            # The entries the summary has folded since are dropped (a prefix:
            # the log is in sequence order).
            kept_from = bisect.bisect_right(log.entries, after_sequence, key=lambda e: e.sequence)
            folded = log.entries[:kept_from]
            entries = log.entries[kept_from:] + new
            size = log.size - sum(e.ByteSize() for e in folded) + sum(e.ByteSize() for e in new)
        self._keep(key, _Log(after_sequence, entries, size))
        return list(entries)

    def _keep(self, key: tuple[str, str], log: _Log) -> None:
        old = self._logs.pop(key, None)
        if old is not None:
            self._size -= old.size
        if log.size > self._max_bytes:
            return  # larger than the whole budget: read again next time
        self._logs[key] = log
        self._size += log.size
        while self._size > self._max_bytes:
            _, evicted = self._logs.popitem(last=False)
            self._size -= evicted.size
