"""Conversations: rename, pin, automatic title, archive, search; another
user's conversation is NOT_FOUND in every RPC."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest
from google.protobuf.field_mask_pb2 import FieldMask

from switchboard.threads.v1 import threads_pb2, threads_service_pb2_grpc
from switchboard.threads.v1 import threads_service_pb2 as pb
from tests.service.harness import as_user, expect_error

Stub = threads_service_pb2_grpc.ThreadsServiceStub


@pytest.fixture
def stub(threads_channel: grpc.aio.Channel) -> Stub:
    return Stub(threads_channel)


async def create(stub: Stub, title: str = "", user: str = "alice") -> threads_pb2.Conversation:
    return (
        await stub.CreateConversation(pb.CreateConversationRequest(title=title), **as_user(user))
    ).conversation


def update(conversation_id: str, paths: list[str], **fields: Any) -> pb.UpdateConversationRequest:
    return pb.UpdateConversationRequest(
        conversation=threads_pb2.Conversation(id=conversation_id, **fields),
        update_mask=FieldMask(paths=paths),
    )


async def titles(stub: Stub, **request: Any) -> list[str]:
    listed = await stub.ListConversations(pb.ListConversationsRequest(**request), **as_user("alice"))
    return [c.title for c in listed.conversations]


async def test_auto_title_never_overwrites_a_manual_one(stub: Stub) -> None:
    untitled = await create(stub)
    request = "Write the weekly status report for the platform team, with the incidents of Monday and Tuesday"
    titled = await stub.SetAutoTitle(
        pb.SetAutoTitleRequest(conversation_id=untitled.id, request_text=request), **as_user("alice")
    )
    assert titled.applied and titled.conversation.title_auto
    assert titled.conversation.title == "Write the weekly status report for the platform team, with…"
    # Renaming makes the title manual; a later automatic title leaves it.
    renamed = await stub.UpdateConversation(
        update(untitled.id, ["title"], title="Status"), **as_user("alice")
    )
    assert renamed.conversation.title == "Status" and not renamed.conversation.title_auto
    again = await stub.SetAutoTitle(
        pb.SetAutoTitleRequest(conversation_id=untitled.id, title="Generated"), **as_user("alice")
    )
    assert not again.applied and again.conversation.title == "Status"
    # A conversation created with a title keeps it too.
    named = await create(stub, "Mine")
    kept = await stub.SetAutoTitle(
        pb.SetAutoTitleRequest(conversation_id=named.id, request_text="other words"), **as_user("alice")
    )
    assert not kept.applied and kept.conversation.title == "Mine"


async def test_list_puts_pinned_first_searches_titles_and_hides_archived(stub: Stub) -> None:
    first = await create(stub, "Budget review")
    await create(stub, "Roadmap 100% draft")
    third = await create(stub, "budget forecast")
    assert await titles(stub) == ["budget forecast", "Roadmap 100% draft", "Budget review"]
    await stub.UpdateConversation(update(first.id, ["pinned"], pinned=True), **as_user("alice"))
    assert await titles(stub) == ["Budget review", "budget forecast", "Roadmap 100% draft"]
    assert await titles(stub, title_query="BUDGET") == ["Budget review", "budget forecast"]
    assert await titles(stub, title_query="100%") == ["Roadmap 100% draft"]
    assert await titles(stub, title_query="0% d") == ["Roadmap 100% draft"]
    assert await titles(stub, title_query="_") == []
    archived = await stub.ArchiveConversation(
        pb.ArchiveConversationRequest(conversation_id=third.id), **as_user("alice")
    )
    assert archived.conversation.archived
    assert await titles(stub, title_query="budget") == ["Budget review"]
    assert await titles(stub, title_query="budget", include_archived=True) == [
        "Budget review",
        "budget forecast",
    ]
    # Still readable by its owner.
    got = await stub.GetConversation(pb.GetConversationRequest(conversation_id=third.id), **as_user("alice"))
    assert got.conversation.archived
    # Paging through a filtered list.
    page = await stub.ListConversations(
        pb.ListConversationsRequest(page_size=1, include_archived=True, title_query="budget"),
        **as_user("alice"),
    )
    rest = await stub.ListConversations(
        pb.ListConversationsRequest(
            page_size=1, include_archived=True, title_query="budget", page_token=page.next_page_token
        ),
        **as_user("alice"),
    )
    assert [c.title for c in page.conversations] + [c.title for c in rest.conversations] == [
        "Budget review",
        "budget forecast",
    ]


async def test_bad_updates_are_invalid_argument(stub: Stub) -> None:
    conversation = await create(stub)
    for request in [
        update(conversation.id, []),
        update(conversation.id, ["user_id"]),
        pb.SetAutoTitleRequest(conversation_id=conversation.id, request_text="   "),
    ]:
        call: Callable[..., Awaitable[Any]] = (
            stub.SetAutoTitle if isinstance(request, pb.SetAutoTitleRequest) else stub.UpdateConversation
        )
        await expect_error(
            call(request, **as_user("alice")),
            grpc.StatusCode.INVALID_ARGUMENT,
            "ERROR_REASON_INVALID_ARGUMENT",
        )
    await expect_error(
        stub.UpdateConversation(update(conversation.id, ["title"], title="t" * 500), **as_user("alice")),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_TOO_LARGE",
    )


async def test_another_users_conversation_is_not_found_in_every_rpc(stub: Stub) -> None:
    mine = await create(stub, "Alice's")
    entry = threads_pb2.Entry(role=threads_pb2.ROLE_USER, content="hi")
    calls: list[tuple[str, Callable[[str], Awaitable[Any]]]] = [
        (
            "GetConversation",
            lambda cid: stub.GetConversation(
                pb.GetConversationRequest(conversation_id=cid), **as_user("bob")
            ),
        ),
        (
            "UpdateConversation",
            lambda cid: stub.UpdateConversation(update(cid, ["pinned"], pinned=True), **as_user("bob")),
        ),
        (
            "SetAutoTitle",
            lambda cid: stub.SetAutoTitle(
                pb.SetAutoTitleRequest(conversation_id=cid, request_text="x"), **as_user("bob")
            ),
        ),
        (
            "ArchiveConversation",
            lambda cid: stub.ArchiveConversation(
                pb.ArchiveConversationRequest(conversation_id=cid), **as_user("bob")
            ),
        ),
        (
            "AppendEntries",
            lambda cid: stub.AppendEntries(
                pb.AppendEntriesRequest(thread_id=cid, entries=[entry]), **as_user("bob")
            ),
        ),
        ("ListEntries", lambda cid: stub.ListEntries(pb.ListEntriesRequest(thread_id=cid), **as_user("bob"))),
        (
            "ListEntries(for_conversation)",
            lambda cid: stub.ListEntries(
                pb.ListEntriesRequest(
                    for_conversation=pb.ListEntriesRequest.ForConversation(conversation_id=cid)
                ),
                **as_user("bob"),
            ),
        ),
        (
            "ListEntries(for_correlation)",
            lambda cid: stub.ListEntries(
                pb.ListEntriesRequest(
                    for_correlation=pb.ListEntriesRequest.ForCorrelation(thread_id=cid, correlation_id="c")
                ),
                **as_user("bob"),
            ),
        ),
    ]
    for name, call in calls:
        for conversation_id in [mine.id, "no-such-id"]:
            error = await expect_error(
                call(conversation_id), grpc.StatusCode.NOT_FOUND, "ERROR_REASON_NOT_FOUND"
            )
            assert error.details(), name
    listed = await stub.ListConversations(
        pb.ListConversationsRequest(include_archived=True), **as_user("bob")
    )
    assert list(listed.conversations) == []
    # Nothing Bob tried changed Alice's conversation.
    got = await stub.GetConversation(pb.GetConversationRequest(conversation_id=mine.id), **as_user("alice"))
    assert (
        got.conversation.title == "Alice's" and not got.conversation.pinned and not got.conversation.archived
    )
    entries = await stub.ListEntries(
        pb.ListEntriesRequest(
            for_conversation=pb.ListEntriesRequest.ForConversation(conversation_id=mine.id)
        ),
        **as_user("alice"),
    )
    assert list(entries.entries) == [] and not entries.partial_view


async def test_update_conversation_replaces_the_allowed_sources(stub: Any) -> None:
    created = await stub.CreateConversation(
        pb.CreateConversationRequest(
            allowed_sources=threads_pb2.AllowedSources(workspace=True, connectors=["mail"])
        ),
        **as_user("alice"),
    )
    conversation = threads_pb2.Conversation(
        id=created.conversation.id,
        allowed_sources=threads_pb2.AllowedSources(workspace=False, mcp_servers=["calc"]),
    )
    updated = await stub.UpdateConversation(
        pb.UpdateConversationRequest(
            conversation=conversation, update_mask=FieldMask(paths=["allowed_sources"])
        ),
        **as_user("alice"),
    )
    sources = updated.conversation.allowed_sources
    assert (sources.workspace, list(sources.connectors), list(sources.mcp_servers)) == (False, [], ["calc"])
    got = await stub.GetConversation(
        pb.GetConversationRequest(conversation_id=created.conversation.id), **as_user("alice")
    )
    assert list(got.conversation.allowed_sources.mcp_servers) == ["calc"]


async def test_a_save_of_some_sources_keeps_the_others(stub: Any) -> None:
    """The page saves one source at a time: ticking a connector must not
    turn memory back on, nor switching memory off untick the workspace."""
    created = await stub.CreateConversation(
        pb.CreateConversationRequest(
            allowed_sources=threads_pb2.AllowedSources(workspace=False, connectors=["mail"], memory=False)
        ),
        **as_user("alice"),
    )
    conversation_id = created.conversation.id

    async def update(paths: list[str], **sources: Any) -> threads_pb2.AllowedSources:
        conversation = threads_pb2.Conversation(
            id=conversation_id, allowed_sources=threads_pb2.AllowedSources(**sources)
        )
        request = pb.UpdateConversationRequest(conversation=conversation, update_mask=FieldMask(paths=paths))
        updated = await stub.UpdateConversation(request, **as_user("alice"))
        return updated.conversation.allowed_sources

    def shown(sources: threads_pb2.AllowedSources) -> tuple[bool, list[str], list[str], bool]:
        memory = sources.memory if sources.HasField("memory") else True
        return sources.workspace, list(sources.connectors), list(sources.mcp_servers), memory

    kept = await update(
        ["allowed_sources.connectors", "allowed_sources.mcp_servers"], connectors=["mail", "drive"]
    )
    assert shown(kept) == (False, ["mail", "drive"], [], False)
    assert shown(await update(["allowed_sources.workspace"], workspace=True)) == (
        True,
        ["mail", "drive"],
        [],
        False,
    )
    # Memory named but left unset is its default: on.
    assert shown(await update(["allowed_sources.memory"])) == (True, ["mail", "drive"], [], True)
    # Two saves of different sources at once both land.
    await asyncio.gather(
        update(["allowed_sources.memory"], memory=False),
        update(["allowed_sources.mcp_servers"], mcp_servers=["calc"]),
    )
    got = await stub.GetConversation(
        pb.GetConversationRequest(conversation_id=conversation_id), **as_user("alice")
    )
    assert shown(got.conversation.allowed_sources) == (True, ["mail", "drive"], ["calc"], False)
    # The whole and one of its fields in one mask: refused, nothing written.
    await expect_error(
        update(["allowed_sources", "allowed_sources.memory"], memory=True),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    await expect_error(
        update(["allowed_sources.everything"]),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    # Another user's conversation is exactly a missing one.
    conversation = threads_pb2.Conversation(id=conversation_id, allowed_sources=threads_pb2.AllowedSources())
    await expect_error(
        stub.UpdateConversation(
            pb.UpdateConversationRequest(
                conversation=conversation, update_mask=FieldMask(paths=["allowed_sources.memory"])
            ),
            **as_user("bob"),
        ),
        grpc.StatusCode.NOT_FOUND,
        "ERROR_REASON_NOT_FOUND",
    )
    got = await stub.GetConversation(
        pb.GetConversationRequest(conversation_id=conversation_id), **as_user("alice")
    )
    assert shown(got.conversation.allowed_sources) == (True, ["mail", "drive"], ["calc"], False)


async def test_cached_owner_still_refuses_another_user_and_keeps_archived_conversations_usable(
    stub: Stub,
) -> None:
    """The owner of a conversation is cached once the service has seen it:
    another user is still NOT_FOUND and writes nothing, and an archived
    conversation takes and shows entries as it did before archiving."""
    mine = await create(stub, "Cached")
    entry = threads_pb2.Entry(role=threads_pb2.ROLE_USER, content="first")
    # Alice's append and read put the conversation's owner in the cache.
    await stub.AppendEntries(pb.AppendEntriesRequest(thread_id=mine.id, entries=[entry]), **as_user("alice"))
    await stub.ListEntries(pb.ListEntriesRequest(thread_id=mine.id), **as_user("alice"))
    bob = threads_pb2.Entry(role=threads_pb2.ROLE_USER, content="bob was here")
    for call in [
        stub.AppendEntries(pb.AppendEntriesRequest(thread_id=mine.id, entries=[bob]), **as_user("bob")),
        stub.ListEntries(pb.ListEntriesRequest(thread_id=mine.id), **as_user("bob")),
        stub.ListEntries(
            pb.ListEntriesRequest(
                for_conversation=pb.ListEntriesRequest.ForConversation(conversation_id=mine.id)
            ),
            **as_user("bob"),
        ),
        stub.ListEntries(
            pb.ListEntriesRequest(
                for_correlation=pb.ListEntriesRequest.ForCorrelation(thread_id=mine.id, correlation_id="c")
            ),
            **as_user("bob"),
        ),
    ]:
        await expect_error(call, grpc.StatusCode.NOT_FOUND, "ERROR_REASON_NOT_FOUND")
    await stub.ArchiveConversation(pb.ArchiveConversationRequest(conversation_id=mine.id), **as_user("alice"))
    later = threads_pb2.Entry(role=threads_pb2.ROLE_ASSISTANT, content="after archiving")
    appended = await stub.AppendEntries(
        pb.AppendEntriesRequest(thread_id=mine.id, entries=[later]), **as_user("alice")
    )
    assert [e.sequence for e in appended.entries] == [2]
    listed = await stub.ListEntries(
        pb.ListEntriesRequest(
            for_conversation=pb.ListEntriesRequest.ForConversation(conversation_id=mine.id)
        ),
        **as_user("alice"),
    )
    assert [e.content for e in listed.entries] == ["first", "after archiving"]
    got = await stub.GetConversation(pb.GetConversationRequest(conversation_id=mine.id), **as_user("alice"))
    assert got.conversation.archived


async def test_metadata_is_stored_replaced_whole_and_bounded(stub: Stub) -> None:
    created = await stub.CreateConversation(
        pb.CreateConversationRequest(metadata={"topic": "déploiement", "team": "ops"}), **as_user("alice")
    )
    assert dict(created.conversation.metadata) == {"topic": "déploiement", "team": "ops"}
    replaced = await stub.UpdateConversation(
        update(created.conversation.id, ["metadata"], metadata={"topic": "release"}), **as_user("alice")
    )
    assert dict(replaced.conversation.metadata) == {"topic": "release"}
    read = await stub.GetConversation(
        pb.GetConversationRequest(conversation_id=created.conversation.id), **as_user("alice")
    )
    assert dict(read.conversation.metadata) == {"topic": "release"} and read.conversation.title == ""
    for metadata in [{f"k{n}": "v" for n in range(17)}, {"k" * 65: "v"}, {"k": "v" * 513}]:
        await expect_error(
            stub.UpdateConversation(
                update(created.conversation.id, ["metadata"], metadata=metadata), **as_user("alice")
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "ERROR_REASON_INVALID_ARGUMENT",
        )


async def test_a_page_of_entries_can_start_at_an_entry_either_way(stub: Stub) -> None:
    conversation = await create(stub)
    appended = await stub.AppendEntries(
        pb.AppendEntriesRequest(
            thread_id=conversation.id,
            entries=[threads_pb2.Entry(role=threads_pb2.ROLE_USER, content=f"m{n}") for n in range(5)],
        ),
        **as_user("alice"),
    )
    ids = [e.id for e in appended.entries]

    async def page(descending: bool, token: str = "") -> pb.ListEntriesResponse:
        return await stub.ListEntries(
            pb.ListEntriesRequest(
                for_conversation=pb.ListEntriesRequest.ForConversation(conversation_id=conversation.id),
                start_entry_id=ids[2],
                descending=descending,
                page_size=2,
                page_token=token,
            ),
            **as_user("alice"),
        )

    forward = await page(False)
    assert [e.content for e in forward.entries] == ["m2", "m3"]
    assert [e.content for e in (await page(False, forward.next_page_token)).entries] == ["m4"]
    assert [e.content for e in (await page(True)).entries] == ["m2", "m1"]
    # An entry of another thread, or none, names no start.
    other = await create(stub)
    for foreign in (ids[0], "no-such-entry"):
        await expect_error(
            stub.ListEntries(
                pb.ListEntriesRequest(
                    for_conversation=pb.ListEntriesRequest.ForConversation(conversation_id=other.id),
                    start_entry_id=foreign,
                ),
                **as_user("alice"),
            ),
            grpc.StatusCode.NOT_FOUND,
            "ERROR_REASON_NOT_FOUND",
        )
