"""``python -m services.memory reembed``: gives every note a vector of the
configured embedder (``SWITCHBOARD_MEMORY_EMBEDDER``), in batches, with
progress, resumable. The service also runs it in the background at start-up
(``reembed_at_startup``); meanwhile recall of a project that still has notes
of the former embedder is lexical only (services/memory/recall.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from services.memory.notes.lexical import tags_of
from services.memory.notes.recall import note_text
from services.memory.notes.repository import NotesRepository
from services.memory.settings import MemorySettings
from services.shared.embeddings import Embedder, embed, to_bytes
from services.shared.rebuild import BATCH, Progress, ProgressLine, command


async def reembed(repo: NotesRepository, embedder: Embedder, progress: Progress, batch: int = BATCH) -> int:
    """Embeds every note without a current vector; returns how many it embedded."""
    name, dimension = embedder.name, embedder.dimension
    done, total = await repo.embedding_progress(name, dimension)
    progress(done, total)
    embedded, after = 0, ""
    while notes := await repo.stale_notes(name, dimension, after, batch):
        vectors = await embed(embedder, [note_text(n.title, n.body, tags_of(n)) for n in notes])
        for note, vector in zip(notes, vectors, strict=True):
            # A note edited meanwhile got its new vector from its writer.
            embedded += await repo.store_embedding(note, to_bytes(vector), name, dimension)
        after = notes[-1].id
        done, total = await repo.embedding_progress(name, dimension)
        progress(done, total)
    return embedded


async def _run(settings: MemorySettings, migrations: Path) -> int:
    from services.shared.bootstrap import open_database
    from services.shared.db import session_factory
    from services.shared.embeddings import load_embedder

    embedder = await asyncio.to_thread(load_embedder, settings.embedder.value, settings.embedder_model_dir)
    engine = await open_database(settings, migrations)
    try:
        repo = NotesRepository(session_factory(engine))
        return await reembed(repo, embedder, ProgressLine(f"notes, {embedder.name}"))
    finally:
        await engine.dispose()


def main(argv: Sequence[str], migrations: Path) -> int:
    return command(
        argv, "python -m services.memory reembed", __doc__, lambda: _run(MemorySettings(), migrations)
    )
