"""Project context and the import of a project folder (tests/fixtures/memory/project)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import pytest

from switchboard.memory.v1 import memory_pb2, memory_service_pb2_grpc
from switchboard.memory.v1 import memory_service_pb2 as pb
from tests.service.harness import as_user, create_projects, expect_error

Stub = memory_service_pb2_grpc.MemoryServiceStub
PROJECT = Path(__file__).parents[1] / "fixtures" / "memory" / "project"
NOT_FOUND = (grpc.StatusCode.NOT_FOUND, "ERROR_REASON_NOT_FOUND")
INVALID = (grpc.StatusCode.INVALID_ARGUMENT, "ERROR_REASON_INVALID_ARGUMENT")
TOO_LARGE = (grpc.StatusCode.INVALID_ARGUMENT, "ERROR_REASON_TOO_LARGE")
M = memory_pb2


@pytest.fixture
def memory_options() -> dict[str, Any]:
    return {"max_context_chars": 1000}


@pytest.fixture
async def stub(memory_channel: grpc.aio.Channel) -> Stub:
    await create_projects(memory_channel, "alice", "acme")
    return Stub(memory_channel)


def folder_files() -> list[memory_pb2.ProjectFile]:
    return [
        memory_pb2.ProjectFile(path=str(path.relative_to(PROJECT)), content=path.read_text())
        for path in sorted(PROJECT.rglob("*.md"))
    ]


async def test_context_get_put_and_privacy(stub: Stub) -> None:
    await expect_error(
        stub.GetProjectContext(pb.GetProjectContextRequest(project_id="acme"), **as_user("alice")), *NOT_FOUND
    )
    put = pb.UpdateProjectContextRequest(
        context=memory_pb2.ProjectContext(project_id="acme", body=" Use gRPC only. \n")
    )
    saved = (await stub.UpdateProjectContext(put, **as_user("alice"))).context
    assert (saved.project_id, saved.body) == ("acme", "Use gRPC only.") and saved.update_time.seconds > 0
    got = (
        await stub.GetProjectContext(pb.GetProjectContextRequest(project_id="acme"), **as_user("alice"))
    ).context
    assert got == saved
    replaced = pb.UpdateProjectContextRequest(
        context=memory_pb2.ProjectContext(project_id="acme", body="Use HTTP.")
    )
    await stub.UpdateProjectContext(replaced, **as_user("alice"))
    got = (
        await stub.GetProjectContext(pb.GetProjectContextRequest(project_id="acme"), **as_user("alice"))
    ).context
    assert got.body == "Use HTTP."
    # Another user, another project: none.
    await expect_error(
        stub.GetProjectContext(pb.GetProjectContextRequest(project_id="acme"), **as_user("bob")), *NOT_FOUND
    )
    await expect_error(
        stub.GetProjectContext(pb.GetProjectContextRequest(project_id="x"), **as_user("alice")), *NOT_FOUND
    )
    for body, error in ((" ", INVALID), ("x" * 1001, TOO_LARGE)):
        bad = pb.UpdateProjectContextRequest(context=memory_pb2.ProjectContext(project_id="acme", body=body))
        await expect_error(stub.UpdateProjectContext(bad, **as_user("alice")), *error)


async def test_import_is_idempotent_and_reports_each_file(stub: Stub) -> None:
    files = folder_files()
    request = pb.ImportProjectFilesRequest(
        project_id="acme",
        files=[*files, memory_pb2.ProjectFile(path="README.md", content="x"), files[1]],
    )
    first = (await stub.ImportProjectFiles(request, **as_user("alice"))).items
    outcome = {item.path: (item.outcome, item.reason) for item in first[:-2]}
    assert outcome == {
        ".ideai/CONTEXT.md": (M.IMPORT_OUTCOME_CREATED, ""),
        ".ideai/memory/agent-context-memory-and-profile-handoff.md": (M.IMPORT_OUTCOME_CREATED, ""),
        ".ideai/memory/chat-mode.md": (M.IMPORT_OUTCOME_CREATED, ""),
        ".ideai/memory/no-kind.md": (
            M.IMPORT_OUTCOME_SKIPPED,
            "no metadata.type in the front matter: a note needs a kind",
        ),
        ".ideai/memory/retry-policy.md": (M.IMPORT_OUTCOME_CREATED, ""),
    }
    assert first[-2].outcome == M.IMPORT_OUTCOME_SKIPPED and "not .ideai/CONTEXT.md" in first[-2].reason
    assert first[-1].outcome == M.IMPORT_OUTCOME_SKIPPED and "sent earlier" in first[-1].reason
    # The notes: title from the heading, kind from metadata.type, tags from the front matter.
    seed = next(i for i in first if i.path.endswith("handoff.md"))
    note = (await stub.GetNote(pb.GetNoteRequest(id=seed.note_id), **as_user("alice"))).note
    assert note.title == "Agent Context, Memory, and Profile Handoff" and note.kind == M.NOTE_KIND_DECISION
    assert note.source == "agent-context-memory-and-profile-handoff" and note.body.startswith("Decisions sur")
    retry = next(i for i in first if i.path.endswith("retry-policy.md"))
    retry_note = (await stub.GetNote(pb.GetNoteRequest(id=retry.note_id), **as_user("alice"))).note
    assert (retry_note.kind, list(retry_note.tags)) == (M.NOTE_KIND_FACT, ["grpc", "resilience"])
    context = (
        await stub.GetProjectContext(pb.GetProjectContextRequest(project_id="acme"), **as_user("alice"))
    ).context
    assert context.body.startswith("# Project context")
    # Recall finds imported knowledge.
    recalled = await stub.RecallNotes(
        pb.RecallNotesRequest(project_id="acme", query="retried UNAVAILABLE"), **as_user("alice")
    )
    assert recalled.notes[0].note.id == retry.note_id

    # Same files again: nothing new.
    again = (
        await stub.ImportProjectFiles(
            pb.ImportProjectFilesRequest(project_id="acme", files=files), **as_user("alice")
        )
    ).items
    assert [i.outcome for i in again if not i.path.endswith("no-kind.md")] == [M.IMPORT_OUTCOME_UNCHANGED] * 4
    assert {i.note_id for i in again if i.note_id} == {i.note_id for i in first if i.note_id}
    listed = await stub.ListNotes(pb.ListNotesRequest(project_id="acme"), **as_user("alice"))
    assert len(listed.notes) == 3

    # A changed file updates its note in place; a changed context is UPDATED.
    changed = [
        memory_pb2.ProjectFile(
            path=f.path, content=f.content.replace("with a deadline", "with a 5 s deadline")
        )
        if f.path.endswith("retry-policy.md")
        else memory_pb2.ProjectFile(path=f.path, content=f.content + "\n- One more rule.")
        if f.path.endswith("CONTEXT.md")
        else f
        for f in files
    ]
    third = (
        await stub.ImportProjectFiles(
            pb.ImportProjectFilesRequest(project_id="acme", files=changed), **as_user("alice")
        )
    ).items
    by_path = {i.path: i for i in third}
    assert by_path[".ideai/memory/retry-policy.md"].outcome == M.IMPORT_OUTCOME_UPDATED
    assert by_path[".ideai/memory/retry-policy.md"].note_id == retry.note_id
    assert by_path[".ideai/CONTEXT.md"].outcome == M.IMPORT_OUTCOME_UPDATED
    assert by_path[".ideai/memory/chat-mode.md"].outcome == M.IMPORT_OUTCOME_UNCHANGED
    updated = (await stub.GetNote(pb.GetNoteRequest(id=retry.note_id), **as_user("alice"))).note
    assert "5 s deadline" in updated.body
    # Another user's import lands in their own project, alice's stays as it is.
    theirs = (
        await stub.ImportProjectFiles(
            pb.ImportProjectFilesRequest(project_id="", files=files), **as_user("bob")
        )
    ).items
    assert theirs[0].outcome == M.IMPORT_OUTCOME_CREATED


async def test_import_rejects_bad_requests_and_files(stub: Stub) -> None:
    await expect_error(
        stub.ImportProjectFiles(pb.ImportProjectFilesRequest(project_id="acme"), **as_user("alice")), *INVALID
    )
    files = [
        memory_pb2.ProjectFile(path="memory/bad-yaml.md", content="---\nname: [unclosed\n---\nbody"),
        memory_pb2.ProjectFile(
            path="memory/odd-type.md", content="---\nmetadata:\n  type: gossip\n---\nbody"
        ),
        memory_pb2.ProjectFile(path=".ideai/memory/empty.md", content="---\nmetadata:\n  type: fact\n---\n"),
        memory_pb2.ProjectFile(path=".ideai/memory/../../etc/passwd.md", content="x"),
    ]
    items = (
        await stub.ImportProjectFiles(
            pb.ImportProjectFilesRequest(project_id="acme", files=files), **as_user("alice")
        )
    ).items
    assert [i.outcome for i in items] == [M.IMPORT_OUTCOME_SKIPPED] * 4
    assert (
        "not valid YAML" in items[0].reason
        and "gossip" in items[1].reason
        and "body must not be empty" in items[2].reason
    )
