"""Data around the growth benchmark's runs (tests/bench/bench_growth.py),
written straight into the services' SQLite files while they run, as the
services' own writes would leave it: a conversation's earlier turns, a
project's notes with their vectors, a catalog of skills with theirs; then
the revision each service checks before trusting its cache is bumped."""

from __future__ import annotations

import datetime
import json
import random
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from services.threads.models import table_of
from tests.bench.bench_memory import synthetic_note
from tests.bench.bench_router import generated_skills
from tests.bench.bench_runs import MESSAGE, BenchError

USER = "local"  # the launcher's user without auth
ANSWER = "Paris is the capital of France; it has been since the tenth century, with a few interruptions."
SEED_CHUNK = 10_000
GENERATED_PREFIX = "bench-"  # generated_skills' names


@contextmanager
def database(data: Path, service: str) -> Iterator[sa.Connection]:
    """One transaction on a service's SQLite file, waiting out its writers."""
    path = data / f"{service}.db"
    if not path.exists():
        raise BenchError(f"no SQLite file {path}")
    engine = sa.create_engine(f"sqlite:///{path}", connect_args={"timeout": 30})
    try:
        with engine.begin() as db:
            yield db
    finally:
        engine.dispose()


def chunks(rows: Iterator[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == SEED_CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def seed_turns(data: Path, conversation: str, turns: int) -> None:
    """``turns`` earlier exchanges of a conversation, as chat runs write them
    (the user's entry, the answer), with the thread's last sequence set."""
    from services.threads.models import Entry, Thread

    start = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=2 * turns)

    def rows() -> Iterator[dict[str, Any]]:
        for sequence in range(1, 2 * turns + 1):
            turn, answer = divmod(sequence - 1, 2)
            run_id = str(uuid.UUID(int=(0x6E0 << 64) + turn))
            yield {
                "id": str(uuid.uuid4()),
                "thread_id": conversation,
                "sequence": sequence,
                "requester": USER,
                "target": "personal",
                "correlation_id": run_id,
                "role": 2 if answer else 1,  # ROLE_ASSISTANT, ROLE_USER
                "source": "engine" if answer else "user",
                "run_id": run_id,
                "content": ANSWER if answer else f"{MESSAGE} ({turn})",
                "tool_calls_json": "[]",
                "tool_call_id": "",
                "request_id": f"{run_id}:{'assistant' if answer else 'user'}",
                "request_index": 0,
                "create_time": start + datetime.timedelta(seconds=sequence),
            }

    with database(data, "threads") as db:
        for chunk in chunks(rows()):
            db.execute(sa.insert(table_of(Entry)), chunk)
        threads = table_of(Thread)
        db.execute(sa.update(threads).where(threads.c.id == conversation), {"last_sequence": 2 * turns})


def seed_notes(data: Path, project: str, count: int, embedder_name: str) -> None:
    """``count`` notes of a project with the embedder's vectors, and the
    project's notes revision bumped (its recall index is rebuilt)."""
    from services.memory.notes.domain import content_hash
    from services.memory.notes.models import Note
    from services.memory.notes.recall import note_text
    from services.shared.embeddings import load_embedder, to_bytes

    embedder = load_embedder(embedder_name)
    rng = random.Random(11)
    now = datetime.datetime.now(datetime.UTC)
    with database(data, "memory") as db:
        for first in range(0, count, SEED_CHUNK):
            notes = [synthetic_note(rng, i) for i in range(first, min(count, first + SEED_CHUNK))]
            vectors = embedder.embed([note_text(t, b, tags) for t, b, tags in notes])
            rows = [
                {
                    "id": str(uuid.uuid4()),
                    "author_user_id": USER,
                    "project_id": project,
                    "kind": 4,
                    "title": title,
                    "body": body,
                    "tags_json": json.dumps(tags),
                    "author_agent_id": "",
                    "request_id": None,
                    "content_hash": content_hash(title, body),
                    "embedding": to_bytes(vector),
                    "embedder": embedder.name,
                    "embedding_dimension": embedder.dimension,
                    "source": None,
                    "source_hash": "",
                    "create_time": now,
                    "update_time": now,
                }
                for (title, body, tags), vector in zip(notes, vectors, strict=True)
            ]
            db.execute(sa.insert(table_of(Note)), rows)
        bump = sa.text(
            "INSERT INTO memory_revisions (project_id, scope, revision) VALUES (:project, 'notes', 1) "
            "ON CONFLICT (project_id, scope) DO UPDATE SET revision = revision + 1"
        )
        db.execute(bump, {"project": project})


def seed_skills(data: Path, total: int, embedder_name: str) -> int:
    """Generated skills up to ``total`` in the catalog, with their vectors
    stored as the router stores them, and the catalog revision bumped.
    Returns how many were added."""
    from services.router.models import Skill, SkillVector
    from services.router.skill_router import embedding_text
    from services.shared.embeddings import load_embedder, to_bytes
    from services.shared.embeddings import text_sha256 as text_hash

    embedder = load_embedder(embedder_name)
    now = datetime.datetime.now(datetime.UTC)
    with database(data, "router") as db:
        present = db.execute(sa.select(sa.func.count()).select_from(table_of(Skill))).scalar_one()
        skills = generated_skills(max(0, total - present))
        for first in range(0, len(skills), SEED_CHUNK):
            part = skills[first : first + SEED_CHUNK]
            ids = [str(uuid.uuid4()) for _ in part]
            texts = [embedding_text(s.name, s.description) for s in part]
            db.execute(
                sa.insert(table_of(Skill)),
                [
                    {
                        "id": i,
                        "name": s.name,
                        "description": s.description,
                        "body": s.body,
                        "builtin": False,
                        "auto_use": s.auto_use,
                        "create_request_id": None,
                        "create_time": now,
                        "update_time": now,
                    }
                    for i, s in zip(ids, part, strict=True)
                ],
            )
            db.execute(
                sa.insert(table_of(SkillVector)),
                [
                    {
                        "skill_id": i,
                        "embedder": embedder.name,
                        "dimension": embedder.dimension,
                        "text_hash": text_hash(text),
                        "vector": to_bytes(vector),
                        "update_time": now,
                    }
                    for i, text, vector in zip(ids, texts, embedder.embed(texts), strict=True)
                ],
            )
        db.execute(sa.text("UPDATE catalog_revision SET revision = revision + 1"))
    return len(skills)


def unseed_skills(data: Path) -> None:
    """The generated skills out of the catalog again, the revision bumped."""
    with database(data, "router") as db:
        generated = f"SELECT id FROM skills WHERE name LIKE '{GENERATED_PREFIX}%'"
        db.execute(sa.text(f"DELETE FROM skill_vectors WHERE skill_id IN ({generated})"))
        db.execute(sa.text(f"DELETE FROM skills WHERE id IN ({generated})"))
        db.execute(sa.text("UPDATE catalog_revision SET revision = revision + 1"))


def catalog_size(data: Path) -> int:
    with database(data, "router") as db:
        return int(db.execute(sa.text("SELECT count(*) FROM skills")).scalar_one())
