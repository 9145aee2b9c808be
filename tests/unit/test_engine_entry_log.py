"""The engine keeps a conversation's earlier entries between runs and reads
only what was added since; what it returns is always what a full read
would have returned."""

from __future__ import annotations

from dataclasses import dataclass, field

from services.engine.entry_log import FULL_PAGE, NEW_ENTRIES_PAGE, EntryLog
from switchboard.threads.v1 import threads_pb2


@dataclass
class Threads:
    """A fake threads service: each user's threads, and every read made."""

    logs: dict[tuple[str, str], list[threads_pb2.Entry]] = field(default_factory=dict)
    reads: list[tuple[str, str, int, int]] = field(default_factory=list)

    def append(self, user: str, thread: str, *contents: str) -> None:
        log = self.logs.setdefault((user, thread), [])
        for content in contents:
            log.append(threads_pb2.Entry(sequence=len(log) + 1, content=content))

    async def read_after(self, user: str, thread: str, after: int, page_size: int) -> list[threads_pb2.Entry]:
        self.reads.append((user, thread, after, page_size))
        return [
            threads_pb2.Entry().FromString(e.SerializeToString())
            for e in self.logs[(user, thread)]
            if e.sequence > after
        ]


def contents(entries: list[threads_pb2.Entry]) -> list[str]:
    return [e.content for e in entries]


async def test_a_later_run_reads_only_the_entries_added_since() -> None:
    threads = Threads()
    log = EntryLog(threads.read_after, max_bytes=1 << 20)
    threads.append("alice", "c1", "hello", "hi there")
    assert contents(await log.after("alice", "c1", 0)) == ["hello", "hi there"]
    threads.append("alice", "c1", "and then?", "then this")
    assert contents(await log.after("alice", "c1", 0)) == ["hello", "hi there", "and then?", "then this"]
    assert threads.reads == [("alice", "c1", 0, FULL_PAGE), ("alice", "c1", 2, NEW_ENTRIES_PAGE)]


async def test_entries_the_summary_folded_are_left_out_and_dropped() -> None:
    threads = Threads()
    log = EntryLog(threads.read_after, max_bytes=1 << 20)
    threads.append("alice", "c1", "one", "two", "three", "four")
    await log.after("alice", "c1", 0)
    size_before = log.size
    threads.append("alice", "c1", "five")
    # The summary now holds the first three entries.
    assert contents(await log.after("alice", "c1", 3)) == ["four", "five"]
    assert threads.reads[-1] == ("alice", "c1", 4, NEW_ENTRIES_PAGE)
    assert log.size < size_before
    assert log.size == sum(e.ByteSize() for e in threads.logs[("alice", "c1")][3:])


async def test_a_summary_older_than_what_is_kept_reads_everything_again() -> None:
    threads = Threads()
    log = EntryLog(threads.read_after, max_bytes=1 << 20)
    threads.append("alice", "c1", "one", "two", "three")
    await log.after("alice", "c1", 2)
    assert contents(await log.after("alice", "c1", 0)) == ["one", "two", "three"]
    assert threads.reads[-1] == ("alice", "c1", 0, FULL_PAGE)


async def test_each_user_reads_with_their_own_rights() -> None:
    threads = Threads()
    log = EntryLog(threads.read_after, max_bytes=1 << 20)
    threads.append("alice", "shared", "alice's")
    threads.append("bob", "shared", "bob's")
    assert contents(await log.after("alice", "shared", 0)) == ["alice's"]
    assert contents(await log.after("bob", "shared", 0)) == ["bob's"]
    assert [read[:2] for read in threads.reads] == [("alice", "shared"), ("bob", "shared")]


async def test_the_least_recently_used_conversation_goes_first_past_the_budget() -> None:
    threads = Threads()
    entry_size = threads_pb2.Entry(sequence=1, content="x" * 100).ByteSize()
    log = EntryLog(threads.read_after, max_bytes=2 * entry_size)
    for thread in ("c1", "c2", "c3"):
        threads.append("alice", thread, "x" * 100)
        await log.after("alice", thread, 0)
    assert log.size <= 2 * entry_size
    threads.reads.clear()
    await log.after("alice", "c1", 0)  # evicted: read whole again
    await log.after("alice", "c3", 0)  # kept: only what is new
    assert threads.reads == [("alice", "c1", 0, FULL_PAGE), ("alice", "c3", 1, NEW_ENTRIES_PAGE)]


async def test_with_no_budget_every_run_reads_the_whole_history() -> None:
    threads = Threads()
    log = EntryLog(threads.read_after, max_bytes=0)
    threads.append("alice", "c1", "hello")
    await log.after("alice", "c1", 0)
    assert contents(await log.after("alice", "c1", 0)) == ["hello"]
    assert threads.reads == [("alice", "c1", 0, FULL_PAGE)] * 2
    assert log.size == 0


async def test_what_a_caller_does_with_the_list_does_not_change_what_is_kept() -> None:
    threads = Threads()
    log = EntryLog(threads.read_after, max_bytes=1 << 20)
    threads.append("alice", "c1", "hello")
    first = await log.after("alice", "c1", 0)
    first.clear()
    assert contents(await log.after("alice", "c1", 0)) == ["hello"]
