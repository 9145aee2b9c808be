"""Hybrid recall of durable notes: BM25 and embedding candidates fused by
reciprocal rank fusion (services.shared.search.rrf_fuse, k=60).

Each project gets an in-memory index (the notes, their BM25 inverted
index, their embedding matrix) for speed, but the database stays the source of
truth: before each use the project's notes revision (one primary-key read) is
compared with the index's, and the index is rebuilt when another writer, on
this replica or another, changed the notes.

Vectors of another embedder (or dimension) than the configured one are never
compared with the query's. A project with only a few such notes gets them
embedded when its index is built; a project with more (the configured
embedder changed) is searched on its lexical half alone until the
re-embedding (services/memory/reembed.py) reaches it
(``ProjectIndex.lexical_only``, logged)."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

from services.memory.notes.lexical import (
    PERSONA_WEIGHT,
    LexicalIndex,
    note_terms,
    rank,
    recall_weights,
    tags_of,
)
from services.memory.notes.models import Note
from services.memory.notes.repository import NotesRepository
from services.memory.revisions import NOTES
from services.shared.embeddings import (
    Embedder,
    EmbedderName,
    TextEmbedding,
    Vectors,
    embed,
    from_bytes,
    to_bytes,
)
from services.shared.search import VectorIndex, rrf_fuse, rrf_max

_log = logging.getLogger(__name__)

# Below this cosine a note is not an embedding candidate, so a query about
# nothing in the project recalls nothing. Measured on the labelled set of
# tests/fixtures/memory/recall_set.json (docs/memory.md, "Recall"): with USE,
# unrelated queries (a recipe, a football score, "bonjour", emoji, Chinese)
# reach at most 0.135 against its notes; 10% of the relevant pairs are
# below 0.2.
MIN_COSINE = {EmbedderName.USE_MULTILINGUAL.value: 0.15, EmbedderName.HASHING.value: 0.15}
# A project with at most this many notes without a current vector gets them
# embedded on the spot (about 10 ms each); more wait for the re-embedding.
INLINE_EMBED_LIMIT = 32
# Each ranking contributes its best CANDIDATE_FACTOR * limit notes (at least
# MIN_CANDIDATES) to the fusion.
CANDIDATE_FACTOR = 4
MIN_CANDIDATES = 40
# Indexes kept per process, least recently used dropped first: at most this
# many projects, and at most the memory budget (the memory service's
# recall_cache_mb setting), whichever comes first.
MAX_CACHED_PROJECTS = 256
DEFAULT_CACHE_BYTES = 1024 * 2**20
# What one note's row costs in an index besides its texts, its stored vector
# and its row of the matrix (the ORM object, its fields, the hash map entry):
# 2,520 bytes a note by tracemalloc over a 10,000-note build, where the whole
# estimate came within 2 % of what the build allocated.
NOTE_OVERHEAD_BYTES = 2500


class Mode(IntEnum):
    """RecallMode of memory.proto."""

    HYBRID = 1
    LEXICAL = 2
    EMBEDDING = 3


@dataclass(frozen=True)
class Recalled:
    note: Note
    score: float
    lexical_rank: int  # 1-based; 0 = not a lexical candidate
    embedding_rank: int


@dataclass(frozen=True)
class Recall:
    notes: list[Recalled]
    # The query's own embedding (no persona mixed in) when the embedding half
    # computed one: a chat run's router reuses it instead of embedding the
    # request again.
    query_embedding: TextEmbedding | None = None


def note_text(title: str, body: str, tags: Sequence[str]) -> str:
    """What a note's embedding is computed from, tags included (on the
    labelled set they lifted MiniLM's recall@5 from 0.58 to 0.71)."""
    return "\n".join([title, body, " ".join(tags)]).strip()


@dataclass
class ProjectIndex:
    revision: int
    embedder: str
    notes: list[Note]
    lexical: LexicalIndex
    vectors: VectorIndex[int]
    by_hash: dict[str, Note] = field(default_factory=dict)
    # Some notes have no vector of the configured embedder yet: the
    # embedding half is skipped rather than compare vectors of two embedders.
    lexical_only: bool = False
    # What the notes hold (titles and bodies, in characters): the project's
    # quota is checked against it, not by summing every row at each write.
    chars: int = 0

    def chars_without(self, note_id: str) -> int:
        """``chars`` less what note ``note_id`` holds (a note being rewritten)."""
        held = next((len(n.title) + len(n.body) for n in self.notes if n.id == note_id), 0)
        return self.chars - held

    def with_newest(self, note: Note, revision: int) -> ProjectIndex:
        """This index with ``note`` first, as a build at ``revision`` reads
        it (newest first), without reading the others again."""
        row = from_bytes(note.embedding or b"").reshape(1, -1)
        return ProjectIndex(
            revision=revision,
            embedder=self.embedder,
            notes=[note, *self.notes],
            lexical=self.lexical.with_first(note_terms(note.title, note.body, tags_of(note))),
            vectors=VectorIndex(list(range(len(self.notes) + 1)), np.vstack((row, self.vectors.matrix))),
            by_hash={**self.by_hash, note.content_hash: note},
            chars=self.chars + len(note.title) + len(note.body),
        )

    @functools.cached_property
    def size_bytes(self) -> int:
        """About what the index holds in memory: the matrix, the postings, and
        each note's row with its texts and stored vector."""
        rows = sum(len(n.title) + len(n.body) + len(n.embedding or b"") for n in self.notes)
        return self.vectors.nbytes + self.lexical.nbytes + rows + NOTE_OVERHEAD_BYTES * len(self.notes)


def is_current(note: Note, embedder: str, dimension: int) -> bool:
    """Whether the note's stored vector is ``embedder``'s at ``dimension``."""
    return bool(note.embedding) and note.embedder == embedder and note.embedding_dimension == dimension


class NoteIndexes:
    """The per-project indexes of one process, checked against the
    database's revision before every use."""

    def __init__(
        self,
        repository: NotesRepository,
        embedder: Embedder,
        min_cosine: float | None = None,
        inline_embed_limit: int = INLINE_EMBED_LIMIT,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        self._repo = repository
        self.embedder = embedder
        self.inline_embed_limit = inline_embed_limit
        self.cache_bytes = cache_bytes
        self.min_cosine = MIN_COSINE.get(embedder.name, 0.0) if min_cosine is None else min_cosine
        self._indexes: OrderedDict[str, ProjectIndex] = OrderedDict()
        # The build in progress of each project: one at a time, shared by
        # every caller, and never cancelled with one (see get).
        self._building: dict[str, asyncio.Task[ProjectIndex]] = {}
        # Projects already reported lexical only: once each, not at every recall.
        self._reported: set[str] = set()

    async def get(self, project: str) -> ProjectIndex:
        key = project
        revision = await self._repo.revision(project, NOTES)
        cached = self._indexes.get(key)
        # A lexical-only index is rebuilt at each use: the re-embedding bumps
        # no revision, and its vectors must be used as soon as they are there.
        if cached is not None and cached.revision == revision and not cached.lexical_only:
            self._indexes.move_to_end(key)
            return cached
        # One rebuild per project at a time; the others wait and reuse it. A
        # caller that gives up (its deadline passed: a project of 100,000
        # notes takes seconds) leaves the build running, so that the next
        # recall finds the index instead of starting it all over again.
        building = self._building.get(key)
        if building is None:
            building = asyncio.get_running_loop().create_task(self._build_and_keep(key))
            self._building[key] = building
            building.add_done_callback(lambda done: self._built(key, done))
        index = await asyncio.shield(building)
        if index.revision < revision:  # begun before the write this caller saw
            return await self.get(project)
        return index

    def _built(self, key: str, done: asyncio.Task[ProjectIndex]) -> None:
        if self._building.get(key) is done:
            del self._building[key]
        if not done.cancelled() and done.exception() is not None:
            # Said by the callers that waited; without one, said here.
            _log.debug("recall index of project %r failed", key, exc_info=done.exception())

    def added(self, project: str, note: Note, revision: int) -> None:
        """``note`` was just inserted here, by the write that took the
        project's notes to ``revision``. An index cached at the revision
        before it lacks that note alone: it gains it, instead of the next use
        reading every note again (a project import creates notes one after
        the other, each checked against the index). Any other cached index
        is left to the revision check."""
        cached = self._indexes.get(project)
        if cached is None or cached.revision != revision - 1 or cached.lexical_only:
            return
        if not is_current(note, self.embedder.name, self.embedder.dimension):
            return
        self._keep(project, cached.with_newest(note, revision))

    async def _build_and_keep(self, project: str) -> ProjectIndex:
        index = await self._build(project)
        cached = self._indexes.get(project)
        # A note added while this build read may have made a newer index.
        if cached is None or cached.revision <= index.revision:
            self._keep(project, index)
        return index

    def _keep(self, project: str, index: ProjectIndex) -> None:
        self._indexes[project] = index
        self._indexes.move_to_end(project)
        # The index just kept stays even alone over the budget: its caller uses it.
        while len(self._indexes) > 1 and (
            len(self._indexes) > MAX_CACHED_PROJECTS or self.cached_bytes > self.cache_bytes
        ):
            self._indexes.popitem(last=False)

    @property
    def cached_bytes(self) -> int:
        """What the cached indexes hold, about (ProjectIndex.size_bytes)."""
        return sum(index.size_bytes for index in self._indexes.values())

    def cached_projects(self) -> list[str]:
        """The projects whose index is cached, least recently used first."""
        return list(self._indexes)

    async def _build(self, project: str) -> ProjectIndex:
        # The revision is read before the rows: a write that lands in between
        # makes the index look stale next time (a spare rebuild), never fresh.
        revision = await self._repo.revision(project, NOTES)
        notes = list(await self._repo.project_notes(project))
        name, dimension = self.embedder.name, self.embedder.dimension
        missing = [n for n in notes if not is_current(n, name, dimension)]
        if missing and len(missing) <= self.inline_embed_limit:
            vectors = await embed(self.embedder, [note_text(n.title, n.body, tags_of(n)) for n in missing])
            for n, vector in zip(missing, vectors, strict=True):
                n.embedding, n.embedder, n.embedding_dimension = to_bytes(vector), name, dimension
                await self._repo.store_embedding(n, n.embedding, name, dimension)
            missing = []
        if missing and project not in self._reported:
            self._reported.add(project)
            _log.warning(
                "recall of project %r is lexical only: %d of %d notes have no %s vector yet "
                "(python -m services.memory reembed)",
                project,
                len(missing),
                len(notes),
                name,
            )
        current = notes if not missing else []
        matrix = (
            np.stack([from_bytes(n.embedding or b"") for n in current])
            if current
            else np.zeros((0, dimension), dtype=np.float32)
        )
        return ProjectIndex(
            revision=revision,
            embedder=name,
            notes=notes,
            lexical=LexicalIndex([note_terms(n.title, n.body, tags_of(n)) for n in notes]),
            vectors=VectorIndex(list(range(len(current))), matrix),
            by_hash={n.content_hash: n for n in notes},
            lexical_only=bool(missing),
            chars=sum(len(n.title) + len(n.body) for n in notes),
        )

    @functools.lru_cache(maxsize=256)  # noqa: B019 - one NoteIndexes per server; personas repeat
    def _persona_vector(self, persona: str) -> Vectors:
        vector: Vectors = self.embedder.embed([persona])[0]
        return vector

    async def query_vector(self, query: str, persona: str) -> tuple[Vectors | None, TextEmbedding | None]:
        """The query's embedding plus PERSONA_WEIGHT times the persona's,
        normalised (None when both are blank), and the query's embedding
        alone (None when it is blank)."""
        parts: list[Vectors] = []
        own = None
        if query.strip():
            vector = (await embed(self.embedder, [query]))[0]
            own = TextEmbedding.of(self.embedder, query, vector)
            parts.append(vector)
        if persona.strip():
            vector = (
                await asyncio.to_thread(self._persona_vector, persona)
                if self.embedder.blocking
                else self._persona_vector(persona)
            )
            parts.append(PERSONA_WEIGHT * vector if parts else vector)
        if not parts:
            return None, own
        total = np.sum(parts, axis=0)
        norm = float(np.linalg.norm(total))
        return ((total / norm).astype(np.float32) if norm else None), own

    async def recall(
        self, project: str, query: str, persona: str, limit: int, mode: Mode = Mode.HYBRID
    ) -> Recall:
        # Nothing to look for (no term of 2 characters or more): nothing recalled.
        weights = recall_weights(query, persona)
        if not weights:
            return Recall([])
        index = await self.get(project)
        if not index.notes:
            return Recall([])
        depth = max(CANDIDATE_FACTOR * limit, MIN_CANDIDATES)
        if index.lexical_only:  # no vector to compare with: the lexical half alone
            mode = Mode.LEXICAL
        rankings: list[list[int]] = []
        lexical: list[int] = []
        semantic: list[int] = []
        own: TextEmbedding | None = None
        if mode in (Mode.HYBRID, Mode.LEXICAL):
            scores = index.lexical.scores(weights)
            positive = np.flatnonzero(scores > 0.0)
            if len(positive) > depth:  # only the best ``depth`` are sorted
                positive = positive[np.argpartition(-scores[positive], depth - 1)[:depth]]
            lexical = [int(i) for i in positive[np.argsort(-scores[positive], kind="stable")]]
            rankings.append(lexical)
        if mode in (Mode.HYBRID, Mode.EMBEDDING):
            vector, own = await self.query_vector(query, persona)
            if vector is not None:
                found = index.vectors.search(vector, depth)
                semantic = [position for position, cosine in found if cosine >= self.min_cosine]
            rankings.append(semantic)
        fused = rrf_fuse(rankings)
        top = rrf_max(len(rankings))
        lexical_rank = {position: rank_ for rank_, position in enumerate(lexical, start=1)}
        semantic_rank = {position: rank_ for rank_, position in enumerate(semantic, start=1)}
        position_of = {id(index.notes[p]): p for p in fused}
        ordered = rank(((index.notes[p], score / top) for p, score in fused.items()), limit)
        recalled = [
            Recalled(
                note=note,
                score=score,
                lexical_rank=lexical_rank.get(position_of[id(note)], 0),
                embedding_rank=semantic_rank.get(position_of[id(note)], 0),
            )
            for note, score in ordered
        ]
        return Recall(recalled, own)
