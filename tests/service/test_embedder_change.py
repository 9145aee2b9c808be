"""Changing the configured embedder of router and memory: stored vectors keep
their embedder and dimension, a search never compares two embedders' vectors
(it is lexical only, and says so, until the rebuild), the rebuild runs in
batches with progress and resumes where it stopped, and the service does it
by itself at start-up; a broken model file stops the service at start-up.
On SQLite and PostgreSQL, through the real stubs."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import text

from services.memory.notes.reembed import reembed
from services.memory.notes.repository import NotesRepository
from services.memory.server import build_server as build_memory
from services.memory.settings import MemorySettings
from services.router.reindex import main as reindex_main
from services.router.server import build_server as build_router
from services.router.server import open_domain
from services.router.settings import RouterSettings
from services.shared.db import create_engine, session_factory
from services.shared.embeddings import EmbedderName, ModelFileError, load_embedder, use_model_dir
from switchboard.memory.v1 import memory_pb2, memory_service_pb2_grpc
from switchboard.memory.v1 import memory_service_pb2 as mpb
from switchboard.router.v1 import router_pb2, router_service_pb2_grpc
from switchboard.router.v1 import router_service_pb2 as rpb
from tests.service.harness import as_admin, as_user, running

HASHING, MODEL = EmbedderName.HASHING, EmbedderName.USE_MULTILINGUAL
ALICE = as_user("alice")
ADMIN = as_admin("alice")  # catalog writes are for admins
# More than a rebuild embeds on the spot (32), so the switch needs the reindex.
EXTRA_SKILLS = 40
REQUEST = "Transforme le compte rendu de la réunion en actions"


class Interrupted(Exception):
    pass


def stop_after(batches: int, seen: list[tuple[int, int]]) -> Callable[[int, int], None]:
    """A progress report that records, then interrupts the rebuild after ``batches`` batches."""

    def report(done: int, total: int) -> None:
        seen.append((done, total))
        if len(seen) > batches:
            raise Interrupted

    return report


async def rows(db_url: str, query: str) -> list[tuple[object, ...]]:
    engine = create_engine(db_url)
    try:
        async with engine.connect() as connection:
            return [tuple(r) for r in (await connection.execute(text(query))).all()]
    finally:
        await engine.dispose()


def router_settings(db_url: str, embedder: EmbedderName, **overrides: object) -> RouterSettings:
    return RouterSettings(port=0, database_url=db_url, embedder=embedder, **overrides)  # type: ignore[arg-type]


async def route(channel: object) -> rpb.RouteSkillsResponse:
    stub = router_service_pb2_grpc.RouterServiceStub(channel)  # type: ignore[arg-type]
    return await stub.RouteSkills(rpb.RouteSkillsRequest(text=REQUEST, offline=True), **ALICE)


async def test_router_switching_embedder_is_lexical_until_the_resumable_reindex(
    db_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async with running(build_router, router_settings(db_url, HASHING)) as (_, channel):
        stub = router_service_pb2_grpc.RouterServiceStub(channel)
        for i in range(EXTRA_SKILLS):
            skill = router_pb2.Skill(
                name=f"team-skill-{i}", description=f"Prepare the {i}th team checklist.", body="Do it."
            )
            skill.auto_use = True
            await stub.CreateSkill(rpb.CreateSkillRequest(skill=skill), **ADMIN)
        # 40 new skills at once: more than a rebuild embeds on the spot, so the
        # first decision is lexical and the rest is embedded in the background.
        first = (await route(channel)).decision
        assert first.embedder == "" and first.explanation.startswith("lexical only"), first
        for _ in range(200):
            if (await route(channel)).decision.embedder == "hashing":
                break
            await asyncio.sleep(0.05)
        assert (await route(channel)).decision.embedder == "hashing"
    total = EXTRA_SKILLS + 23
    assert await rows(db_url, "select embedder, dimension, count(*) from skill_vectors group by 1, 2") == [
        ("hashing", 256, total)
    ]

    # The new embedder finds no vector of its own: lexical only, said in the record.
    quiet = router_settings(db_url, MODEL, reindex_in_background=False)
    async with running(build_router, quiet) as (_, channel):
        decision = (await route(channel)).decision
    assert decision.embedder == "" and decision.explanation.startswith("lexical only")
    assert f"{total} of {total} skills without a vector" in decision.explanation
    assert all(c.embedding_rank == 0 and c.embedding_score == 0 for c in decision.candidates)
    assert [c.name for c in decision.candidates][0] == "meeting-notes-to-actions"

    # Interrupted after a batch of 16, the reindex resumes where it stopped.
    domain, closers = await open_domain(quiet)
    seen: list[tuple[int, int]] = []
    try:
        with pytest.raises(Interrupted):
            await domain.reindex(stop_after(1, seen), batch=16)
    finally:
        for close in closers:
            await close()
    assert seen == [(0, total), (16, total)]
    monkeypatch.setenv("SWITCHBOARD_ROUTER_DATABASE_URL", db_url)
    monkeypatch.setenv("SWITCHBOARD_ROUTER_EMBEDDER", MODEL.value)
    capsys.readouterr()
    assert await asyncio.to_thread(reindex_main, []) == 0
    out = capsys.readouterr()
    lines = out.err.splitlines()
    assert lines[0].startswith(f"skills, {MODEL.value}: 16/{total}"), out.err
    assert lines[-1].startswith(f"skills, {MODEL.value}: {total}/{total} (100%)"), out.err
    assert f"reindex: {total - 16} embedded" in out.out
    # Both embedders' vectors are kept, each with its dimension.
    assert sorted(
        await rows(db_url, "select embedder, dimension, count(*) from skill_vectors group by 1, 2")
    ) == [
        ("hashing", 256, total),
        (MODEL.value, 512, total),
    ]
    async with running(build_router, quiet) as (_, channel):
        decision = (await route(channel)).decision
    assert decision.embedder == MODEL.value and not decision.explanation.startswith("lexical only")
    assert decision.candidates[0].name == "meeting-notes-to-actions" and decision.candidates[0].embedding_rank


async def test_router_reindexes_by_itself_in_the_background(db_url: str) -> None:
    async with running(build_router, router_settings(db_url, HASHING)) as (_, channel):
        stub = router_service_pb2_grpc.RouterServiceStub(channel)
        for i in range(EXTRA_SKILLS):
            skill = router_pb2.Skill(name=f"s-{i}", description=f"Checklist number {i}.", body="Do it.")
            await stub.CreateSkill(rpb.CreateSkillRequest(skill=skill), **ADMIN)
    async with running(build_router, router_settings(db_url, MODEL)) as (_, channel):
        for _ in range(200):
            decision = (await route(channel)).decision
            if decision.embedder:
                break
            assert decision.explanation.startswith("lexical only")
            await asyncio.sleep(0.05)
    assert decision.embedder == MODEL.value
    assert decision.branch == router_pb2.ROUTE_BRANCH_HIGH
    assert [c.name for c in decision.candidates][0] == "meeting-notes-to-actions"


def memory_settings(db_url: str, embedder: EmbedderName, **overrides: object) -> MemorySettings:
    return MemorySettings(port=0, database_url=db_url, embedder=embedder, **overrides)  # type: ignore[arg-type]


_TOPICS = (
    "jardin verger potager serre compost ruche abeille tulipe orchidée bambou cactus lavande "
    "violon piano guitare tambour flûte harpe trompette accordéon saxophone "
    "montagne glacier volcan désert falaise rivière cascade marais lagune archipel "
    "boulangerie fromagerie librairie pharmacie quincaillerie poissonnerie horlogerie"
).split()
NOTES = [
    ("Factures", "Les factures clients sont générées chaque mois ; une erreur se corrige par un avoir."),
    ("Astreinte", "Une personne d'astreinte par semaine reçoit les alertes de production."),
] + [(word.capitalize(), f"Le mot {word} n'a rien à voir avec le reste du projet.") for word in _TOPICS[:38]]


async def recall(channel: object, query: str, mode: int = memory_pb2.RECALL_MODE_HYBRID) -> list[str]:
    stub = memory_service_pb2_grpc.MemoryServiceStub(channel)  # type: ignore[arg-type]
    request = mpb.RecallNotesRequest(project_id="personal", query=query, limit=5, mode=mode)  # type: ignore[arg-type]
    found = (await stub.RecallNotes(request, **ALICE)).notes
    return [f"{r.note.title}:{r.embedding_rank}" for r in found]


async def test_memory_switching_embedder_is_lexical_until_the_resumable_reembed(db_url: str) -> None:
    async with running(build_memory, memory_settings(db_url, HASHING)) as (_, channel):
        stub = memory_service_pb2_grpc.MemoryServiceStub(channel)
        for title, body in NOTES:
            note = memory_pb2.Note(project_id="personal", kind=1, title=title, body=body)
            await stub.CreateNote(mpb.CreateNoteRequest(note=note), **ALICE)
    assert await rows(db_url, "select embedder, embedding_dimension, count(*) from notes group by 1, 2") == [
        ("hashing", 256, len(NOTES))
    ]
    quiet = memory_settings(db_url, MODEL, reembed_at_startup=False)
    async with running(build_memory, quiet) as (_, channel):
        # "invoice" shares no word with the French note: only the embedding
        # could find it, and it must not compare 512 with 256 dimensions.
        assert await recall(channel, "how do we fix a wrong invoice") == []
        assert await recall(channel, "facture erronée", memory_pb2.RECALL_MODE_EMBEDDING) == []
        lexical = await recall(channel, "factures et avoir")
        assert lexical[0] == "Factures:0" and all(r.endswith(":0") for r in lexical)

    engine = create_engine(quiet.effective_database_url)
    try:
        repo = NotesRepository(session_factory(engine))
        embedder = load_embedder(MODEL.value)
        seen: list[tuple[int, int]] = []
        with pytest.raises(Interrupted):
            await reembed(repo, embedder, stop_after(1, seen), batch=16)
        assert seen == [(0, len(NOTES)), (16, len(NOTES))]
        again: list[tuple[int, int]] = []
        assert (
            await reembed(repo, embedder, lambda *report: again.append(report), batch=16) == len(NOTES) - 16
        )
        assert again[0] == (16, len(NOTES)) and again[-1] == (len(NOTES), len(NOTES))
    finally:
        await engine.dispose()
    assert await rows(db_url, "select embedder, embedding_dimension, count(*) from notes group by 1, 2") == [
        (MODEL.value, 512, len(NOTES))
    ]
    async with running(build_memory, quiet) as (_, channel):
        assert (await recall(channel, "how do we fix a wrong invoice"))[0] == "Factures:1"


async def test_memory_reembeds_by_itself_at_start_up(db_url: str) -> None:
    async with running(build_memory, memory_settings(db_url, HASHING)) as (_, channel):
        stub = memory_service_pb2_grpc.MemoryServiceStub(channel)
        for title, body in NOTES:
            await stub.CreateNote(
                mpb.CreateNoteRequest(
                    note=memory_pb2.Note(project_id="personal", kind=1, title=title, body=body)
                ),
                **ALICE,
            )
    async with running(build_memory, memory_settings(db_url, MODEL)) as (_, channel):
        for _ in range(200):
            found = await recall(channel, "who is on call this week")
            if found:
                break
            await asyncio.sleep(0.05)
    assert found[0] == "Astreinte:1"


def _broken_model(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the model files with the weights truncated, and that file."""
    folder = tmp_path / "model"
    shutil.copytree(use_model_dir(), folder)
    weights = folder / "weights.npz"
    weights.write_bytes(weights.read_bytes()[:1000])
    return folder, weights


async def test_a_corrupt_model_file_stops_router_and_memory_at_start_up_naming_it(
    db_url: str, tmp_path: Path
) -> None:
    folder, weights = _broken_model(tmp_path)
    with pytest.raises(ModelFileError, match=re.escape(str(weights))):
        await build_router(router_settings(db_url, MODEL, embedder_model_dir=folder))
    (folder / "sp.model").unlink()
    with pytest.raises(ModelFileError, match=re.escape(f"{folder / 'sp.model'} is missing")):
        await build_memory(memory_settings(db_url, MODEL, embedder_model_dir=folder))


@pytest.mark.parametrize("service", ["router", "memory"])
def test_the_process_exits_at_start_up_with_the_files_path(service: str, tmp_path: Path) -> None:
    folder, weights = _broken_model(tmp_path)
    prefix = f"SWITCHBOARD_{service.upper()}_"
    env = {
        **os.environ,
        prefix + "PORT": "0",
        prefix + "DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}",
        prefix + "EMBEDDER_MODEL_DIR": str(folder),
    }
    done = subprocess.run(
        [sys.executable, "-m", f"services.{service}"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    assert str(weights) in done.stderr + done.stdout, done.stderr[-2000:]
