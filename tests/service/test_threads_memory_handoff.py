"""Rotation through memory's HandoffService: when an agent thread's segment
closes, threads asks memory to fold it into the thread's handoff summary and
stores that summary (bounded, in stable sections) as the segment's handoff."""

from __future__ import annotations

from services.memory.server import build_server as build_memory
from services.memory.settings import MemorySettings
from services.threads.server import build_server as build_threads
from services.threads.settings import ThreadsSettings
from switchboard.threads.v1 import threads_pb2, threads_service_pb2, threads_service_pb2_grpc
from tests.conftest import DatabaseFactory
from tests.service.harness import as_user, running

USER = as_user("alice")


async def test_a_closed_segment_gets_memorys_handoff_summary(make_database: DatabaseFactory) -> None:
    async with make_database("memory") as memory_url, make_database("threads") as threads_url:
        memory_settings = MemorySettings(port=0, database_url=memory_url, embedder="hashing")
        async with running(build_memory, memory_settings) as (memory, _):
            settings = ThreadsSettings(
                port=0,
                database_url=threads_url,
                memory_address=f"127.0.0.1:{memory.port}",
                rotate_after_entries=4,
            )
            async with running(build_threads, settings) as (_, channel):
                threads = threads_service_pb2_grpc.ThreadsServiceStub(channel)
                await threads.CreateAgent(
                    threads_service_pb2.CreateAgentRequest(agent=threads_pb2.Agent(id="qa")), **USER
                )
                thread = (
                    await threads.EnsureAgentThread(
                        threads_service_pb2.EnsureAgentThreadRequest(target_agent_id="qa"), **USER
                    )
                ).thread
                for i, (requester, text) in enumerate(
                    [("main", "Please test the login flow"), ("architect", "Is the retry policy decided?")]
                ):
                    common = {"requester": requester, "target": "qa", "correlation_id": f"c{i}"}
                    entries = [
                        threads_pb2.Entry(
                            role=threads_pb2.ROLE_USER, source=f"agent:{requester}", content=text, **common
                        ),
                        threads_pb2.Entry(
                            role=threads_pb2.ROLE_ASSISTANT,
                            source="agent:qa",
                            content=f"Answer {i}",
                            **common,
                        ),
                    ]
                    await threads.AppendEntries(
                        threads_service_pb2.AppendEntriesRequest(
                            request_id=f"r{i}", thread_id=thread.id, entries=entries
                        ),
                        **USER,
                    )
                segments = (
                    await threads.ListSegments(
                        threads_service_pb2.ListSegmentsRequest(thread_id=thread.id), **USER
                    )
                ).segments
    closed = [s for s in segments if s.state == threads_pb2.SEGMENT_STATE_CLOSED]
    assert len(closed) == 1 and closed[0].entry_count == 4
    summary = closed[0].handoff_summary
    assert closed[0].handoff_state == threads_pb2.HANDOFF_STATE_READY, closed[0]
    sections = [
        "Current objective",
        "Active requests by requester",
        "Recent decisions",
        "Blockers",
        "Last correlated answer",
    ]
    positions = [summary.find(section) for section in sections]
    assert -1 not in positions and positions == sorted(positions), summary
    assert "architect" in summary and len(summary) <= 4096
