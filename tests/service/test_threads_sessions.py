"""Provider sessions keyed by (agent thread, provider): one live per key."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from switchboard.threads.v1 import threads_pb2, threads_service_pb2_grpc
from switchboard.threads.v1 import threads_service_pb2 as pb
from tests.service.harness import as_user, expect_error

Stub = threads_service_pb2_grpc.ThreadsServiceStub


@pytest.fixture
def stub(threads_channel: grpc.aio.Channel) -> Stub:
    return Stub(threads_channel)


async def agent_thread(stub: Stub, slug: str) -> str:
    await stub.CreateAgent(pb.CreateAgentRequest(agent=threads_pb2.Agent(id=slug)), **as_user("u"))
    response = await stub.EnsureAgentThread(pb.EnsureAgentThreadRequest(target_agent_id=slug), **as_user("u"))
    return response.thread.id


def bind(thread_id: str, provider: str, native: str, replace: bool = False) -> pb.BindProviderSessionRequest:
    return pb.BindProviderSessionRequest(
        agent_thread_id=thread_id, provider_id=provider, native_session_id=native, replace=replace
    )


async def test_bind_get_list_release(stub: Stub) -> None:
    qa = await agent_thread(stub, "qa")
    # Concurrent binds of the same native session: one row, the others are retries.
    responses = await asyncio.gather(
        *(stub.BindProviderSession(bind(qa, "claude", "s-1"), **as_user("u")) for _ in range(10))
    )
    assert len({r.session.id for r in responses}) == 1 and sum(r.created for r in responses) == 1
    await stub.BindProviderSession(bind(qa, "codex", "x-1"), **as_user("u"))
    got = await stub.GetProviderSession(
        pb.GetProviderSessionRequest(agent_thread_id=qa, provider_id="claude"), **as_user("u")
    )
    assert got.session.native_session_id == "s-1" and not got.session.HasField("release_time")
    # Another native id for a live key needs replace.
    await expect_error(
        stub.BindProviderSession(bind(qa, "claude", "s-2"), **as_user("u")),
        grpc.StatusCode.FAILED_PRECONDITION,
        "ERROR_REASON_FAILED_PRECONDITION",
    )
    replaced = await stub.BindProviderSession(bind(qa, "claude", "s-2", replace=True), **as_user("u"))
    assert replaced.created and replaced.session.native_session_id == "s-2"
    live = await stub.ListProviderSessions(pb.ListProviderSessionsRequest(agent_thread_id=qa), **as_user("u"))
    assert [(s.provider_id, s.native_session_id) for s in live.sessions] == [
        ("claude", "s-2"),
        ("codex", "x-1"),
    ]
    released = await stub.ReleaseProviderSession(
        pb.ReleaseProviderSessionRequest(agent_thread_id=qa, provider_id="codex"), **as_user("u")
    )
    assert released.session.HasField("release_time")
    await expect_error(
        stub.GetProviderSession(
            pb.GetProviderSessionRequest(agent_thread_id=qa, provider_id="codex"), **as_user("u")
        ),
        grpc.StatusCode.NOT_FOUND,
        "ERROR_REASON_NOT_FOUND",
    )
    await expect_error(
        stub.ReleaseProviderSession(
            pb.ReleaseProviderSessionRequest(agent_thread_id=qa, provider_id="codex"), **as_user("u")
        ),
        grpc.StatusCode.NOT_FOUND,
        "ERROR_REASON_NOT_FOUND",
    )
    # History, paginated.
    pages, token = [], ""
    while True:
        page = await stub.ListProviderSessions(
            pb.ListProviderSessionsRequest(
                agent_thread_id=qa, include_released=True, page_size=1, page_token=token
            ),
            **as_user("u"),
        )
        pages.extend((s.provider_id, s.native_session_id) for s in page.sessions)
        token = page.next_page_token
        if not token:
            break
    assert sorted(pages) == [("claude", "s-1"), ("claude", "s-2"), ("codex", "x-1")]
    # Sessions belong to their agent thread: another agent's thread has none.
    architect = await agent_thread(stub, "architect")
    other = await stub.ListProviderSessions(
        pb.ListProviderSessionsRequest(agent_thread_id=architect), **as_user("u")
    )
    assert list(other.sessions) == []


async def test_concurrent_replacing_binds_leave_one_live_session(stub: Stub) -> None:
    qa = await agent_thread(stub, "qa")
    results = await asyncio.gather(
        *(
            stub.BindProviderSession(bind(qa, "claude", f"s-{i}", replace=True), **as_user("u"))
            for i in range(10)
        ),
        return_exceptions=True,
    )
    assert any(not isinstance(r, BaseException) for r in results)
    live = await stub.ListProviderSessions(pb.ListProviderSessionsRequest(agent_thread_id=qa), **as_user("u"))
    assert len(live.sessions) == 1


async def test_bad_session_requests(stub: Stub) -> None:
    qa = await agent_thread(stub, "qa")
    conversation = (
        await stub.CreateConversation(pb.CreateConversationRequest(), **as_user("u"))
    ).conversation
    for request, code, reason in [
        (bind(qa, "", "s"), grpc.StatusCode.INVALID_ARGUMENT, "ERROR_REASON_INVALID_ARGUMENT"),
        (bind(qa, "claude", ""), grpc.StatusCode.INVALID_ARGUMENT, "ERROR_REASON_INVALID_ARGUMENT"),
        (bind("no-such-thread", "claude", "s"), grpc.StatusCode.NOT_FOUND, "ERROR_REASON_NOT_FOUND"),
    ]:
        await expect_error(stub.BindProviderSession(request, **as_user("u")), code, reason)
    # A conversation keeps its CLI session too, for its user only: to another
    # user it is missing.
    await expect_error(
        stub.BindProviderSession(bind(conversation.id, "claude", "s"), **as_user("someone-else")),
        grpc.StatusCode.NOT_FOUND,
        "ERROR_REASON_NOT_FOUND",
    )
    bound = await stub.BindProviderSession(bind(conversation.id, "claude", "s"), **as_user("u"))
    assert bound.session.native_session_id == "s"
