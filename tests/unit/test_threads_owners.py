"""The in-process cache of threads' owners: bounded, least recently used out,
and a thread not found is read again next time (it may be created since)."""

from __future__ import annotations

from services.threads.owners import ThreadOwner, ThreadOwners


class Store:
    def __init__(self) -> None:
        self.threads: dict[str, ThreadOwner] = {}
        self.reads: list[str] = []

    async def load(self, thread_id: str) -> ThreadOwner | None:
        self.reads.append(thread_id)
        return self.threads.get(thread_id)

    def add(self, thread_id: str) -> ThreadOwner:
        owner = ThreadOwner(thread_id, "conversation", f"user-{thread_id}", None)
        self.threads[thread_id] = owner
        return owner


async def test_a_seen_thread_is_not_read_again() -> None:
    store = Store()
    a = store.add("a")
    owners = ThreadOwners(store.load)
    assert await owners.get("a") == a
    assert await owners.get("a") == a
    assert store.reads == ["a"]


async def test_a_missing_thread_is_read_again_and_found_once_created() -> None:
    store = Store()
    owners = ThreadOwners(store.load)
    assert await owners.get("later") is None
    later = store.add("later")
    assert await owners.get("later") == later
    assert store.reads == ["later", "later"] and len(owners) == 1


async def test_the_least_recently_used_owner_leaves_first() -> None:
    store = Store()
    for name in "abc":
        store.add(name)
    owners = ThreadOwners(store.load, size=2)
    await owners.get("a")
    await owners.get("b")
    await owners.get("a")  # "a" is now more recent than "b"
    await owners.get("c")  # evicts "b"
    assert len(owners) == 2
    store.reads.clear()
    await owners.get("a")
    await owners.get("c")
    assert store.reads == []
    await owners.get("b")
    assert store.reads == ["b"]
