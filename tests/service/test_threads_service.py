"""The threads service in-process, called through its real stub; on
PostgreSQL also through PgBouncer in transaction mode (its settings then
say no prepared statements)."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from switchboard.threads.v1 import threads_pb2, threads_service_pb2_grpc
from switchboard.threads.v1 import threads_service_pb2 as pb
from tests.databases import ALSO_THROUGH_PGBOUNCER
from tests.service.harness import as_user, expect_error, sequences_both_ways

pytestmark = ALSO_THROUGH_PGBOUNCER

Stub = threads_service_pb2_grpc.ThreadsServiceStub


@pytest.fixture
def stub(threads_channel: grpc.aio.Channel) -> Stub:
    return Stub(threads_channel)


async def test_conversation_is_private_to_its_user(stub: Stub) -> None:
    created = await stub.CreateConversation(pb.CreateConversationRequest(title="Plans"), **as_user("alice"))
    conversation_id = created.conversation.id
    got = await stub.GetConversation(
        pb.GetConversationRequest(conversation_id=conversation_id), **as_user("alice")
    )
    assert got.conversation.title == "Plans" and got.conversation.allowed_sources.workspace
    # Bob gets exactly what he gets for an id that does not exist.
    await expect_error(
        stub.GetConversation(pb.GetConversationRequest(conversation_id=conversation_id), **as_user("bob")),
        grpc.StatusCode.NOT_FOUND,
        "ERROR_REASON_NOT_FOUND",
    )
    await expect_error(
        stub.AppendEntries(
            pb.AppendEntriesRequest(
                thread_id=conversation_id,
                entries=[threads_pb2.Entry(role=threads_pb2.ROLE_USER, content="x")],
            ),
            **as_user("bob"),
        ),
        grpc.StatusCode.NOT_FOUND,
        "ERROR_REASON_NOT_FOUND",
    )
    listed = await stub.ListConversations(pb.ListConversationsRequest(), **as_user("bob"))
    assert list(listed.conversations) == []


async def test_create_conversation_is_idempotent_on_request_id(stub: Stub) -> None:
    request = pb.CreateConversationRequest(request_id="req-1", title="Once")
    first, second = await asyncio.gather(
        stub.CreateConversation(request, **as_user("alice")),
        stub.CreateConversation(request, **as_user("alice")),
    )
    assert first.conversation.id == second.conversation.id
    listed = await stub.ListConversations(pb.ListConversationsRequest(), **as_user("alice"))
    assert [c.id for c in listed.conversations] == [first.conversation.id]


async def test_append_is_atomic_sequenced_and_idempotent(stub: Stub) -> None:
    conversation = (
        await stub.CreateConversation(pb.CreateConversationRequest(), **as_user("alice"))
    ).conversation
    entries = [
        threads_pb2.Entry(role=threads_pb2.ROLE_USER, content="question", correlation_id="c1"),
        threads_pb2.Entry(role=threads_pb2.ROLE_ASSISTANT, content="answer", correlation_id="c1"),
    ]
    request = pb.AppendEntriesRequest(request_id="append-1", thread_id=conversation.id, entries=entries)
    first = await stub.AppendEntries(request, **as_user("alice"))
    retried = await stub.AppendEntries(request, **as_user("alice"))
    assert [e.sequence for e in first.entries] == [1, 2]
    assert [e.id for e in retried.entries] == [e.id for e in first.entries]
    # Concurrent appends get distinct consecutive sequence numbers.
    await asyncio.gather(
        *(
            stub.AppendEntries(
                pb.AppendEntriesRequest(
                    thread_id=conversation.id,
                    entries=[
                        threads_pb2.Entry(role=threads_pb2.ROLE_USER, content=f"m{i}", correlation_id="c2")
                    ],
                ),
                **as_user("alice"),
            )
            for i in range(10)
        )
    )
    page = await stub.ListEntries(
        pb.ListEntriesRequest(thread_id=conversation.id, page_size=5), **as_user("alice")
    )
    assert [e.sequence for e in page.entries] == [1, 2, 3, 4, 5] and page.next_page_token
    rest = await stub.ListEntries(
        pb.ListEntriesRequest(thread_id=conversation.id, page_size=50, page_token=page.next_page_token),
        **as_user("alice"),
    )
    assert [e.sequence for e in rest.entries] == list(range(6, 13)) and not rest.next_page_token
    correlated = await stub.ListEntries(
        pb.ListEntriesRequest(thread_id=conversation.id, correlation_id="c1"), **as_user("alice")
    )
    assert [e.content for e in correlated.entries] == ["question", "answer"]
    tail = await stub.ListEntries(
        pb.ListEntriesRequest(thread_id=conversation.id, descending=True, page_size=2), **as_user("alice")
    )
    assert [e.sequence for e in tail.entries] == [12, 11]


async def test_a_conversation_read_newest_first_pages_back_to_its_first_entry(stub: Stub) -> None:
    """What the web page does with a long conversation: the newest page
    first, each next_page_token reaching further back, to the first entry."""
    conversation = (
        await stub.CreateConversation(pb.CreateConversationRequest(), **as_user("alice"))
    ).conversation
    for start in range(0, 250, 100):
        await stub.AppendEntries(
            pb.AppendEntriesRequest(
                thread_id=conversation.id,
                entries=[
                    threads_pb2.Entry(role=threads_pb2.ROLE_USER, content=f"m{n}")
                    for n in range(start, min(start + 100, 250))
                ],
            ),
            **as_user("alice"),
        )
    view = pb.ListEntriesRequest.ForConversation(conversation_id=conversation.id)
    newest = await stub.ListEntries(
        pb.ListEntriesRequest(for_conversation=view, descending=True, page_size=100), **as_user("alice")
    )
    assert [e.sequence for e in newest.entries] == list(range(250, 150, -1))
    assert newest.next_page_token and not newest.previous_page_token
    request = pb.ListEntriesRequest(for_conversation=view, descending=True, page_size=100)
    forward, backward = await sequences_both_ways(stub.ListEntries, request, "alice")
    assert forward == backward == list(range(250, 0, -1))
    # A newest-first token read oldest first is another view's: refused, not misread.
    await expect_error(
        stub.ListEntries(
            pb.ListEntriesRequest(for_conversation=view, page_token=newest.next_page_token),
            **as_user("alice"),
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    await expect_error(
        stub.ListEntries(pb.ListEntriesRequest(for_conversation=view, descending=True), **as_user("bob")),
        grpc.StatusCode.NOT_FOUND,
        "ERROR_REASON_NOT_FOUND",
    )


async def test_bad_input_is_invalid_argument(stub: Stub) -> None:
    conversation = (
        await stub.CreateConversation(pb.CreateConversationRequest(), **as_user("alice"))
    ).conversation
    await expect_error(
        stub.AppendEntries(pb.AppendEntriesRequest(thread_id=conversation.id), **as_user("alice")),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    await expect_error(
        stub.CreateConversation(pb.CreateConversationRequest(title="t" * 500), **as_user("alice")),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_TOO_LARGE",
    )
    await expect_error(
        stub.ListEntries(
            pb.ListEntriesRequest(thread_id=conversation.id, page_token="%%%"), **as_user("alice")
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    await expect_error(
        stub.ListConversations(pb.ListConversationsRequest(), timeout=10),
        grpc.StatusCode.UNAUTHENTICATED,
        "ERROR_REASON_UNAUTHENTICATED",
    )


async def test_agents_registry(stub: Stub) -> None:
    for slug in ["qa", "architect", "main"]:
        await stub.CreateAgent(
            pb.CreateAgentRequest(agent=threads_pb2.Agent(id=slug, persona=f"{slug} persona")),
            **as_user("alice"),
        )
    first = await stub.ListAgents(pb.ListAgentsRequest(page_size=2), **as_user("alice"))
    second = await stub.ListAgents(
        pb.ListAgentsRequest(page_size=2, page_token=first.next_page_token), **as_user("alice")
    )
    assert [a.id for a in first.agents] + [a.id for a in second.agents] == ["architect", "main", "qa"]
    await expect_error(
        stub.GetAgent(pb.GetAgentRequest(agent_id="nobody"), **as_user("alice")),
        grpc.StatusCode.NOT_FOUND,
        "ERROR_REASON_NOT_FOUND",
    )
    await expect_error(
        stub.CreateAgent(pb.CreateAgentRequest(agent=threads_pb2.Agent(id="Bad Id!")), **as_user("alice")),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
