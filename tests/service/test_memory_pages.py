"""PagesService in-process, through its real stub: pages, ACL, versions,
restore, and the errors of each (on SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from google.protobuf.field_mask_pb2 import FieldMask

from switchboard.memory.v1 import pages_pb2, pages_service_pb2_grpc
from switchboard.memory.v1 import pages_service_pb2 as pb
from tests.service.harness import as_user, expect_error

Stub = pages_service_pb2_grpc.PagesServiceStub
INVALID = (grpc.StatusCode.INVALID_ARGUMENT, "ERROR_REASON_INVALID_ARGUMENT")
TOO_LARGE = (grpc.StatusCode.INVALID_ARGUMENT, "ERROR_REASON_TOO_LARGE")
NOT_FOUND = (grpc.StatusCode.NOT_FOUND, "ERROR_REASON_NOT_FOUND")
PRECONDITION = (grpc.StatusCode.FAILED_PRECONDITION, "ERROR_REASON_FAILED_PRECONDITION")


@pytest.fixture
def memory_options() -> dict[str, Any]:
    return {"max_page_chars": 2000}


@pytest.fixture
def stub(memory_channel: grpc.aio.Channel) -> Stub:
    return Stub(memory_channel)


async def create(
    stub: Stub,
    user: str,
    title: str,
    body: str,
    readers: list[str] | None = None,
    editors: list[str] | None = None,
) -> pages_pb2.Page:
    page = pages_pb2.Page(
        title=title, body=body, reader_user_ids=readers or [], editor_user_ids=editors or []
    )
    return (await stub.CreatePage(pb.CreatePageRequest(page=page), **as_user(user))).page


async def edit(stub: Stub, user: str, page_id: str, body: str, expected: int = 0) -> pages_pb2.Page:
    request = pb.UpdatePageRequest(
        page=pages_pb2.Page(id=page_id, body=body),
        update_mask=FieldMask(paths=["body"]),
        expected_version=expected,
    )
    return (await stub.UpdatePage(request, **as_user(user))).page


async def versions(stub: Stub, user: str, page_id: str, page_size: int = 0) -> list[pages_pb2.PageVersion]:
    out: list[pages_pb2.PageVersion] = []
    token = ""
    while True:
        request = pb.ListPageVersionsRequest(page_id=page_id, page_size=page_size, page_token=token)
        response = await stub.ListPageVersions(request, **as_user(user))
        out.extend(response.versions)
        token = response.next_page_token
        if not token:
            return out


async def test_create_get_and_idempotent_create(stub: Stub) -> None:
    page = await create(
        stub, "alice", "  Roadmap ", "Q3: export", readers=["bob", "alice"], editors=["carol", "bob"]
    )
    assert (page.title, page.body, page.version, page.owner_user_id) == ("Roadmap", "Q3: export", 1, "alice")
    # The owner is implied; a user listed as both is an editor.
    assert list(page.reader_user_ids) == [] and list(page.editor_user_ids) == ["bob", "carol"]
    got = (await stub.GetPage(pb.GetPageRequest(page_id=page.id), **as_user("carol"))).page
    assert got == page
    request = pb.CreatePageRequest(request_id="r-1", page=pages_pb2.Page(title="Once", body="x"))
    first = (await stub.CreatePage(request, **as_user("alice"))).page
    again = (await stub.CreatePage(request, **as_user("alice"))).page
    assert first.id == again.id
    # The same request id of another user is another request.
    other = (await stub.CreatePage(request, **as_user("bob"))).page
    assert other.id != first.id and other.owner_user_id == "bob"


async def test_every_edit_is_a_new_version_and_history_is_paged_newest_first(stub: Stub) -> None:
    page = await create(stub, "alice", "Notes", "v1")
    for n in range(2, 8):
        edited = await edit(stub, "alice", page.id, f"v{n}")
        assert edited.version == n and edited.body == f"v{n}"
    renamed = await stub.UpdatePage(
        pb.UpdatePageRequest(
            page=pages_pb2.Page(id=page.id, title="Renamed"), update_mask=FieldMask(paths=["title"])
        ),
        **as_user("alice"),
    )
    assert (renamed.page.version, renamed.page.title, renamed.page.body) == (8, "Renamed", "v7")
    history = await versions(stub, "alice", page.id, page_size=3)
    assert [v.version for v in history] == [8, 7, 6, 5, 4, 3, 2, 1]
    assert [v.body for v in history][-2:] == ["v2", "v1"] and history[0].title == "Renamed"
    assert all(v.author_user_id == "alice" for v in history)
    old = await stub.GetPageVersion(pb.GetPageVersionRequest(page_id=page.id, version=3), **as_user("alice"))
    assert (old.version.body, old.version.title) == ("v3", "Notes")


async def test_expected_version_guards_the_edit(stub: Stub) -> None:
    page = await create(stub, "alice", "Plan", "one")
    await edit(stub, "alice", page.id, "two", expected=1)
    error = await expect_error(edit(stub, "alice", page.id, "three", expected=1), *PRECONDITION)
    assert "at version 2, not 1" in (error.details() or "")
    current = (await stub.GetPage(pb.GetPageRequest(page_id=page.id), **as_user("alice"))).page
    assert (current.version, current.body) == (2, "two")


async def test_concurrent_edits_each_make_their_own_version(stub: Stub) -> None:
    page = await create(stub, "alice", "Busy", "0")
    results = await asyncio.gather(*(edit(stub, "alice", page.id, f"edit {i}") for i in range(6)))
    assert sorted(p.version for p in results) == [2, 3, 4, 5, 6, 7]
    history = await versions(stub, "alice", page.id)
    assert [v.version for v in history] == [7, 6, 5, 4, 3, 2, 1]
    assert sorted(v.body for v in history[:-1]) == sorted(f"edit {i}" for i in range(6))


async def test_restore_writes_the_old_text_as_a_new_version(stub: Stub) -> None:
    page = await create(stub, "alice", "Guide", "first text")
    await edit(stub, "alice", page.id, "second text")
    restored = await stub.RestorePageVersion(
        pb.RestorePageVersionRequest(page_id=page.id, version=1), **as_user("alice")
    )
    assert (restored.page.version, restored.page.body) == (3, "first text")
    history = await versions(stub, "alice", page.id)
    assert [(v.version, v.body, v.restored_from_version) for v in history] == [
        (3, "first text", 1),
        (2, "second text", 0),
        (1, "first text", 0),
    ]
    await expect_error(
        stub.RestorePageVersion(pb.RestorePageVersionRequest(page_id=page.id, version=9), **as_user("alice")),
        *NOT_FOUND,
    )
    await expect_error(
        stub.RestorePageVersion(
            pb.RestorePageVersionRequest(page_id=page.id, version=1, expected_version=2), **as_user("alice")
        ),
        *PRECONDITION,
    )


async def test_acl_readers_editors_and_strangers(stub: Stub) -> None:
    page = await create(stub, "alice", "Shared", "text", readers=["bob"], editors=["carol"])
    # A reader reads but cannot edit; an editor edits; a stranger sees NOT_FOUND, like a missing id.
    assert (await stub.GetPage(pb.GetPageRequest(page_id=page.id), **as_user("bob"))).page.body == "text"
    error = await expect_error(edit(stub, "bob", page.id, "bob was here"), *PRECONDITION)
    assert "not edit" in (error.details() or "")
    assert (await edit(stub, "carol", page.id, "carol edit")).version == 2
    missing = await expect_error(
        stub.GetPage(pb.GetPageRequest(page_id="nope"), **as_user("dave")), *NOT_FOUND
    )
    stranger = await expect_error(
        stub.GetPage(pb.GetPageRequest(page_id=page.id), **as_user("dave")), *NOT_FOUND
    )
    assert stranger.details() == (missing.details() or "").replace("nope", page.id)
    await expect_error(versions(stub, "dave", page.id), *NOT_FOUND)
    await expect_error(edit(stub, "dave", page.id, "x"), *NOT_FOUND)
    # Only the owner changes the ACL; an editor cannot.
    acl = pb.SetPageAclRequest(page_id=page.id, reader_user_ids=["dave"], editor_user_ids=[])
    await expect_error(stub.SetPageAcl(acl, **as_user("carol")), *PRECONDITION)
    updated = (await stub.SetPageAcl(acl, **as_user("alice"))).page
    assert list(updated.reader_user_ids) == ["dave"] and list(updated.editor_user_ids) == []
    assert (await stub.GetPage(pb.GetPageRequest(page_id=page.id), **as_user("dave"))).page.version == 2
    await expect_error(stub.GetPage(pb.GetPageRequest(page_id=page.id), **as_user("bob")), *NOT_FOUND)
    await expect_error(edit(stub, "carol", page.id, "y"), *NOT_FOUND)


async def test_list_pages_shows_what_the_caller_can_read(stub: Stub) -> None:
    mine = [await create(stub, "alice", f"Mine {i}", "x") for i in range(3)]
    shared = await create(stub, "bob", "Bob's, shared", "x", readers=["alice"])
    await create(stub, "bob", "Bob's, private", "x")
    seen: list[pages_pb2.Page] = []
    token = ""
    while True:
        response = await stub.ListPages(
            pb.ListPagesRequest(page_size=2, page_token=token), **as_user("alice")
        )
        seen.extend(response.pages)
        token = response.next_page_token
        if not token:
            break
    assert [p.id for p in seen] == [shared.id, *(p.id for p in reversed(mine))]
    await expect_error(
        stub.ListPages(pb.ListPagesRequest(page_token="garbage!"), **as_user("alice")), *INVALID
    )


async def test_delete_is_owner_only_and_removes_everything(stub: Stub) -> None:
    page = await create(stub, "alice", "Temp", "x", editors=["bob"])
    await expect_error(
        stub.DeletePage(pb.DeletePageRequest(page_id=page.id), **as_user("bob")), *PRECONDITION
    )
    await stub.DeletePage(pb.DeletePageRequest(page_id=page.id), **as_user("alice"))
    await expect_error(stub.GetPage(pb.GetPageRequest(page_id=page.id), **as_user("alice")), *NOT_FOUND)
    await expect_error(
        stub.GetPageVersion(pb.GetPageVersionRequest(page_id=page.id, version=1), **as_user("alice")),
        *NOT_FOUND,
    )


async def test_bad_input(stub: Stub) -> None:
    alice = as_user("alice")
    await expect_error(
        stub.CreatePage(pb.CreatePageRequest(page=pages_pb2.Page(title=" ")), **alice), *INVALID
    )
    await expect_error(
        stub.CreatePage(pb.CreatePageRequest(page=pages_pb2.Page(title="t", body="x" * 2001)), **alice),
        *TOO_LARGE,
    )
    await expect_error(
        stub.CreatePage(pb.CreatePageRequest(page=pages_pb2.Page(title="t" * 201)), **alice), *TOO_LARGE
    )
    await expect_error(
        stub.CreatePage(pb.CreatePageRequest(page=pages_pb2.Page(title="t", reader_user_ids=[""])), **alice),
        *INVALID,
    )
    page = await create(stub, "alice", "P", "x")
    for paths in ([], ["owner_user_id"]):
        request = pb.UpdatePageRequest(
            page=pages_pb2.Page(id=page.id, body="y"), update_mask=FieldMask(paths=paths)
        )
        await expect_error(stub.UpdatePage(request, **alice), *INVALID)
    await expect_error(edit(stub, "alice", page.id, "x" * 2001), *TOO_LARGE)
    await expect_error(edit(stub, "alice", page.id, "y", expected=-1), *INVALID)
    await expect_error(
        stub.GetPageVersion(pb.GetPageVersionRequest(page_id=page.id, version=0), **alice), *INVALID
    )
    await expect_error(
        stub.ListPageVersions(pb.ListPageVersionsRequest(page_id=page.id, page_size=-1), **alice), *INVALID
    )
    await expect_error(
        stub.GetPage(pb.GetPageRequest(page_id=page.id)),
        grpc.StatusCode.UNAUTHENTICATED,
        "ERROR_REASON_UNAUTHENTICATED",
    )
