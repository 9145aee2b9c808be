"""HandoffService in-process through its real stub, on SQLite and PostgreSQL:
entries recorded incrementally, folded at checkpoints (every N, on rotation,
on request), idempotent on sequences, bounded with stable sections."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from services.memory.handoff.domain import HANDOFF_SUMMARY_MAX_CHARS, SECTION_TITLES
from switchboard.memory.v1 import handoff_pb2, handoff_service_pb2_grpc
from switchboard.memory.v1 import handoff_service_pb2 as pb
from tests.service.harness import as_user, expect_error

Stub = handoff_service_pb2_grpc.HandoffServiceStub
INVALID = (grpc.StatusCode.INVALID_ARGUMENT, "ERROR_REASON_INVALID_ARGUMENT")
NOT_FOUND = (grpc.StatusCode.NOT_FOUND, "ERROR_REASON_NOT_FOUND")
K = handoff_pb2


@pytest.fixture
def memory_options() -> dict[str, Any]:
    return {"handoff_checkpoint_every": 5}


@pytest.fixture
def stub(memory_channel: grpc.aio.Channel) -> Stub:
    return Stub(memory_channel)


def entry(
    sequence: int, kind: int, text: str, requester: str = "main", corr: str = ""
) -> handoff_pb2.HandoffEntry:
    return handoff_pb2.HandoffEntry(
        sequence=sequence,
        author_agent_id="qa",
        requester=requester,
        correlation_id=corr,
        kind=kind,
        text=text,  # type: ignore[arg-type]
    )


async def record(
    stub: Stub, thread: str, *entries: handoff_pb2.HandoffEntry
) -> pb.RecordHandoffEntriesResponse:
    return await stub.RecordHandoffEntries(
        pb.RecordHandoffEntriesRequest(thread_id=thread, entries=entries), **as_user("main")
    )


async def get(stub: Stub, thread: str) -> handoff_pb2.HandoffSummary:
    return (
        await stub.GetHandoffSummary(pb.GetHandoffSummaryRequest(thread_id=thread), **as_user("architect"))
    ).summary


async def test_entries_fold_every_n_and_on_request(stub: Stub) -> None:
    first = await record(
        stub,
        "t1",
        entry(1, K.HANDOFF_ENTRY_KIND_OBJECTIVE, "Ship the export"),
        entry(2, K.HANDOFF_ENTRY_KIND_REQUEST, "Review the schema", "main", "c1"),
        entry(3, K.HANDOFF_ENTRY_KIND_REQUEST, "Check the tests", "architect", "c2"),
    )
    # Below the interval: recorded, not folded yet.
    assert (first.recorded, first.checkpointed) == (3, False)
    assert (first.summary.last_folded_sequence, first.summary.pending_entries) == (0, 3)
    assert [s.lines for s in first.summary.sections] == [[]] * 5
    # The fifth pending entry triggers the checkpoint.
    second = await record(
        stub,
        "t1",
        entry(4, K.HANDOFF_ENTRY_KIND_ANSWER, "Schema is fine", "main", "c1"),
        entry(5, K.HANDOFF_ENTRY_KIND_DECISION, "Keep JSONL export"),
    )
    assert (second.recorded, second.checkpointed) == (2, True)
    summary = second.summary
    assert (summary.last_folded_sequence, summary.pending_entries) == (5, 0)
    assert summary.last_checkpoint_reason == K.HANDOFF_CHECKPOINT_REASON_ENTRIES
    assert [s.title for s in summary.sections] == list(SECTION_TITLES)
    lines = {s.title: list(s.lines) for s in summary.sections}
    assert lines["Current objective"] == ["Ship the export (qa, #1)"]
    assert lines["Active requests by requester"] == ["- architect: [c2] Check the tests (#3)"]
    assert lines["Recent decisions"] == ["- Keep JSONL export (qa, #5)"]
    assert lines["Last correlated answer"] == ["[c1] qa -> main: Schema is fine (#4)"]
    assert summary.text.index("## Current objective") < summary.text.index("## Last correlated answer")
    assert await get(stub, "t1") == summary
    # On request (e.g. before a provider swap): folds whatever is pending, even one entry.
    await record(stub, "t1", entry(6, K.HANDOFF_ENTRY_KIND_BLOCKER, "CI is down", corr="b1"))
    checkpoint = await stub.CheckpointHandoff(pb.CheckpointHandoffRequest(thread_id="t1"), **as_user("main"))
    assert checkpoint.summary.last_folded_sequence == 6
    assert checkpoint.summary.last_checkpoint_reason == K.HANDOFF_CHECKPOINT_REASON_REQUEST
    assert list(checkpoint.summary.sections[3].lines) == ["- [b1] CI is down (qa, #6)"]
    rotation = await stub.CheckpointHandoff(
        pb.CheckpointHandoffRequest(thread_id="t1", reason=K.HANDOFF_CHECKPOINT_REASON_ROTATION),
        **as_user("main"),
    )
    assert rotation.summary.last_checkpoint_reason == K.HANDOFF_CHECKPOINT_REASON_ROTATION
    assert rotation.summary.text == checkpoint.summary.text


async def test_re_feeding_the_same_entries_changes_nothing(stub: Stub) -> None:
    entries = [entry(i, K.HANDOFF_ENTRY_KIND_DECISION, f"decision {i}") for i in range(1, 8)]
    await record(stub, "t2", *entries[:3])
    await record(stub, "t2", *entries[:5])  # 1-3 known, 4-5 new: checkpoint at 5 pending
    before = await get(stub, "t2")
    assert before.last_folded_sequence == 5
    again = await record(stub, "t2", *entries[:5])  # all folded already
    assert (again.recorded, again.checkpointed) == (0, False)
    assert await get(stub, "t2") == before
    await record(stub, "t2", *entries)  # 6-7 new
    await record(stub, "t2", *entries)
    after = await stub.CheckpointHandoff(pb.CheckpointHandoffRequest(thread_id="t2"), **as_user("main"))
    assert [line.split(" (")[0] for line in after.summary.sections[2].lines] == [
        f"- decision {i}" for i in range(1, 8)
    ]


async def test_a_long_thread_stays_bounded(stub: Stub) -> None:
    text = "a rather long message about the work " * 30
    sequence = 0
    for _ in range(20):
        entries = []
        for _i in range(25):
            sequence += 1
            kind = [
                K.HANDOFF_ENTRY_KIND_REQUEST,
                K.HANDOFF_ENTRY_KIND_DECISION,
                K.HANDOFF_ENTRY_KIND_BLOCKER,
            ][sequence % 3]
            entries.append(
                entry(sequence, kind, f"#{sequence} {text}", f"agent{sequence % 4}", f"c{sequence}")
            )
        await record(stub, "long", *entries)
    summary = (
        await stub.CheckpointHandoff(pb.CheckpointHandoffRequest(thread_id="long"), **as_user("main"))
    ).summary
    assert summary.last_folded_sequence == 500
    assert len(summary.text) <= HANDOFF_SUMMARY_MAX_CHARS
    assert [s.title for s in summary.sections] == list(SECTION_TITLES)
    assert sum(s.trimmed_lines for s in summary.sections) > 0
    assert "#500 " in summary.text  # the newest detail survives; the oldest went first


async def test_errors(stub: Stub) -> None:
    await expect_error(get(stub, "never-recorded"), *NOT_FOUND)
    await expect_error(
        stub.CheckpointHandoff(pb.CheckpointHandoffRequest(thread_id="never-recorded"), **as_user("main")),
        *NOT_FOUND,
    )
    await expect_error(record(stub, "", entry(1, K.HANDOFF_ENTRY_KIND_NOTE, "x")), *INVALID)
    await expect_error(record(stub, "t"), *INVALID)
    await expect_error(record(stub, "t", entry(0, K.HANDOFF_ENTRY_KIND_NOTE, "x")), *INVALID)
    await expect_error(record(stub, "t", entry(1, 0, "x")), *INVALID)
    await expect_error(
        record(stub, "t", entry(1, K.HANDOFF_ENTRY_KIND_NOTE, "x"), entry(1, K.HANDOFF_ENTRY_KIND_NOTE, "y")),
        *INVALID,
    )
    await expect_error(record(stub, "t", entry(1, K.HANDOFF_ENTRY_KIND_UNBLOCKED, "ok")), *INVALID)
    await expect_error(
        stub.CheckpointHandoff(pb.CheckpointHandoffRequest(thread_id="t", reason=9), **as_user("main")),  # type: ignore[arg-type]
        *INVALID,
    )
    await expect_error(
        stub.GetHandoffSummary(pb.GetHandoffSummaryRequest(thread_id="t")),
        grpc.StatusCode.UNAUTHENTICATED,
        "ERROR_REASON_UNAUTHENTICATED",
    )
