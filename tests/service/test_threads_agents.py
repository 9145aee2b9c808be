"""Agents and their one shared live thread, and the views over its log,
through the real stub on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from google.protobuf.field_mask_pb2 import FieldMask

from services.threads.server import build_server
from services.threads.settings import ThreadsSettings
from switchboard.threads.v1 import threads_pb2, threads_service_pb2_grpc
from switchboard.threads.v1 import threads_service_pb2 as pb
from tests.service.harness import as_user, expect_error, running, sequences_both_ways

Stub = threads_service_pb2_grpc.ThreadsServiceStub
Pair = pb.ListEntriesRequest.ForPair
ForAgent = pb.ListEntriesRequest.ForAgent
ForCorrelation = pb.ListEntriesRequest.ForCorrelation


@pytest.fixture
def stub(threads_channel: grpc.aio.Channel) -> Stub:
    return Stub(threads_channel)


async def create_agents(stub: Stub, *slugs: str) -> None:
    for slug in slugs:
        await stub.CreateAgent(pb.CreateAgentRequest(agent=threads_pb2.Agent(id=slug)), **as_user("u"))


def turn(requester: str, target: str, correlation: str, role: int, content: str) -> threads_pb2.Entry:
    return threads_pb2.Entry(
        requester=requester,
        target=target,
        correlation_id=correlation,
        role=role,  # type: ignore[arg-type]
        source=f"agent:{requester}" if role == threads_pb2.ROLE_USER else f"agent:{target}",
        content=content,
    )


async def test_update_agent_changes_only_the_masked_fields(stub: Stub) -> None:
    await stub.CreateAgent(
        pb.CreateAgentRequest(agent=threads_pb2.Agent(id="qa", persona="tester", model="m1")), **as_user("u")
    )
    updated = await stub.UpdateAgent(
        pb.UpdateAgentRequest(
            agent=threads_pb2.Agent(id="qa", persona="strict tester", model="ignored"),
            update_mask=FieldMask(paths=["persona"]),
        ),
        **as_user("u"),
    )
    assert updated.agent.persona == "strict tester" and updated.agent.model == "m1"
    got = await stub.GetAgent(pb.GetAgentRequest(agent_id="qa"), **as_user("u"))
    assert got.agent.persona == "strict tester"
    assert got.agent.update_time.ToDatetime() >= got.agent.create_time.ToDatetime()
    await expect_error(
        stub.UpdateAgent(
            pb.UpdateAgentRequest(agent=threads_pb2.Agent(id="qa"), update_mask=FieldMask(paths=["id"])),
            **as_user("u"),
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    await expect_error(
        stub.UpdateAgent(pb.UpdateAgentRequest(agent=threads_pb2.Agent(id="qa")), **as_user("u")),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    await expect_error(
        stub.UpdateAgent(
            pb.UpdateAgentRequest(
                agent=threads_pb2.Agent(id="nobody"), update_mask=FieldMask(paths=["model"])
            ),
            **as_user("u"),
        ),
        grpc.StatusCode.NOT_FOUND,
        "ERROR_REASON_NOT_FOUND",
    )


async def test_fifty_concurrent_ensures_from_two_servers_make_one_thread(db_url: str) -> None:
    """Two servers with their own database pools stand in for two processes."""
    settings = ThreadsSettings(port=0, database_url=db_url)
    async with running(build_server, settings) as (_, one), running(build_server, settings) as (_, two):
        stubs = [Stub(one), Stub(two)]
        await create_agents(stubs[0], "qa")
        responses = await asyncio.gather(
            *(
                stubs[i % 2].EnsureAgentThread(
                    pb.EnsureAgentThreadRequest(target_agent_id="qa"), **as_user("u")
                )
                for i in range(50)
            )
        )
    assert len({r.thread.id for r in responses}) == 1
    assert sum(r.created for r in responses) == 1
    assert responses[0].thread.agent_id == "qa"


async def test_an_unknown_injection_strategy_number_is_refused_and_nothing_stored(stub: Stub) -> None:
    """Proto3 enums take any number on the wire: one the engine does not
    know would be stored and then silently ignored."""
    unknown = threads_pb2.Agent(id="qa", injection_strategy=99)  # type: ignore[arg-type]
    await expect_error(
        stub.CreateAgent(pb.CreateAgentRequest(agent=unknown), **as_user("u")),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    await expect_error(
        stub.GetAgent(pb.GetAgentRequest(agent_id="qa"), **as_user("u")),
        grpc.StatusCode.NOT_FOUND,
        "ERROR_REASON_NOT_FOUND",
    )
    await create_agents(stub, "qa")
    await expect_error(
        stub.UpdateAgent(
            pb.UpdateAgentRequest(agent=unknown, update_mask=FieldMask(paths=["injection_strategy"])),
            **as_user("u"),
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    flag = threads_pb2.Agent(id="qa", injection_strategy=threads_pb2.INJECTION_STRATEGY_FLAG)
    updated = await stub.UpdateAgent(
        pb.UpdateAgentRequest(agent=flag, update_mask=FieldMask(paths=["injection_strategy"])), **as_user("u")
    )
    assert updated.agent.injection_strategy == threads_pb2.INJECTION_STRATEGY_FLAG


async def test_ensure_agent_thread_of_an_unknown_agent_is_not_found(stub: Stub) -> None:
    await expect_error(
        stub.EnsureAgentThread(pb.EnsureAgentThreadRequest(target_agent_id="ghost"), **as_user("u")),
        grpc.StatusCode.NOT_FOUND,
        "ERROR_REASON_NOT_FOUND",
    )
    await expect_error(
        stub.ListEntries(pb.ListEntriesRequest(for_agent=ForAgent(agent_id="ghost")), **as_user("u")),
        grpc.StatusCode.NOT_FOUND,
        "ERROR_REASON_NOT_FOUND",
    )


async def test_seed_000_a_fact_given_by_main_is_in_qa_thread_when_architect_asks(stub: Stub) -> None:
    await create_agents(stub, "main", "architect", "qa")
    qa = (
        await stub.EnsureAgentThread(pb.EnsureAgentThreadRequest(target_agent_id="qa"), **as_user("u"))
    ).thread
    fact = "IDEA-TOKEN-7F3A-BLEEDCHECK"
    await stub.AppendEntries(
        pb.AppendEntriesRequest(
            request_id="main-1",
            thread_id=qa.id,
            entries=[
                turn("main", "qa", "c-main", threads_pb2.ROLE_USER, f"Keep this token: {fact}"),
                turn("main", "qa", "c-main", threads_pb2.ROLE_ASSISTANT, "Noted."),
            ],
        ),
        **as_user("u"),
    )
    # Architect asks QA, on QA's same thread; QA answers with the same correlation id.
    await stub.AppendEntries(
        pb.AppendEntriesRequest(
            thread_id=qa.id,
            entries=[
                turn("architect", "qa", "c-arch", threads_pb2.ROLE_USER, "Which token did Main give you?")
            ],
        ),
        **as_user("u"),
    )
    await stub.AppendEntries(
        pb.AppendEntriesRequest(
            thread_id=qa.id,
            entries=[turn("architect", "qa", "c-arch", threads_pb2.ROLE_ASSISTANT, f"It is {fact}.")],
        ),
        **as_user("u"),
    )

    whole = await stub.ListEntries(pb.ListEntriesRequest(for_agent=ForAgent(agent_id="qa")), **as_user("u"))
    assert not whole.partial_view and whole.thread_id == qa.id
    assert [(e.requester, e.correlation_id) for e in whole.entries] == [
        ("main", "c-main"),
        ("main", "c-main"),
        ("architect", "c-arch"),
        ("architect", "c-arch"),
    ]
    assert fact in whole.entries[0].content and fact in whole.entries[3].content

    pair = await stub.ListEntries(
        pb.ListEntriesRequest(for_pair=Pair(requester="main", target="qa")), **as_user("u")
    )
    assert pair.partial_view and pair.thread_id == qa.id
    assert [e.sequence for e in pair.entries] == [1, 2]
    assert all(e.requester == "main" for e in pair.entries)

    correlated = await stub.ListEntries(
        pb.ListEntriesRequest(for_correlation=ForCorrelation(thread_id=qa.id, correlation_id="c-arch")),
        **as_user("u"),
    )
    assert correlated.partial_view
    assert [e.role for e in correlated.entries] == [threads_pb2.ROLE_USER, threads_pb2.ROLE_ASSISTANT]


async def test_a_filtered_view_is_partial_only_when_it_leaves_entries_out(stub: Stub) -> None:
    await create_agents(stub, "main", "architect", "qa")
    qa = (
        await stub.EnsureAgentThread(pb.EnsureAgentThreadRequest(target_agent_id="qa"), **as_user("u"))
    ).thread
    await stub.AppendEntries(
        pb.AppendEntriesRequest(
            thread_id=qa.id,
            entries=[
                turn("main", "qa", "c-1", threads_pb2.ROLE_USER, "Où en est la revue ?"),
                turn("main", "qa", "c-1", threads_pb2.ROLE_ASSISTANT, "Finie."),
            ],
        ),
        **as_user("u"),
    )
    pair = pb.ListEntriesRequest(for_pair=Pair(requester="main", target="qa"))
    correlated = pb.ListEntriesRequest(for_correlation=ForCorrelation(thread_id=qa.id, correlation_id="c-1"))
    # Only main has asked, all in one exchange: both filters show the whole thread.
    for request in (pair, correlated):
        page = await stub.ListEntries(request, **as_user("u"))
        assert len(page.entries) == 2 and not page.partial_view
    await stub.AppendEntries(
        pb.AppendEntriesRequest(
            thread_id=qa.id,
            entries=[turn("architect", "qa", "c-2", threads_pb2.ROLE_USER, "Which build failed?")],
        ),
        **as_user("u"),
    )
    for request in (pair, correlated):
        page = await stub.ListEntries(request, **as_user("u"))
        assert len(page.entries) == 2 and page.partial_view


async def test_views_page_forwards_and_backwards(stub: Stub) -> None:
    await create_agents(stub, "qa")
    qa = (
        await stub.EnsureAgentThread(pb.EnsureAgentThreadRequest(target_agent_id="qa"), **as_user("u"))
    ).thread
    requesters = ["main", "architect", "main"]
    await stub.AppendEntries(
        pb.AppendEntriesRequest(
            thread_id=qa.id,
            entries=[
                turn(requesters[i % 3], "qa", f"c{i}", threads_pb2.ROLE_USER, f"m{i}") for i in range(30)
            ],
        ),
        **as_user("u"),
    )
    for request, expected in [
        (pb.ListEntriesRequest(for_agent=ForAgent(agent_id="qa")), list(range(1, 31))),
        (
            pb.ListEntriesRequest(for_pair=Pair(requester="main", target="qa"), descending=True),
            [s for s in range(30, 0, -1) if (s - 1) % 3 != 1],
        ),
    ]:
        request.page_size = 7
        first_token = (await stub.ListEntries(request, **as_user("u"))).next_page_token
        forward, backward = await sequences_both_ways(stub.ListEntries, request, "u")
        assert forward == expected
        assert backward == expected
        # A token of one view is refused by another.
        await expect_error(
            stub.ListEntries(
                pb.ListEntriesRequest(
                    for_pair=Pair(requester="architect", target="qa"), page_token=first_token
                ),
                **as_user("u"),
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "ERROR_REASON_INVALID_ARGUMENT",
        )


async def test_bad_views_and_bad_agent_entries_are_invalid_argument(stub: Stub) -> None:
    await create_agents(stub, "qa")
    qa = (
        await stub.EnsureAgentThread(pb.EnsureAgentThreadRequest(target_agent_id="qa"), **as_user("u"))
    ).thread
    for view in [Pair(requester="", target="qa"), Pair(requester="main", target="")]:
        await expect_error(
            stub.ListEntries(pb.ListEntriesRequest(for_pair=view), **as_user("u")),
            grpc.StatusCode.INVALID_ARGUMENT,
            "ERROR_REASON_INVALID_ARGUMENT",
        )
    await expect_error(
        stub.ListEntries(
            pb.ListEntriesRequest(for_correlation=ForCorrelation(thread_id=qa.id)), **as_user("u")
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    # An agent thread's entries name a requester and target that agent.
    for requester, target in [("", "qa"), ("main", ""), ("main", "architect")]:
        await expect_error(
            stub.AppendEntries(
                pb.AppendEntriesRequest(
                    thread_id=qa.id, entries=[turn(requester, target, "c", threads_pb2.ROLE_USER, "x")]
                ),
                **as_user("u"),
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "ERROR_REASON_INVALID_ARGUMENT",
        )
