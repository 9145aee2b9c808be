"""The recall index of a project is built once however its callers fare:
one that gives up (its deadline passed; a project of 100,000 notes takes
seconds to index) leaves the build running for the next recall, which
finds the index instead of starting over (services/memory/notes/recall.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from services.memory.notes.models import Note
from services.memory.notes.recall import NoteIndexes
from services.shared.embeddings import HashingEmbedder


class SlowNotes:
    """A notes repository whose project read waits until released."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.reads = 0
        self.revision_now = 1

    async def revision(self, project: str, scope: str) -> int:
        return self.revision_now

    async def project_notes(self, project: str) -> Sequence[Note]:
        self.reads += 1
        await self.release.wait()
        return [Note(id="n1", author_user_id="u", project_id=project, title="Budget", body="the budget")]

    async def store_embedding(self, note: Note, vector: bytes, embedder: str, dimension: int) -> int:
        return 1  # a note without a vector gets one when indexed


async def test_a_caller_that_gives_up_leaves_the_build_to_the_next() -> None:
    repo = SlowNotes()
    indexes = NoteIndexes(repo, HashingEmbedder())  # type: ignore[arg-type]
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(indexes.get("p"), 0.05)
    waiting = asyncio.create_task(indexes.get("p"))  # joins the build under way
    await asyncio.sleep(0.01)
    repo.release.set()
    index = await waiting
    assert [n.id for n in index.notes] == ["n1"] and repo.reads == 1
    assert await indexes.get("p") is index and repo.reads == 1


async def test_a_build_begun_before_a_write_is_not_taken_for_after_it() -> None:
    repo = SlowNotes()
    indexes = NoteIndexes(repo, HashingEmbedder())  # type: ignore[arg-type]
    first = asyncio.create_task(indexes.get("p"))
    await asyncio.sleep(0.01)
    repo.revision_now = 2  # a note written while the first build reads
    second = asyncio.create_task(indexes.get("p"))
    await asyncio.sleep(0.01)
    repo.release.set()
    assert (await first).revision == 1
    assert (await second).revision == 2 and repo.reads == 2


class Projects:
    """Notes repository of several projects of ``notes`` notes each, at revision 1."""

    def __init__(self, notes: int) -> None:
        self.notes = notes

    async def revision(self, project: str, scope: str) -> int:
        return 1

    async def project_notes(self, project: str) -> Sequence[Note]:
        return [
            Note(
                id=f"{project}-{i}",
                author_user_id="u",
                project_id=project,
                title=f"Note {i}",
                body="le budget " * 20,
            )
            for i in range(self.notes)
        ]

    async def store_embedding(self, note: Note, vector: bytes, embedder: str, dimension: int) -> int:
        return 1


async def test_the_cached_indexes_stay_within_their_memory_budget_least_recently_used_first() -> None:
    one = await NoteIndexes(Projects(20), HashingEmbedder()).get("p")  # type: ignore[arg-type]
    assert one.size_bytes > one.vectors.nbytes > 0
    # Room for two projects' indexes, not three.
    indexes = NoteIndexes(Projects(20), HashingEmbedder(), cache_bytes=int(one.size_bytes * 2.5))  # type: ignore[arg-type]
    for project in ("a", "b", "c"):
        await indexes.get(project)
    assert indexes.cached_projects() == ["b", "c"]
    await indexes.get("b")  # used: now the most recent
    await indexes.get("d")
    assert indexes.cached_projects() == ["b", "d"]
    assert indexes.cached_bytes <= indexes.cache_bytes


async def test_an_index_bigger_than_the_budget_is_used_but_not_kept_beside_others() -> None:
    indexes = NoteIndexes(Projects(20), HashingEmbedder(), cache_bytes=1)  # type: ignore[arg-type]
    first = await indexes.get("a")
    assert [n.id for n in first.notes][:1] == ["a-0"]
    second = await indexes.get("b")
    assert len(second.notes) == 20 and indexes.cached_projects() == ["b"]
