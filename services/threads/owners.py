"""Who a thread belongs to, cached in the process. A thread's kind, its user
(a conversation) and its agent (an agent thread) are set when it is created
and never change, so an ownership check needs no read once the thread has
been seen. Only these facts are cached: whether a conversation is archived,
its title and its sequence are always read. The one deletion, retention's
prune of long-archived conversations, cannot make a cached owner wrong: ids
are never reused, so another user still gets NOT_FOUND, and an append still
needs the thread's row (its UPDATE checks it)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

DEFAULT_SIZE = 10_000


@dataclass(frozen=True, slots=True)
class ThreadOwner:
    id: str
    kind: str  # "conversation" | "agent"
    user_id: str | None
    agent_id: str | None


class ThreadOwners:
    """A bounded LRU over ``load`` (thread id -> owner, None when no such
    thread). A miss is not remembered: the thread may be created later."""

    def __init__(
        self, load: Callable[[str], Awaitable[ThreadOwner | None]], size: int = DEFAULT_SIZE
    ) -> None:
        self._load = load
        self._size = size
        self._owners: OrderedDict[str, ThreadOwner] = OrderedDict()

    async def get(self, thread_id: str) -> ThreadOwner | None:
        owner = self._owners.get(thread_id)
        if owner is not None:
            self._owners.move_to_end(thread_id)
            return owner
        owner = await self._load(thread_id)
        if owner is not None:
            self._owners[thread_id] = owner
            if len(self._owners) > self._size:
                self._owners.popitem(last=False)
        return owner

    def __len__(self) -> int:
        return len(self._owners)
