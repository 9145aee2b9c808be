"""The recall index of a project is built once however its callers fare:
one that gives up (its deadline passed; a project of 100,000 notes takes
seconds to index) leaves the build running for the next recall, which
finds the index instead of starting over (services/memory/notes/recall.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from services.memory.notes.lexical import LexicalIndex, note_terms, recall_weights
from services.memory.notes.models import Note
from services.memory.notes.recall import NoteIndexes, note_text
from services.shared.embeddings import HashingEmbedder, to_bytes


class FakeNotes:
    """What NoteIndexes reads of a notes repository: the revision (one per
    write, ``revision_now``), and the stored vector of a note indexed
    without one (accepted)."""

    revision_now = 1

    async def revision(self, project: str, scope: str) -> int:
        return self.revision_now

    async def store_embedding(self, note: Note, vector: bytes, embedder: str, dimension: int) -> int:
        return 1


class SlowNotes(FakeNotes):
    """A notes repository whose project read waits until released."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.reads = 0

    async def project_notes(self, project: str) -> Sequence[Note]:
        self.reads += 1
        await self.release.wait()
        return [Note(id="n1", author_user_id="u", project_id=project, title="Budget", body="the budget")]


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


class Projects(FakeNotes):
    """Notes repository of several projects of ``notes`` notes each, at revision 1."""

    def __init__(self, notes: int) -> None:
        self.notes = notes

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


class Written(FakeNotes):
    """A notes repository holding its notes, with a revision per write."""

    def __init__(self, notes: list[Note]) -> None:
        self.notes, self.reads = notes, 0

    async def project_notes(self, project: str) -> Sequence[Note]:
        self.reads += 1
        return sorted(sorted(self.notes, key=lambda n: n.id), key=lambda n: n.update_time, reverse=True)

    def insert(self, note: Note, embedder: HashingEmbedder) -> int:
        note.embedding = to_bytes(embedder.embed([note_text(note.title, note.body, [])])[0])
        note.embedder, note.embedding_dimension = embedder.name, embedder.dimension
        self.notes.append(note)
        self.revision_now += 1
        return self.revision_now


TEXTS = [
    ("Déploiements", "On ne déploie jamais le vendredi après midi."),
    ("Deploys", "Never deploy on a Friday afternoon."),
    ("Budget", "The quarterly budget is reviewed by the finance team."),
    ("Budget du trimestre", "Le budget trimestriel est revu par l'équipe finance."),
    ("Release checklist", "Every release needs a QA sign-off and a changelog."),
    ("Astreinte", "L'astreinte tourne chaque lundi entre les trois équipes."),
]
QUERIES = ["deploy friday", "déploiement vendredi", "budget finance", "astreinte lundi", "release QA"]


def note(n: int, title: str, body: str) -> Note:
    when = datetime(2026, 12, 1, tzinfo=UTC) + timedelta(minutes=n)
    return Note(
        id=f"n{n:02d}", author_user_id="u", project_id="p", title=title, body=body,
        content_hash=f"h{n}", create_time=when, update_time=when,
    )  # fmt: skip


async def test_a_note_written_here_joins_the_cached_index_as_a_rebuild_would_read_it() -> None:
    embedder = HashingEmbedder()
    repo = Written([note(n, *TEXTS[n % len(TEXTS)]) for n in range(12)])
    indexes = NoteIndexes(repo, embedder)  # type: ignore[arg-type]
    await indexes.get("p")
    for n, (title, body) in enumerate(TEXTS[:3], start=12):
        new = note(n, title + " (bis)", body + " Toujours.")
        indexes.added("p", new, repo.insert(new, embedder))
    extended = await indexes.get("p")
    assert repo.reads == 1 and extended.revision == 4 and extended.notes[0].id == "n14"
    rebuilt = await NoteIndexes(repo, embedder).get("p")  # type: ignore[arg-type]
    assert [n.id for n in extended.notes] == [n.id for n in rebuilt.notes] and repo.reads == 2
    assert extended.chars == rebuilt.chars == sum(len(n.title) + len(n.body) for n in repo.notes)
    assert extended.lexical.nbytes == rebuilt.lexical.nbytes
    for query in QUERIES:
        found = await indexes.recall("p", query, "", 5)
        expected = await NoteIndexes(repo, embedder).recall("p", query, "", 5)  # type: ignore[arg-type]
        assert found.notes and found.notes == expected.notes, query


async def test_a_note_after_an_unseen_write_leaves_the_index_to_be_rebuilt() -> None:
    embedder = HashingEmbedder()
    repo = Written([note(n, *TEXTS[n]) for n in range(4)])
    indexes = NoteIndexes(repo, embedder)  # type: ignore[arg-type]
    await indexes.get("p")
    repo.insert(note(4, *TEXTS[4]), embedder)  # another replica's write
    mine = note(5, *TEXTS[5])
    indexes.added("p", mine, repo.insert(mine, embedder))
    index = await indexes.get("p")
    assert repo.reads == 2 and index.revision == 3
    assert [n.id for n in index.notes] == ["n05", "n04", "n03", "n02", "n01", "n00"]


def test_a_document_put_first_scores_as_in_an_index_built_with_it_first() -> None:
    documents = [note_terms(title, body, []) for title, body in TEXTS]
    grown = LexicalIndex(documents[1:]).with_first(documents[0])
    built = LexicalIndex(documents)
    for query in QUERIES:
        weights = recall_weights(query, "")
        assert np.array_equal(grown.scores(weights), built.scores(weights)), query
    assert grown.size == built.size and grown.nbytes == built.nbytes
