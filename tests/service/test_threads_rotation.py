"""Rotation of agent threads into segments, the handoff seam, and paging
across rotations, through the real stub on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest
from alembic import command
from sqlalchemy import Connection, text

from services.shared.bootstrap import registrar, start_service
from services.shared.db import create_engine
from services.shared.migrations import alembic_config, upgrade_to_head
from services.threads.models import Entry, Segment
from services.threads.rotation import HANDOFF_SUMMARY_MAX_CHARS, ReadEntries
from services.threads.server import MIGRATIONS, SERVICE_NAME, build_server, open_servicer
from services.threads.settings import ThreadsSettings
from switchboard.threads.v1 import threads_pb2, threads_service_pb2_grpc
from switchboard.threads.v1 import threads_service_pb2 as pb
from tests.service.harness import as_user, expect_error, running, sequences_both_ways

Stub = threads_service_pb2_grpc.ThreadsServiceStub
ForAgent = pb.ListEntriesRequest.ForAgent
Pair = pb.ListEntriesRequest.ForPair
OPEN, CLOSED = threads_pb2.SEGMENT_STATE_OPEN, threads_pb2.SEGMENT_STATE_CLOSED
PENDING, READY = threads_pb2.HANDOFF_STATE_PENDING, threads_pb2.HANDOFF_STATE_READY
INVALID = (grpc.StatusCode.INVALID_ARGUMENT, "ERROR_REASON_INVALID_ARGUMENT")
NOT_FOUND = (grpc.StatusCode.NOT_FOUND, "ERROR_REASON_NOT_FOUND")


@asynccontextmanager
async def threads(db_url: str, **settings: Any) -> AsyncIterator[Stub]:
    config = ThreadsSettings(port=0, database_url=db_url, **settings)
    async with running(build_server, config) as (_, channel):
        yield Stub(channel)


async def agent_thread(stub: Stub, slug: str = "qa") -> str:
    await stub.CreateAgent(pb.CreateAgentRequest(agent=threads_pb2.Agent(id=slug)), **as_user("u"))
    response = await stub.EnsureAgentThread(pb.EnsureAgentThreadRequest(target_agent_id=slug), **as_user("u"))
    return response.thread.id


def turn(requester: str, content: str, target: str = "qa") -> threads_pb2.Entry:
    return threads_pb2.Entry(
        requester=requester,
        target=target,
        correlation_id=f"c-{requester}",
        role=threads_pb2.ROLE_USER,
        content=content,
    )


async def append(stub: Stub, thread_id: str, *entries: threads_pb2.Entry, request_id: str = "") -> list[int]:
    response = await stub.AppendEntries(
        pb.AppendEntriesRequest(thread_id=thread_id, request_id=request_id, entries=entries), **as_user("u")
    )
    return [e.sequence for e in response.entries]


async def segments(stub: Stub, thread_id: str) -> list[threads_pb2.Segment]:
    request = pb.ListSegmentsRequest(thread_id=thread_id, page_size=2)
    pages = [await stub.ListSegments(request, **as_user("u"))]
    while pages[-1].next_page_token:
        request.page_token = pages[-1].next_page_token
        pages.append(await stub.ListSegments(request, **as_user("u")))
    return [s for p in pages for s in p.segments]


def ranges(rows: Sequence[threads_pb2.Segment]) -> list[tuple[int, int, int, int]]:
    return [(s.number, s.first_sequence, s.last_sequence, s.state) for s in rows]


async def test_the_append_that_reaches_the_entry_threshold_closes_the_segment(db_url: str) -> None:
    async with threads(db_url, rotate_after_entries=4) as stub:
        qa = await agent_thread(stub)
        fresh = await segments(stub, qa)
        assert (
            ranges(fresh) == [(1, 1, 0, OPEN)] and fresh[0].handoff_state == threads_pb2.HANDOFF_STATE_NOT_DUE
        )
        await append(stub, qa, turn("main", "a"))
        await append(stub, qa, turn("main", "b"), turn("architect", "c"))
        assert ranges(await segments(stub, qa)) == [(1, 1, 3, OPEN)]
        await append(stub, qa, turn("main", "d"))  # 4 entries: closes
        await append(stub, qa, turn("main", "e"), turn("main", "f"), turn("main", "g"))
        # An append is never split: 3 + 2 = 5 entries in segment 2, then it closes.
        await append(stub, qa, turn("main", "h"), turn("main", "i"))
        rows = await segments(stub, qa)
        assert ranges(rows) == [(1, 1, 4, CLOSED), (2, 5, 9, CLOSED), (3, 10, 9, OPEN)]
        assert [s.entry_count for s in rows] == [4, 5, 0]
        assert [s.char_count for s in rows] == [4, 5, 0]
        assert [s.handoff_state for s in rows[:2]] == [PENDING, PENDING]
        assert all(s.HasField("close_time") for s in rows[:2]) and not rows[2].HasField("close_time")
        # A retried append that closed a segment changes nothing the second time.
        first = await append(
            stub, qa, turn("main", "j"), turn("main", "k"), turn("main", "l"), request_id="r"
        )
        again = await append(
            stub, qa, turn("main", "j"), turn("main", "k"), turn("main", "l"), request_id="r"
        )
        assert first == again == [10, 11, 12]
        assert ranges(await segments(stub, qa))[2:] == [(3, 10, 12, OPEN)]


async def test_the_character_threshold_closes_the_segment_too(db_url: str) -> None:
    async with threads(db_url, rotate_after_chars=10) as stub:
        qa = await agent_thread(stub)
        await append(stub, qa, turn("main", "abcdef"))
        await append(stub, qa, turn("main", "ghij"))  # 10 characters
        await append(stub, qa, turn("main", "x" * 25))  # one entry past the threshold on its own
        rows = await segments(stub, qa)
        assert ranges(rows) == [(1, 1, 2, CLOSED), (2, 3, 3, CLOSED), (3, 4, 3, OPEN)]
        assert [s.char_count for s in rows] == [10, 25, 0]


async def test_conversations_do_not_rotate(db_url: str) -> None:
    async with threads(db_url, rotate_after_entries=1) as stub:
        conversation = (
            await stub.CreateConversation(pb.CreateConversationRequest(), **as_user("u"))
        ).conversation
        for i in range(3):
            await append(
                stub, conversation.id, threads_pb2.Entry(role=threads_pb2.ROLE_USER, content=f"m{i}")
            )
        await expect_error(
            stub.ListSegments(pb.ListSegmentsRequest(thread_id=conversation.id), **as_user("u")), *NOT_FOUND
        )


async def test_paging_across_many_rotations_never_skips_or_repeats(db_url: str) -> None:
    rng = random.Random(7)
    async with threads(db_url, rotate_after_entries=3) as stub:
        qa = await agent_thread(stub)
        requesters: list[str] = []
        while len(requesters) < 41:
            batch = [rng.choice(["main", "architect", "dev"]) for _ in range(rng.randint(1, 4))]
            await append(stub, qa, *(turn(r, f"m{len(requesters) + i}") for i, r in enumerate(batch)))
            requesters.extend(batch)
        rows = await segments(stub, qa)
        assert len(rows) >= 8 and rows[-1].state == OPEN
        # The segments tile the thread: contiguous, from 1, no overlap.
        assert [s.first_sequence for s in rows] == [1] + [s.last_sequence + 1 for s in rows[:-1]]
        assert rows[-1].last_sequence == len(requesters)
        everything = list(range(1, len(requesters) + 1))
        mains = [s for s in everything if requesters[s - 1] == "main"]
        for request, expected in [
            (pb.ListEntriesRequest(for_agent=ForAgent(agent_id="qa")), everything),
            (pb.ListEntriesRequest(for_agent=ForAgent(agent_id="qa"), descending=True), everything[::-1]),
            (pb.ListEntriesRequest(for_pair=Pair(requester="main", target="qa")), mains),
            (
                pb.ListEntriesRequest(for_pair=Pair(requester="main", target="qa"), descending=True),
                mains[::-1],
            ),
        ]:
            for size in (2, 5):
                request.page_size = size
                request.page_token = ""
                forward, backward = await sequences_both_ways(stub.ListEntries, request, "u")
                assert forward == expected
                assert backward == expected


async def test_segments_newest_first_start_with_the_open_one(db_url: str) -> None:
    """ListSegments with descending: the same segments newest first, page
    by page, the open one first; a token of one order is refused by the
    other. The engine finds where an asked agent's live part starts from
    that one segment, and from the whole list when a threads service that
    does not know the order answers oldest first."""
    from dataclasses import fields

    from services.engine.collaborators import Collaborators, Stubs

    async with threads(db_url, rotate_after_entries=2) as stub:
        qa = await agent_thread(stub)
        for i in range(9):
            await append(stub, qa, turn("main", f"m{i}"))
        oldest_first = await segments(stub, qa)
        assert len(oldest_first) == 5 and oldest_first[-1].state == OPEN
        request = pb.ListSegmentsRequest(thread_id=qa, page_size=2, descending=True)
        pages = [await stub.ListSegments(request, **as_user("u"))]
        while pages[-1].next_page_token:
            request.page_token = pages[-1].next_page_token
            pages.append(await stub.ListSegments(request, **as_user("u")))
        assert [len(p.segments) for p in pages] == [2, 2, 1]
        assert ranges([s for p in pages for s in p.segments]) == ranges(oldest_first[::-1])
        ascending_token = (
            await stub.ListSegments(pb.ListSegmentsRequest(thread_id=qa, page_size=2), **as_user("u"))
        ).next_page_token
        await expect_error(
            stub.ListSegments(
                pb.ListSegmentsRequest(thread_id=qa, page_token=ascending_token, descending=True),
                **as_user("u"),
            ),
            *INVALID,
        )

        calls: list[pb.ListSegmentsRequest] = []

        class Transport:
            def __init__(self, knows_order: bool) -> None:
                self.knows_order = knows_order
                # Only threads is called: every service's stub is the threads one.
                self.stubs = Stubs(*[stub] * len(fields(Stubs)))

            async def __call__(self, method: Any, message: Any, user: str) -> Any:
                assert method is stub.ListSegments
                calls.append(message)
                if not self.knows_order:
                    message = pb.ListSegmentsRequest(
                        thread_id=message.thread_id,
                        page_size=message.page_size,
                        page_token=message.page_token,
                    )
                return await stub.ListSegments(message, **as_user(user))

        def transport(knows_order: bool) -> Any:
            return Transport(knows_order)

        open_start = oldest_first[-1].first_sequence
        assert open_start == 9
        assert await Collaborators(transport(True)).open_segment_start("u", qa) == open_start
        assert len(calls) == 1 and calls[0].descending and calls[0].page_size == 1
        calls.clear()
        assert await Collaborators(transport(False)).open_segment_start("u", qa) == open_start
        assert len(calls) > 1  # the oldest segment first: the whole list read


async def test_appends_racing_at_the_threshold_close_one_segment_each_time(db_url: str) -> None:
    """Two servers with their own pools stand in for two processes."""
    config = ThreadsSettings(port=0, database_url=db_url, rotate_after_entries=5)
    async with running(build_server, config) as (_, one), running(build_server, config) as (_, two):
        stubs = [Stub(one), Stub(two)]
        qa = await agent_thread(stubs[0])
        await asyncio.gather(*(append(stubs[i % 2], qa, turn("main", f"m{i}")) for i in range(40)))
        rows = await segments(stubs[1], qa)
    assert ranges(rows) == [(n, 5 * n - 4, 5 * n, CLOSED) for n in range(1, 9)] + [(9, 41, 40, OPEN)]
    assert all(s.entry_count == 5 for s in rows[:-1])


async def test_set_segment_handoff_is_bounded_and_only_for_closed_segments(db_url: str) -> None:
    async with threads(db_url, rotate_after_entries=2) as stub:
        qa = await agent_thread(stub)
        await append(stub, qa, turn("main", "a"), turn("architect", "b"))

        def handoff(number: int, summary: str, thread_id: str = qa) -> Any:
            return stub.SetSegmentHandoff(
                pb.SetSegmentHandoffRequest(thread_id=thread_id, number=number, summary=summary),
                **as_user("u"),
            )

        summary = "# Objectif courant\n" + "x" * (HANDOFF_SUMMARY_MAX_CHARS - 19)
        assert len(summary) == HANDOFF_SUMMARY_MAX_CHARS
        set_ = (await handoff(1, summary)).segment
        assert (
            set_.handoff_state == READY and set_.handoff_summary == summary and set_.HasField("handoff_time")
        )
        replaced = (await handoff(1, "shorter")).segment
        assert replaced.handoff_summary == "shorter"
        assert (await segments(stub, qa))[0].handoff_summary == "shorter"
        await expect_error(
            handoff(1, summary + "y"), grpc.StatusCode.INVALID_ARGUMENT, "ERROR_REASON_TOO_LARGE"
        )
        await expect_error(handoff(1, "  \n"), *INVALID)
        await expect_error(handoff(0, "s"), *INVALID)
        await expect_error(
            handoff(2, "s"), grpc.StatusCode.FAILED_PRECONDITION, "ERROR_REASON_FAILED_PRECONDITION"
        )
        await expect_error(handoff(3, "s"), *NOT_FOUND)
        await expect_error(handoff(1, "s", thread_id="nope"), *NOT_FOUND)
        await expect_error(handoff(1, "s", thread_id=""), *NOT_FOUND)
        await expect_error(
            stub.ListSegments(pb.ListSegmentsRequest(thread_id="nope"), **as_user("u")), *NOT_FOUND
        )
        await expect_error(
            stub.ListSegments(pb.ListSegmentsRequest(thread_id=qa, page_token="%%"), **as_user("u")), *INVALID
        )
        await expect_error(
            stub.ListSegments(pb.ListSegmentsRequest(thread_id=qa, page_size=-1), **as_user("u")), *INVALID
        )


class RecordingSummarizer:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.seen: list[tuple[int, list[int]]] = []

    async def summarize(self, segment: Segment, read_entries: ReadEntries) -> str | None:
        entries: Sequence[Entry] = await read_entries()
        self.seen.append((segment.number, [e.sequence for e in entries]))
        if self.fail:
            raise RuntimeError("memory is down")
        return f"segment {segment.number}: " + " ".join(e.content for e in entries)


@asynccontextmanager
async def with_summarizer(db_url: str, summarizer: RecordingSummarizer) -> AsyncIterator[Stub]:
    settings = ThreadsSettings(port=0, database_url=db_url, rotate_after_entries=2)
    servicer, closers = await open_servicer(settings, summarizer)
    add = threads_service_pb2_grpc.add_ThreadsServiceServicer_to_server
    service = await start_service(settings, registrar(add, servicer, SERVICE_NAME), closers)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{service.port}")
    try:
        yield Stub(channel)
    finally:
        await channel.close()
        await service.stop(None)


@pytest.mark.parametrize("fail", [False, True])
async def test_closing_a_segment_calls_the_handoff_seam(db_url: str, fail: bool) -> None:
    summarizer = RecordingSummarizer(fail)
    async with with_summarizer(db_url, summarizer) as stub:
        qa = await agent_thread(stub)
        await append(stub, qa, turn("main", "a"))
        assert summarizer.seen == []
        await append(stub, qa, turn("main", "b"), turn("main", "c"))
        await append(stub, qa, turn("main", "d"))  # not full yet: no call
        rows = await segments(stub, qa)
    assert summarizer.seen == [(1, [1, 2, 3])]
    if fail:  # the append succeeded; the handoff waits
        assert rows[0].handoff_state == PENDING and rows[0].handoff_summary == ""
    else:
        assert rows[0].handoff_state == READY and rows[0].handoff_summary == "segment 1: a b c"


async def test_upgrade_gives_existing_agent_threads_their_open_segment(db_url: str) -> None:
    engine = create_engine(db_url)
    try:
        config = alembic_config(MIGRATIONS, "threads")

        def to_0002(connection: Connection) -> None:
            config.attributes["connection"] = connection
            command.upgrade(config, "threads_0002")

        async with engine.begin() as connection:
            await connection.run_sync(to_0002)
            now = datetime(2026, 7, 2, 10, tzinfo=UTC)
            await connection.execute(
                text(
                    "INSERT INTO threads (id, kind, agent_id, title, title_auto, pinned, sources_json,"
                    " last_sequence, create_time, update_time) VALUES"
                    " ('t-qa', 'agent', 'qa', '', false, false, '{}', 2, :now, :now),"
                    " ('t-empty', 'agent', 'dev', '', false, false, '{}', 0, :now, :now)"
                ),
                {"now": now},
            )
            await connection.execute(
                text(
                    "INSERT INTO entries (id, thread_id, sequence, requester, target, correlation_id, role,"
                    " source, run_id, content, request_index, create_time) VALUES"
                    " ('e1', 't-qa', 1, 'main', 'qa', 'c', 1, '', '', 'héllo', 0, :now),"
                    " ('e2', 't-qa', 2, 'main', 'qa', 'c', 2, '', '', 'ok', 0, :now)"
                ),
                {"now": now},
            )
        await upgrade_to_head(engine, MIGRATIONS, "threads")
        async with engine.connect() as connection:
            rows = (
                await connection.execute(
                    text(
                        "SELECT thread_id, number, first_sequence, last_sequence, entry_count, char_count,"
                        " status FROM segments ORDER BY thread_id"
                    )
                )
            ).all()
    finally:
        await engine.dispose()
    assert [tuple(r) for r in rows] == [("t-empty", 1, 1, 0, 0, 0, "open"), ("t-qa", 1, 1, 2, 2, 7, "open")]
