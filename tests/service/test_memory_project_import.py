"""`python -m services.memory import-project FOLDER`: a real process reads a
project folder and imports it into a running memory service over gRPC; a
second run changes nothing; a folder without .ideai is a clear error."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from services.memory.server import build_server
from services.memory.settings import MemorySettings
from switchboard.memory.v1 import memory_pb2, memory_service_pb2, memory_service_pb2_grpc
from tests.conftest import DatabaseFactory
from tests.service.harness import as_user, running

PROJECT = Path(__file__).resolve().parents[1] / "fixtures" / "memory" / "project"


async def run_import(port: int, folder: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "services.memory", "import-project", str(folder), "--project", "idea",
            "--user", "alice", "--address", f"127.0.0.1:{port}"]  # fmt: skip
    return await asyncio.to_thread(
        subprocess.run, argv, capture_output=True, text=True, timeout=60, env=dict(os.environ)
    )


async def test_a_project_folder_is_imported_once(make_database: DatabaseFactory, tmp_path: Path) -> None:
    async with make_database("memory") as url:
        settings = MemorySettings(port=0, database_url=url, embedder="hashing")
        async with running(build_server, settings) as (service, channel):
            first = await run_import(service.port, PROJECT)
            assert first.returncode == 0, first.stderr
            lines = first.stdout.splitlines()
            assert any(line.startswith("created") and "CONTEXT.md" in line for line in lines), lines
            assert any(line.startswith("skipped") and "no-kind.md" in line for line in lines), lines
            again = await run_import(service.port, PROJECT)
            assert again.returncode == 0 and not [
                line for line in again.stdout.splitlines() if line.startswith(("created", "updated"))
            ]

            stub = memory_service_pb2_grpc.MemoryServiceStub(channel)
            notes = await stub.ListNotes(
                memory_service_pb2.ListNotesRequest(project_id="idea"), **as_user("alice")
            )
            assert notes.notes and all(n.kind != memory_pb2.NOTE_KIND_UNSPECIFIED for n in notes.notes)
            context = await stub.GetProjectContext(
                memory_service_pb2.GetProjectContextRequest(project_id="idea"), **as_user("alice")
            )
            assert context.context.body.strip()

            (tmp_path / "empty").mkdir()
            missing = await run_import(service.port, tmp_path / "empty")
            assert missing.returncode == 2 and "has no .ideai folder" in missing.stderr
