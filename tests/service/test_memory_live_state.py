"""Live state through the real stub: set / list / delete / clear, expiry, and
WatchLiveState across two replicas on one database."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from services.memory.server import build_server
from services.memory.settings import MemorySettings
from services.shared.embeddings import EmbedderName
from switchboard.memory.v1 import memory_pb2, memory_service_pb2_grpc
from switchboard.memory.v1 import memory_service_pb2 as pb
from tests.conftest import MovableClock
from tests.service.harness import as_user, create_projects, expect_error, running

Stub = memory_service_pb2_grpc.MemoryServiceStub
INVALID = (grpc.StatusCode.INVALID_ARGUMENT, "ERROR_REASON_INVALID_ARGUMENT")
NOT_FOUND = (grpc.StatusCode.NOT_FOUND, "ERROR_REASON_NOT_FOUND")
M = memory_pb2


def settings(db_url: str) -> MemorySettings:
    return MemorySettings(port=0, database_url=db_url, embedder=EmbedderName.HASHING, live_max_ttl=3600)


@pytest.fixture
def memory_options() -> dict[str, Any]:
    return {"live_max_ttl": 3600}


@pytest.fixture
async def stub(memory_channel: grpc.aio.Channel) -> Stub:
    await create_projects(memory_channel, "alice", "acme")
    return Stub(memory_channel)


def set_request(
    agent: str, activity: str, seconds: float = 60, project_id: str = "acme", **fields: object
) -> pb.SetLiveStateRequest:
    return pb.SetLiveStateRequest(
        project_id=project_id,
        agent_id=agent,
        activity=activity,
        ttl=Duration(nanos=int(seconds * 1e9) % 10**9, seconds=int(seconds)),
        **fields,  # type: ignore[arg-type]
    )


async def agents(
    stub: Stub, user: str = "alice", page_size: int = 0, project_id: str = "acme"
) -> list[tuple[str, str]]:
    seen, token = [], ""
    while True:
        response = await stub.ListLiveState(
            pb.ListLiveStateRequest(project_id=project_id, page_size=page_size, page_token=token),
            **as_user(user),
        )
        seen += [(e.agent_id, e.activity) for e in response.entries]
        if not (token := response.next_page_token):
            return seen


async def test_set_list_delete_clear(stub: Stub) -> None:
    entry = (
        await stub.SetLiveState(set_request("qa", "testing login", detail="flaky case"), **as_user("alice"))
    ).entry
    assert (entry.agent_id, entry.activity, entry.detail) == ("qa", "testing login", "flaky case")
    assert 59 <= entry.expire_time.seconds - entry.update_time.seconds <= 60
    await stub.SetLiveState(set_request("architect", "reviewing"), **as_user("alice"))
    await stub.SetLiveState(set_request("qa", "writing report"), **as_user("alice"))  # replaces
    stamp = Timestamp()
    stamp.FromDatetime(datetime.now(UTC) + timedelta(minutes=5))
    await stub.SetLiveState(
        pb.SetLiveStateRequest(project_id="acme", agent_id="main", activity="planning", expire_time=stamp),
        **as_user("alice"),
    )
    assert await agents(stub) == [("architect", "reviewing"), ("main", "planning"), ("qa", "writing report")]
    assert await agents(stub, page_size=1) == await agents(stub)
    # Bob is no member of acme: its live state reads like a missing project's.
    await expect_error(agents(stub, user="bob"), *NOT_FOUND)
    assert await agents(stub, user="bob", project_id="") == []
    await expect_error(
        stub.DeleteLiveState(pb.DeleteLiveStateRequest(project_id="acme", agent_id="qa"), **as_user("bob")),
        *NOT_FOUND,
    )
    await stub.DeleteLiveState(
        pb.DeleteLiveStateRequest(project_id="acme", agent_id="qa"), **as_user("alice")
    )
    await expect_error(
        stub.DeleteLiveState(pb.DeleteLiveStateRequest(project_id="acme", agent_id="qa"), **as_user("alice")),
        *NOT_FOUND,
    )
    cleared = await stub.ClearLiveState(pb.ClearLiveStateRequest(project_id="acme"), **as_user("alice"))
    assert cleared.deleted_count == 2 and await agents(stub) == []


async def test_bad_live_state_is_rejected(stub: Stub) -> None:
    past = Timestamp()
    past.FromDatetime(datetime.now(UTC) - timedelta(seconds=1))
    for request in (
        set_request("", "x"),
        set_request("qa", " "),
        set_request("qa", "x", seconds=-5),
        set_request("qa", "x", seconds=7200),  # over live_max_ttl
        pb.SetLiveStateRequest(project_id="acme", agent_id="qa", activity="x", expire_time=past),
        set_request("qa", "x", expire_time=past),  # both
    ):
        await expect_error(stub.SetLiveState(request, **as_user("alice")), *INVALID)
    await expect_error(
        stub.ListLiveState(pb.ListLiveStateRequest(project_id="acme", page_token="!!"), **as_user("alice")),
        *INVALID,
    )
    assert await agents(stub) == []


async def test_expired_entries_disappear(stub: Stub, clock: MovableClock) -> None:
    await stub.SetLiveState(set_request("qa", "short", seconds=30), **as_user("alice"))
    await stub.SetLiveState(set_request("main", "long", seconds=600), **as_user("alice"))
    assert await agents(stub) == [("main", "long"), ("qa", "short")]
    clock.advance(31)
    assert await agents(stub) == [("main", "long")]
    await expect_error(
        stub.DeleteLiveState(pb.DeleteLiveStateRequest(project_id="acme", agent_id="qa"), **as_user("alice")),
        *NOT_FOUND,
    )


async def next_event(stream: object) -> pb.WatchLiveStateResponse:
    response: pb.WatchLiveStateResponse = await asyncio.wait_for(stream.read(), 5)  # type: ignore[attr-defined]
    return response


async def test_watch_across_replicas(db_url: str) -> None:
    # No safety poll within the test: the writer's announcements, and the
    # first expiry's time, must wake the watcher.
    replica = settings(db_url).model_copy(update={"safety_poll_seconds": 3600.0})
    async with (
        running(build_server, replica) as (_, channel_a),
        running(build_server, replica) as (_, channel_b),
    ):
        a, b = Stub(channel_a), Stub(channel_b)
        await create_projects(channel_a, "alice", "acme")
        await a.SetLiveState(set_request("main", "planning"), **as_user("alice"))
        stream = b.WatchLiveState(
            pb.WatchLiveStateRequest(project_id="acme"), metadata=as_user("alice")["metadata"]
        )
        snapshot = await next_event(stream)
        assert snapshot.type == M.LIVE_STATE_EVENT_TYPE_SNAPSHOT
        assert [(e.agent_id, e.activity) for e in snapshot.entries] == [("main", "planning")]
        # A write on the other replica reaches the watcher through the database
        # (the replicas share no memory, only the database, which wakes it).
        await a.SetLiveState(set_request("qa", "testing", seconds=2), **as_user("alice"))
        event = await next_event(stream)
        assert event.type == M.LIVE_STATE_EVENT_TYPE_SET and event.entries[0].agent_id == "qa"
        # Writes in another project (bob's own) are not seen.
        await a.SetLiveState(set_request("main", "bob's", project_id=""), **as_user("bob"))
        # A delete on the watcher's own replica, then the expiry of qa.
        await b.DeleteLiveState(
            pb.DeleteLiveStateRequest(project_id="acme", agent_id="main"), **as_user("alice")
        )
        event = await next_event(stream)
        assert (event.type, event.removal, event.entries[0].agent_id) == (
            M.LIVE_STATE_EVENT_TYPE_REMOVED,
            M.LIVE_STATE_REMOVAL_DELETED,
            "main",
        )
        # Nobody writes: the watch wakes at qa's expiry.
        event = await next_event(stream)
        assert (event.type, event.removal, event.entries[0].agent_id) == (
            M.LIVE_STATE_EVENT_TYPE_REMOVED,
            M.LIVE_STATE_REMOVAL_EXPIRED,
            "qa",
        )
        stream.cancel()
