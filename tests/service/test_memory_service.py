"""The memory service in-process, called through its real stub."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from google.protobuf.field_mask_pb2 import FieldMask
from google.protobuf.struct_pb2 import Struct

from services.shared.errors import error_info
from services.shared.projects import personal_project_id
from switchboard.memory.v1 import memory_pb2, memory_service_pb2_grpc
from switchboard.memory.v1 import memory_service_pb2 as pb
from tests.service.harness import as_user, create_projects, expect_error

Stub = memory_service_pb2_grpc.MemoryServiceStub
INVALID = (grpc.StatusCode.INVALID_ARGUMENT, "ERROR_REASON_INVALID_ARGUMENT")
TOO_LARGE = (grpc.StatusCode.INVALID_ARGUMENT, "ERROR_REASON_TOO_LARGE")
# 52 distinct bodies: notes that differ by one number are near-duplicates.
WORDS = [
    f"{a} {b} {c}"
    for a, b, c in zip(
        "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike".split() * 4,
        (
            "november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu " * 4
        ).split(),
        [f"topic{i:02d}section" for i in range(52)],
        strict=True,
    )
]


@pytest.fixture
def memory_options() -> dict[str, Any]:
    return {"max_note_chars": 500}


@pytest.fixture
async def stub(memory_channel: grpc.aio.Channel) -> Stub:
    # Alice's projects; every other read or write of theirs is in her personal one.
    await create_projects(memory_channel, "alice", "acme", "other", "empty")
    return Stub(memory_channel)


def note(
    title: str,
    body: str,
    *,
    project_id: str = "acme",
    kind: memory_pb2.NoteKind.ValueType = memory_pb2.NOTE_KIND_DECISION,
    tags: list[str] | None = None,
) -> memory_pb2.Note:
    return memory_pb2.Note(
        project_id=project_id, kind=kind, title=title, body=body, tags=tags or [], author_agent_id="architect"
    )


async def create(stub: Stub, *notes: memory_pb2.Note) -> list[memory_pb2.Note]:
    return [(await stub.CreateNote(pb.CreateNoteRequest(note=n), **as_user("alice"))).note for n in notes]


async def recall(
    stub: Stub,
    query: str,
    persona: str = "",
    limit: int = 0,
    project_id: str = "acme",
    mode: memory_pb2.RecallMode.ValueType = memory_pb2.RECALL_MODE_UNSPECIFIED,
) -> list[str]:
    response = await stub.RecallNotes(
        pb.RecallNotesRequest(project_id=project_id, query=query, persona=persona, limit=limit, mode=mode),
        **as_user("alice"),
    )
    scores = [r.score for r in response.notes]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores), scores
    return [r.note.title for r in response.notes]


# Notes


async def test_create_note_returns_the_stored_note(stub: Stub) -> None:
    request = pb.CreateNoteRequest(
        note=note("  Use gRPC  ", " Services talk gRPC. \n", tags=["arch", " arch ", "", "rpc"])
    )
    created = (await stub.CreateNote(request, **as_user("alice"))).note
    assert created.id and created.project_id == "acme" and created.author_agent_id == "architect"
    assert (created.title, created.body) == ("Use gRPC", "Services talk gRPC.")
    assert list(created.tags) == ["arch", "rpc"]
    assert created.kind == memory_pb2.NOTE_KIND_DECISION
    assert created.create_time.seconds > 0 and created.update_time == created.create_time
    # Without a project the note lands in the personal project, which
    # "default" and "personal" also name.
    default = await stub.CreateNote(
        pb.CreateNoteRequest(note=note("Tabs", "Indent with tabs", project_id="")), **as_user("alice")
    )
    assert default.note.project_id == personal_project_id("alice")
    assert await recall(stub, "tabs", project_id="personal") == ["Tabs"]
    assert await recall(stub, "tabs", project_id="") == ["Tabs"]
    assert await recall(stub, "tabs", project_id="default") == ["Tabs"]
    assert await recall(stub, "tabs") == []  # another project


async def test_create_note_is_idempotent_on_request_id(stub: Stub) -> None:
    request = pb.CreateNoteRequest(request_id="req-1", note=note("Once", "Written once only"))
    first = (await stub.CreateNote(request, **as_user("alice"))).note
    retried = (await stub.CreateNote(request, **as_user("alice"))).note
    assert retried.id == first.id and retried.create_time == first.create_time
    # Concurrent retries of another request: one write, one id for all.
    concurrent = pb.CreateNoteRequest(request_id="req-2", note=note("Twice", "Written once only"))
    results = await asyncio.gather(*(stub.CreateNote(concurrent, **as_user("alice")) for _ in range(8)))
    assert len({r.note.id for r in results}) == 1 and results[0].note.id != first.id
    assert sorted(await recall(stub, "written", limit=50)) == ["Once", "Twice"]
    # Keys are per user, not per project: the same key is the same request.
    other = pb.CreateNoteRequest(
        request_id="req-1", note=note("Once", "Written once only", project_id="other")
    )
    assert (await stub.CreateNote(other, **as_user("alice"))).note.id == first.id
    # No request_id: a second call is a new save, refused as a duplicate of the first.
    plain = pb.CreateNoteRequest(note=note("Plain", "Unkeyed note"))
    await stub.CreateNote(plain, **as_user("alice"))
    await expect_error(
        stub.CreateNote(plain, **as_user("alice")),
        grpc.StatusCode.FAILED_PRECONDITION,
        "ERROR_REASON_FAILED_PRECONDITION",
    )
    assert await recall(stub, "unkeyed") == ["Plain"]


async def test_bad_notes_are_invalid_argument(stub: Stub) -> None:
    error = await expect_error(
        stub.CreateNote(
            pb.CreateNoteRequest(note=note("t", "b", kind=memory_pb2.NOTE_KIND_UNSPECIFIED)),
            **as_user("alice"),
        ),
        *INVALID,
    )
    info = error_info(error)
    assert info is not None and info.metadata["field"] == "note.kind"
    await expect_error(
        stub.CreateNote(
            pb.CreateNoteRequest(note=note("t", "b", kind=memory_pb2.NoteKind.ValueType(42))),
            **as_user("alice"),
        ),
        *INVALID,
    )
    await expect_error(
        stub.CreateNote(pb.CreateNoteRequest(note=note("   ", "body")), **as_user("alice")), *INVALID
    )
    await expect_error(
        stub.CreateNote(pb.CreateNoteRequest(note=note("title", " \n\t ")), **as_user("alice")), *INVALID
    )
    await expect_error(stub.CreateNote(pb.CreateNoteRequest(), **as_user("alice")), *INVALID)
    await expect_error(
        stub.CreateNote(pb.CreateNoteRequest(note=note("title", "x" * 501)), **as_user("alice")), *TOO_LARGE
    )
    # Exactly the limit is fine; nothing of the rejected calls was written.
    await create(stub, note("Edge", "x" * 500))
    assert await recall(stub, "title body edge", limit=50) == ["Edge"]


# Recall


async def test_recall_ranks_the_relevant_note_first(stub: Stub) -> None:
    await create(
        stub,
        note("Database choice", "We store runs in PostgreSQL; SQLite embedded for development."),
        note("Deploy", "Each service is deployed separately behind the gateway.", tags=["ops"]),
        note("Retry policy", "Only idempotent calls are retried, and only when UNAVAILABLE.", tags=["grpc"]),
        note("Frontend", "The chat panel is a sidebar by default.", kind=memory_pb2.NOTE_KIND_PREFERENCE),
    )
    assert (await recall(stub, "Which database for the runs? PostgreSQL?"))[0] == "Database choice"
    assert (await recall(stub, "when are gRPC calls retried"))[0] == "Retry policy"
    assert await recall(stub, "ops") == ["Deploy"]  # tags count
    assert await recall(stub, "kubernetes helm") == []  # nothing matches: nothing returned
    assert await recall(stub, "") == []  # no query, no persona
    assert await recall(stub, "a ? !") == []  # no term of 2 characters or more


async def test_recall_is_accent_insensitive(stub: Stub) -> None:
    await create(
        stub,
        note(
            "Décision : base de données",
            "Nous avons choisi PostgreSQL pour la production.",
            tags=["Sécurité"],
        ),
        note("Style", "Le code suit ruff et mypy."),
    )
    assert await recall(stub, "decision base donnees") == ["Décision : base de données"]
    assert await recall(stub, "DÉCISION") == ["Décision : base de données"]
    assert await recall(stub, "securite") == ["Décision : base de données"]
    assert await recall(stub, "règles de style") == ["Style", "Décision : base de données"]


async def test_persona_changes_what_is_recalled(stub: Stub) -> None:
    await create(
        stub,
        note("Test strategy", "Regressions get a pytest case before any fix.", tags=["qa"]),
        note(
            "Service layout",
            "Architecture: one gRPC service per domain, shared plumbing.",
            tags=["architecture"],
        ),
        note("Release checklist", "Changelog, version bump, release notes."),
    )
    qa = "You are QA: you care about pytest, regressions and test coverage."
    architect = "You are the architect: architecture, service boundaries, gRPC contracts."
    assert await recall(stub, "", persona=qa) == ["Test strategy"]
    assert await recall(stub, "", persona=architect) == ["Service layout"]
    # With a query, the persona adds its own subset to what the query finds.
    assert await recall(stub, "release") == ["Release checklist"]
    assert set(await recall(stub, "release", persona=qa)) == {"Release checklist", "Test strategy"}
    assert set(await recall(stub, "release", persona=architect)) == {"Release checklist", "Service layout"}
    # Lexically a query term weighs twice a persona term: a one-term match of each ranks the query's first.
    lexical = memory_pb2.RECALL_MODE_LEXICAL
    assert await recall(stub, "release", persona="pytest", mode=lexical) == [
        "Release checklist",
        "Test strategy",
    ]
    assert await recall(stub, "pytest", persona="release", mode=lexical) == [
        "Test strategy",
        "Release checklist",
    ]


async def test_recall_limit_bounds(stub: Stub) -> None:
    await asyncio.gather(
        *(
            stub.CreateNote(
                pb.CreateNoteRequest(note=note(f"Note {i}", f"shared term {WORDS[i]}")), **as_user("alice")
            )
            for i in range(52)
        )
    )
    assert len(await recall(stub, "shared")) == 5  # default
    assert len(await recall(stub, "shared", limit=2)) == 2
    assert len(await recall(stub, "shared", limit=50)) == 50
    assert len(await recall(stub, "shared", limit=1000)) == 50  # capped
    await expect_error(
        stub.RecallNotes(pb.RecallNotesRequest(query="shared", limit=-1), **as_user("alice")), *INVALID
    )


async def test_recall_ties_prefer_the_most_recent_note(stub: Stub) -> None:
    await create(stub, note("Older", "same words"))
    await create(stub, note("Newer", "same words"))
    assert await recall(stub, "same words") == ["Newer", "Older"]


async def test_recall_in_an_empty_project_is_empty(stub: Stub) -> None:
    assert await recall(stub, "anything at all", persona="a persona", project_id="empty") == []


# Personal settings


def _avatar(value: dict[str, Any]) -> Struct:
    avatar = Struct()
    avatar.update(value)
    return avatar


AVATAR = _avatar({"emoji": "🦊", "hat": {"colour": "red", "sizes": [1, 2]}, "shown": True})
HUGE_AVATAR = _avatar({"emoji": "🦊" * 20_000})


async def test_settings_default_for_a_user_without_a_row(stub: Stub) -> None:
    got = (await stub.GetPersonalSettings(pb.GetPersonalSettingsRequest(), **as_user("alice"))).settings
    assert got == memory_pb2.PersonalSettings(
        user_id="alice", display_name="", chat_mode=memory_pb2.CHAT_MODE_SIDEBAR
    )
    assert not got.HasField("avatar")
    assert list(got.instruction_page_ids) == [] and got.default_model == ""
    await expect_error(
        stub.GetPersonalSettings(pb.GetPersonalSettingsRequest(), timeout=10),
        grpc.StatusCode.UNAUTHENTICATED,
        "ERROR_REASON_UNAUTHENTICATED",
    )


async def test_update_writes_only_the_masked_fields(stub: Stub) -> None:
    wanted = memory_pb2.PersonalSettings(
        user_id="mallory",  # ignored: the caller is the user
        display_name="Alice",
        avatar=AVATAR,
        instruction_page_ids=["p1", "p2", "p1"],
        active_instruction_page_id="p2",
        chat_mode=memory_pb2.CHAT_MODE_FLOATING,
        default_model="gpt-x",
    )
    first = await stub.UpdatePersonalSettings(
        pb.UpdatePersonalSettingsRequest(
            settings=wanted, update_mask=FieldMask(paths=["display_name", "chat_mode"])
        ),
        **as_user("alice"),
    )
    assert first.settings == memory_pb2.PersonalSettings(
        user_id="alice", display_name="Alice", chat_mode=memory_pb2.CHAT_MODE_FLOATING
    )
    everything = ["avatar", "instruction_page_ids", "active_instruction_page_id", "default_model"]
    await stub.UpdatePersonalSettings(
        pb.UpdatePersonalSettingsRequest(settings=wanted, update_mask=FieldMask(paths=everything)),
        **as_user("alice"),
    )
    # A later update of one field keeps the others.
    await stub.UpdatePersonalSettings(
        pb.UpdatePersonalSettingsRequest(
            settings=memory_pb2.PersonalSettings(default_model=""),
            update_mask=FieldMask(paths=["default_model"]),
        ),
        **as_user("alice"),
    )
    got = (await stub.GetPersonalSettings(pb.GetPersonalSettingsRequest(), **as_user("alice"))).settings
    assert got == memory_pb2.PersonalSettings(
        user_id="alice",
        display_name="Alice",
        avatar=AVATAR,
        instruction_page_ids=["p1", "p2"],
        active_instruction_page_id="p2",
        chat_mode=memory_pb2.CHAT_MODE_FLOATING,
        default_model="",  # back to Auto
    )


async def test_the_avatar_is_bounded_and_cleared_by_an_empty_one(stub: Stub) -> None:
    def update(avatar: Struct, paths: list[str]) -> Any:
        return stub.UpdatePersonalSettings(
            pb.UpdatePersonalSettingsRequest(
                settings=memory_pb2.PersonalSettings(avatar=avatar), update_mask=FieldMask(paths=paths)
            ),
            **as_user("carol"),
        )

    await update(AVATAR, ["avatar"])
    await expect_error(
        update(HUGE_AVATAR, ["avatar"]), grpc.StatusCode.INVALID_ARGUMENT, "ERROR_REASON_TOO_LARGE"
    )
    # Nesting deeper than protobuf's parsing depth is refused as unparsable.
    deep: dict[str, Any] = {}
    for _ in range(60):
        deep = {"a": deep}
    request = pb.UpdatePersonalSettingsRequest(update_mask=FieldMask(paths=["avatar"]))
    request.settings.avatar.update(deep)  # built in place: copying would parse it
    await expect_error(
        stub.UpdatePersonalSettings(request, **as_user("carol")),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    # NaN is a double, not a JSON number: refused, not a server error.
    await expect_error(
        update(_avatar({"size": float("nan")}), ["avatar"]),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    # The old string field's path is no field of the contract any more.
    await expect_error(
        update(AVATAR, ["avatar_json"]), grpc.StatusCode.INVALID_ARGUMENT, "ERROR_REASON_INVALID_ARGUMENT"
    )
    got = (await stub.GetPersonalSettings(pb.GetPersonalSettingsRequest(), **as_user("carol"))).settings
    assert got.avatar == AVATAR
    cleared = (await update(Struct(), ["avatar"])).settings
    assert not cleared.HasField("avatar")


async def test_concurrent_updates_of_one_user_all_land(stub: Stub) -> None:
    fields = {
        "display_name": memory_pb2.PersonalSettings(display_name="Bob"),
        "default_model": memory_pb2.PersonalSettings(default_model="model-a"),
        "active_instruction_page_id": memory_pb2.PersonalSettings(active_instruction_page_id="page"),
        "chat_mode": memory_pb2.PersonalSettings(chat_mode=memory_pb2.CHAT_MODE_FLOATING),
    }
    await asyncio.gather(
        *(
            stub.UpdatePersonalSettings(
                pb.UpdatePersonalSettingsRequest(settings=value, update_mask=FieldMask(paths=[path])),
                **as_user("bob"),
            )
            for path, value in fields.items()
        )
    )
    got = (await stub.GetPersonalSettings(pb.GetPersonalSettingsRequest(), **as_user("bob"))).settings
    assert (got.display_name, got.default_model, got.active_instruction_page_id, got.chat_mode) == (
        "Bob",
        "model-a",
        "page",
        memory_pb2.CHAT_MODE_FLOATING,
    )


async def test_settings_are_private_to_their_user(stub: Stub) -> None:
    await stub.UpdatePersonalSettings(
        pb.UpdatePersonalSettingsRequest(
            settings=memory_pb2.PersonalSettings(
                user_id="bob", display_name="Alice", default_model="secret-model"
            ),
            update_mask=FieldMask(paths=["display_name", "default_model"]),
        ),
        **as_user("alice"),
    )
    bob = (await stub.GetPersonalSettings(pb.GetPersonalSettingsRequest(), **as_user("bob"))).settings
    assert bob == memory_pb2.PersonalSettings(user_id="bob", chat_mode=memory_pb2.CHAT_MODE_SIDEBAR)
    alice = (await stub.GetPersonalSettings(pb.GetPersonalSettingsRequest(), **as_user("alice"))).settings
    assert (alice.user_id, alice.display_name, alice.default_model) == ("alice", "Alice", "secret-model")


async def test_bad_settings_updates_are_rejected(stub: Stub) -> None:
    def update(paths: list[str], **fields: Any) -> Any:
        request = pb.UpdatePersonalSettingsRequest(
            settings=memory_pb2.PersonalSettings(**fields), update_mask=FieldMask(paths=paths)
        )
        return stub.UpdatePersonalSettings(request, **as_user("alice"))

    await expect_error(update([], display_name="x"), *INVALID)
    await expect_error(update(["nickname"], display_name="x"), *INVALID)
    await expect_error(update(["user_id"], user_id="bob"), *INVALID)
    await expect_error(update(["display_name", "bogus"], display_name="x"), *INVALID)
    # An avatar is an object by the contract's type; the old string's path is gone.
    await expect_error(update(["avatar_json"], avatar=AVATAR), *INVALID)
    await expect_error(update(["avatar"], avatar=HUGE_AVATAR), *TOO_LARGE)
    await expect_error(update(["chat_mode"]), *INVALID)
    await expect_error(update(["chat_mode"], chat_mode=9), *INVALID)
    await expect_error(update(["instruction_page_ids"], instruction_page_ids=["p", " "]), *INVALID)
    await expect_error(update(["display_name"], display_name="n" * 101), *TOO_LARGE)
    # None of them wrote anything; 100 characters and an unmasked bad field are fine.
    got = (await stub.GetPersonalSettings(pb.GetPersonalSettingsRequest(), **as_user("alice"))).settings
    assert got == memory_pb2.PersonalSettings(user_id="alice", chat_mode=memory_pb2.CHAT_MODE_SIDEBAR)
    ok = await update(["display_name"], display_name="n" * 100, avatar=HUGE_AVATAR)
    assert ok.settings.display_name == "n" * 100 and not ok.settings.HasField("avatar")


async def test_personal_notes_are_private_to_their_owner(stub: Stub) -> None:
    request = pb.CreateNoteRequest(
        request_id="same-key", note=note("Alice's secret plan", "launch on monday", project_id="")
    )
    alice = (await stub.CreateNote(request, **as_user("alice"))).note
    bob = (await stub.CreateNote(request, **as_user("bob"))).note
    assert alice.id != bob.id  # idempotency keys are per author
    assert alice.project_id != bob.project_id
    for user, expected in (("alice", alice.id), ("bob", bob.id)):
        recalled = await stub.RecallNotes(
            pb.RecallNotesRequest(project_id="", query="secret plan monday"), **as_user(user)
        )
        assert [r.note.id for r in recalled.notes] == [expected]
    # Another user's personal project, named by its id, reads like a missing one.
    await expect_error(
        stub.RecallNotes(pb.RecallNotesRequest(project_id=alice.project_id, query="plan"), **as_user("bob")),
        grpc.StatusCode.NOT_FOUND,
        "ERROR_REASON_NOT_FOUND",
    )
    await expect_error(
        stub.RecallNotes(pb.RecallNotesRequest(query="plan"), timeout=10),
        grpc.StatusCode.UNAUTHENTICATED,
        "ERROR_REASON_UNAUTHENTICATED",
    )
