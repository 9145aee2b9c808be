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
