"""Retention of archived conversations, on both databases: a conversation
archived longer ago than the setting is deleted with its entries; live
conversations, recently archived ones and agent threads stay; the prune
runs once per interval across replicas, and the service runs it by itself
when the setting is on. Time moves on the test's clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import grpc
import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel import col

from services.shared.db import create_engine
from services.shared.time import utcnow
from services.threads.models import Entry
from services.threads.retention import ConversationRetention
from services.threads.settings import ThreadsSettings
from switchboard.threads.v1 import threads_pb2, threads_service_pb2_grpc
from switchboard.threads.v1 import threads_service_pb2 as pb
from tests.conftest import MovableClock
from tests.service.harness import as_user

Stub = threads_service_pb2_grpc.ThreadsServiceStub
DAY = timedelta(days=1)


# On, with a short interval: the service prunes by itself (the other tests
# run the prune themselves, with the service's own retention off).
PRUNING = {"retention_archived_conversations_days": 7, "retention_interval_seconds": 0.05}


@pytest.fixture
def stub(threads_channel: grpc.aio.Channel) -> Stub:
    return Stub(threads_channel)


@pytest.fixture
async def database(threads_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(threads_url)
    try:
        yield engine
    finally:
        await engine.dispose()


async def conversation_with_entries(stub: Stub, archived: bool) -> str:
    created = await stub.CreateConversation(pb.CreateConversationRequest(), **as_user("alice"))
    cid = created.conversation.id
    entries = [threads_pb2.Entry(role=threads_pb2.ROLE_USER, content="Bonjour, où en est le budget ?")]
    await stub.AppendEntries(pb.AppendEntriesRequest(thread_id=cid, entries=entries), **as_user("alice"))
    if archived:
        await stub.ArchiveConversation(pb.ArchiveConversationRequest(conversation_id=cid), **as_user("alice"))
    return str(cid)


async def exists(stub: Stub, cid: str) -> bool:
    try:
        await stub.GetConversation(pb.GetConversationRequest(conversation_id=cid), **as_user("alice"))
    except grpc.aio.AioRpcError as error:
        assert error.code() == grpc.StatusCode.NOT_FOUND
        return False
    return True


async def entry_count(database: AsyncEngine, cid: str) -> int:
    async with database.connect() as connection:
        query = select(func.count()).select_from(Entry).where(col(Entry.thread_id) == cid)
        return int((await connection.execute(query)).scalar_one())


async def test_only_conversations_archived_before_the_cutoff_are_deleted(
    stub: Stub, database: AsyncEngine, clock: MovableClock
) -> None:
    old = await conversation_with_entries(stub, archived=True)
    live = await conversation_with_entries(stub, archived=False)
    retention = ConversationRetention(database, 7 * DAY, 3600, "threads-a")
    clock.advance((6 * DAY).total_seconds())
    recent = await conversation_with_entries(stub, archived=True)
    agent = threads_pb2.Agent(id="qa", display_name="QA")
    await stub.CreateAgent(pb.CreateAgentRequest(agent=agent), **as_user("alice"))
    agent_thread = (
        await stub.EnsureAgentThread(pb.EnsureAgentThreadRequest(target_agent_id="qa"), **as_user("alice"))
    ).thread
    assert await retention.prune(utcnow()) == 0  # six days: not yet
    clock.advance((1 * DAY + timedelta(minutes=1)).total_seconds())
    assert await retention.prune(utcnow()) == 1
    assert not await exists(stub, old) and await entry_count(database, old) == 0
    assert await exists(stub, live) and await entry_count(database, live) == 1
    assert await exists(stub, recent) and await entry_count(database, recent) == 1
    again = await stub.EnsureAgentThread(
        pb.EnsureAgentThreadRequest(target_agent_id="qa"), **as_user("alice")
    )
    assert again.thread.id == agent_thread.id


async def test_the_prune_runs_once_per_interval_across_replicas(
    database: AsyncEngine, clock: MovableClock
) -> None:
    replicas = [
        ConversationRetention(database, 7 * DAY, 600, holder) for holder in ("threads-a", "threads-b")
    ]
    assert [await r.prune_if_due() is not None for r in replicas] == [True, False]
    clock.advance(601)
    assert [await r.prune_if_due() is not None for r in reversed(replicas)] == [True, False]


@pytest.mark.parametrize("threads_options", [PRUNING])
async def test_the_service_prunes_by_itself_when_retention_is_on(
    stub: Stub, database: AsyncEngine, clock: MovableClock, threads_options: dict[str, Any]
) -> None:
    old = await conversation_with_entries(stub, archived=True)
    live = await conversation_with_entries(stub, archived=False)
    clock.advance((8 * DAY).total_seconds())
    deadline = asyncio.get_running_loop().time() + 20
    while await exists(stub, old):
        assert asyncio.get_running_loop().time() < deadline, "the archived conversation was never pruned"
        await asyncio.sleep(0.05)
    assert await entry_count(database, old) == 0 and await exists(stub, live)


def test_retention_is_off_by_default() -> None:
    assert ThreadsSettings().retention_archived_conversations_days == 0
