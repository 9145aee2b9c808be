"""Durable notes through the real stub: CRUD, duplicates (refuse / merge),
hybrid recall with personas, the index across replicas on one database, and
live state kept out of recall. Hashing embedder (fast, deterministic)."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf.field_mask_pb2 import FieldMask

from services.memory.server import build_server
from services.memory.settings import MemorySettings
from services.shared.embeddings import EmbedderName
from services.shared.errors import error_info
from switchboard.memory.v1 import memory_pb2, memory_service_pb2_grpc
from switchboard.memory.v1 import memory_service_pb2 as pb
from tests.service.harness import as_user, create_projects, expect_error, running

Stub = memory_service_pb2_grpc.MemoryServiceStub
INVALID = (grpc.StatusCode.INVALID_ARGUMENT, "ERROR_REASON_INVALID_ARGUMENT")
NOT_FOUND = (grpc.StatusCode.NOT_FOUND, "ERROR_REASON_NOT_FOUND")
DUPLICATE = (grpc.StatusCode.FAILED_PRECONDITION, "ERROR_REASON_FAILED_PRECONDITION")


def settings(db_url: str) -> MemorySettings:
    return MemorySettings(port=0, database_url=db_url, embedder=EmbedderName.HASHING)


@pytest.fixture
async def stub(memory_channel: grpc.aio.Channel) -> Stub:
    await create_projects(memory_channel, "alice", "acme", "other")
    return Stub(memory_channel)


def note(
    title: str,
    body: str,
    *,
    project_id: str = "acme",
    kind: memory_pb2.NoteKind.ValueType = memory_pb2.NOTE_KIND_DECISION,
    tags: list[str] | None = None,
) -> memory_pb2.Note:
    return memory_pb2.Note(project_id=project_id, kind=kind, title=title, body=body, tags=tags or [])


async def create(
    stub: Stub, n: memory_pb2.Note, user: str = "alice", **fields: object
) -> pb.CreateNoteResponse:
    response: pb.CreateNoteResponse = await stub.CreateNote(
        pb.CreateNoteRequest(note=n, **fields), **as_user(user)
    )  # type: ignore[arg-type]
    return response


async def titles(stub: Stub, query: str, persona: str = "", user: str = "alice", limit: int = 0) -> list[str]:
    response = await stub.RecallNotes(
        pb.RecallNotesRequest(project_id="acme", query=query, persona=persona, limit=limit), **as_user(user)
    )
    return [r.note.title for r in response.notes]


# CRUD


async def test_get_update_delete_and_other_users(stub: Stub) -> None:
    created = (
        await create(stub, note("Queue choice", "Jobs go through PostgreSQL SKIP LOCKED.", tags=["jobs"]))
    ).note
    assert (await stub.GetNote(pb.GetNoteRequest(id=created.id), **as_user("alice"))).note == created
    # Another user's note is NOT_FOUND for every verb, exactly like a missing id.
    for user, note_id in (("bob", created.id), ("alice", "missing")):
        await expect_error(stub.GetNote(pb.GetNoteRequest(id=note_id), **as_user(user)), *NOT_FOUND)
        await expect_error(stub.DeleteNote(pb.DeleteNoteRequest(id=note_id), **as_user(user)), *NOT_FOUND)
        update = pb.UpdateNoteRequest(
            note=memory_pb2.Note(id=note_id, title="stolen"), update_mask=FieldMask(paths=["title"])
        )
        await expect_error(stub.UpdateNote(update, **as_user(user)), *NOT_FOUND)
    await expect_error(stub.GetNote(pb.GetNoteRequest(id=" "), **as_user("alice")), *INVALID)
    # Update writes only the masked fields and re-embeds: recall follows the new text.
    update = pb.UpdateNoteRequest(
        note=memory_pb2.Note(id=created.id, body="Jobs go through Redis streams.", title="ignored"),
        update_mask=FieldMask(paths=["body"]),
    )
    updated = (await stub.UpdateNote(update, **as_user("alice"))).note
    assert (updated.title, updated.body, list(updated.tags)) == (
        "Queue choice",
        "Jobs go through Redis streams.",
        ["jobs"],
    )
    assert updated.update_time.ToDatetime() > created.update_time.ToDatetime()
    assert await titles(stub, "redis streams") == ["Queue choice"]
    assert await titles(stub, "skip locked") == []
    for paths, fields in (
        (["author_agent_id"], {}),
        ([], {}),
        (["kind"], {"kind": 0}),
        (["body"], {"body": " "}),
    ):
        bad = pb.UpdateNoteRequest(
            note=memory_pb2.Note(id=created.id, **fields), update_mask=FieldMask(paths=paths)
        )  # type: ignore[arg-type]
        await expect_error(stub.UpdateNote(bad, **as_user("alice")), *INVALID)
    await stub.DeleteNote(pb.DeleteNoteRequest(id=created.id), **as_user("alice"))
    await expect_error(stub.GetNote(pb.GetNoteRequest(id=created.id), **as_user("alice")), *NOT_FOUND)
    assert await titles(stub, "redis streams") == []


async def test_list_pages_and_filters(stub: Stub) -> None:
    kinds = [memory_pb2.NOTE_KIND_DECISION, memory_pb2.NOTE_KIND_PREFERENCE, memory_pb2.NOTE_KIND_FACT]
    words = "amber birch cedar dune ember fjord grove heath islet jade karst lagoon".split()
    for i, word in enumerate(words):
        tags = ["odd"] if i % 2 else ["even", 'quote"d%_']
        await create(
            stub, note(f"Topic {word}", f"All about {word} and {word}s", kind=kinds[i % 3], tags=tags)
        )
    await create(stub, note("Elsewhere", "Another project entirely", project_id="other"))
    await create(stub, note("Bob's", "Not alice's at all", project_id=""), user="bob")

    async def listing(**fields: object) -> list[str]:
        seen, token = [], ""
        while True:
            request = pb.ListNotesRequest(page_size=5, page_token=token, **fields)  # type: ignore[arg-type]
            response = await stub.ListNotes(request, **as_user("alice"))
            assert len(response.notes) <= 5
            seen += [n.title for n in response.notes]
            if not (token := response.next_page_token):
                return seen

    everything = await listing()
    assert everything == [
        "Elsewhere",
        *[f"Topic {w}" for w in reversed(words)],
    ]  # newest first, every project
    assert len(await listing(project_id="acme")) == 12
    assert await listing(project_id="acme", kind=memory_pb2.NOTE_KIND_FACT) == [
        f"Topic {w}" for w in reversed(words[2::3])
    ]
    assert await listing(tag="odd") == [f"Topic {w}" for w in reversed(words[1::2])]
    assert await listing(tag='quote"d%_') == [f"Topic {w}" for w in reversed(words[0::2])]
    assert await listing(tag="od") == []  # whole tags only
    # A token only works for the listing that issued it.
    first = await stub.ListNotes(pb.ListNotesRequest(page_size=2), **as_user("alice"))
    await expect_error(
        stub.ListNotes(
            pb.ListNotesRequest(page_size=2, tag="odd", page_token=first.next_page_token), **as_user("alice")
        ),
        *INVALID,
    )
    await expect_error(
        stub.ListNotes(pb.ListNotesRequest(page_token="garbage!"), **as_user("alice")), *INVALID
    )
    await expect_error(stub.ListNotes(pb.ListNotesRequest(kind=9), **as_user("alice")), *INVALID)  # type: ignore[arg-type]


# Duplicates


async def test_identical_text_is_refused_with_the_existing_id(stub: Stub) -> None:
    first = (await create(stub, note("Deploy target", "We deploy on Kubernetes.", tags=["infra"]))).note
    error = await expect_error(create(stub, note("deploy TARGET!", "  we deploy on kubernetes ")), *DUPLICATE)
    info = error_info(error)
    assert info is not None and info.metadata["duplicate_of"] == first.id
    assert "identical text" in info.metadata["rule"]
    merged = await create(
        stub,
        note("Deploy target", "We deploy on Kubernetes", tags=["ops"]),
        duplicate_policy=memory_pb2.DUPLICATE_POLICY_MERGE,
    )
    assert merged.outcome == memory_pb2.SAVE_OUTCOME_MERGED and "identical text" in merged.reason
    assert merged.note.id == first.id and list(merged.note.tags) == ["infra", "ops"]
    # Same text in another project (one of alice's, bob's own) is not a duplicate.
    await create(stub, note("Deploy target", "We deploy on Kubernetes.", project_id="other"))
    await create(stub, note("Deploy target", "We deploy on Kubernetes.", project_id=""), user="bob")
    listed = await stub.ListNotes(pb.ListNotesRequest(project_id="acme"), **as_user("alice"))
    assert [n.id for n in listed.notes] == [first.id]


async def test_near_duplicate_is_refused_or_merged(stub: Stub) -> None:
    first = (
        await create(
            stub, note("Release checklist", "Changelog, version bump and release notes.", tags=["release"])
        )
    ).note
    reworded = note("Release checklist", "Changelog, version bump and the release notes.", tags=["release"])
    error = await expect_error(create(stub, reworded), *DUPLICATE)
    info = error_info(error)
    assert (
        info is not None and info.metadata["duplicate_of"] == first.id and "cosine" in info.metadata["rule"]
    )
    merged = await create(stub, reworded, duplicate_policy=memory_pb2.DUPLICATE_POLICY_MERGE)
    assert merged.outcome == memory_pb2.SAVE_OUTCOME_MERGED and first.id in merged.reason
    assert merged.note.id == first.id and merged.note.body == "Changelog, version bump and the release notes."
    assert list(merged.note.tags) == ["release"]
    # A distinct note of the same topic is saved.
    other = await create(stub, note("Release cadence", "We ship every second Tuesday."))
    assert other.outcome == memory_pb2.SAVE_OUTCOME_CREATED
    # Updating a note into another's text is refused too.
    update = pb.UpdateNoteRequest(
        note=memory_pb2.Note(id=other.note.id, title=first.title, body=merged.note.body),
        update_mask=FieldMask(paths=["title", "body"]),
    )
    await expect_error(stub.UpdateNote(update, **as_user("alice")), *DUPLICATE)
    await expect_error(create(stub, reworded, duplicate_policy=7), *INVALID)  # type: ignore[arg-type]


# Recall


async def test_two_personas_get_two_subsets_for_one_query(stub: Stub) -> None:
    for n in (
        note("Regression tests", "Every bug fix starts with a failing pytest case.", tags=["qa"]),
        note("Coverage gate", "The CI fails under 85 percent test coverage.", tags=["qa"]),
        note(
            "Service boundaries", "One gRPC service per domain; contracts in protos.", tags=["architecture"]
        ),
        note(
            "Database ownership", "Each service owns its tables; no cross-service SQL.", tags=["architecture"]
        ),
        note("Release train", "Releases leave every second week with a changelog."),
    ):
        await create(stub, n)
    qa = "QA engineer: pytest, regressions, coverage, failing tests"
    architect = "Architect: gRPC services, domain boundaries, contracts, tables ownership"
    for_qa = await titles(stub, "release", persona=qa, limit=3)
    for_architect = await titles(stub, "release", persona=architect, limit=3)
    assert for_qa[0] == for_architect[0] == "Release train"  # the query's own match leads
    assert set(for_qa[1:]) <= {"Regression tests", "Coverage gate"} and for_qa[1:]
    assert set(for_architect[1:]) <= {"Service boundaries", "Database ownership"} and for_architect[1:]


async def test_recall_reports_both_rankings_and_modes(stub: Stub) -> None:
    await create(stub, note("Database choice", "Runs are stored in PostgreSQL."))
    await create(stub, note("Frontend", "The chat panel is a sidebar by default."))
    response = await stub.RecallNotes(
        pb.RecallNotesRequest(project_id="acme", query="postgresql database"), **as_user("alice")
    )
    top = response.notes[0]
    assert top.note.title == "Database choice" and top.lexical_rank == 1 and top.embedding_rank == 1
    assert top.score == pytest.approx(1.0)  # first in both rankings
    lexical = await stub.RecallNotes(
        pb.RecallNotesRequest(project_id="acme", query="postgresql", mode=memory_pb2.RECALL_MODE_LEXICAL),
        **as_user("alice"),
    )
    assert all(r.embedding_rank == 0 and r.lexical_rank > 0 for r in lexical.notes)
    await expect_error(
        stub.RecallNotes(pb.RecallNotesRequest(query="x y", mode=9), **as_user("alice")),
        *INVALID,  # type: ignore[arg-type]
    )


async def test_live_state_is_never_recalled(stub: Stub) -> None:
    await stub.SetLiveState(
        pb.SetLiveStateRequest(
            project_id="acme", agent_id="qa", activity="zanzibar refactor", detail="quokka migration"
        ),
        **as_user("alice"),
    )
    assert await titles(stub, "zanzibar quokka refactor migration") == []
    await create(stub, note("Zanzibar", "The quokka module is deprecated."))
    assert await titles(stub, "zanzibar quokka refactor migration") == ["Zanzibar"]


async def test_replicas_on_one_database_see_each_others_writes(db_url: str) -> None:
    async with (
        running(build_server, settings(db_url)) as (_, channel_a),
        running(build_server, settings(db_url)) as (_, channel_b),
    ):
        a, b = Stub(channel_a), Stub(channel_b)
        await create_projects(channel_a, "alice", "acme")
        assert await titles(b, "kestrel") == []  # b caches an empty index
        created = (await create(a, note("Kestrel", "The kestrel service owns billing."))).note
        assert await titles(b, "kestrel") == ["Kestrel"]  # b reloads on a's revision
        assert await titles(a, "kestrel") == ["Kestrel"]
        await b.DeleteNote(pb.DeleteNoteRequest(id=created.id), **as_user("alice"))
        assert await titles(a, "kestrel") == []
        # The exact-duplicate rule holds across replicas (a database constraint).
        await create(a, note("Heron", "Heron owns invoices."))
        await expect_error(create(b, note("Heron", "Heron owns invoices.")), *DUPLICATE)
