"""Pure rules of rotation and of the export layout."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from services.shared.errors import InvalidArgument, TooLarge
from services.threads.export import ThreadFile, export_files, parse_files
from services.threads.models import Entry, ProviderSession, Segment, Thread
from services.threads.rotation import HANDOFF_SUMMARY_MAX_CHARS, RotationPolicy, check_handoff

NOW = datetime(2026, 7, 2, 10, 0, 0, 123456, tzinfo=UTC)


def test_a_segment_closes_once_it_reaches_either_threshold() -> None:
    policy = RotationPolicy(after_entries=3, after_chars=100)
    assert not policy.closes(2, 99)
    assert policy.closes(3, 0)
    assert policy.closes(1, 100)
    assert policy.closes(7, 5_000)  # one big append past both: still one close


def test_handoff_bound() -> None:
    assert check_handoff("x" * HANDOFF_SUMMARY_MAX_CHARS)
    with pytest.raises(TooLarge):
        check_handoff("x" * (HANDOFF_SUMMARY_MAX_CHARS + 1))
    with pytest.raises(InvalidArgument):
        check_handoff(" \n\t")


def entry(sequence: int, content: str) -> Entry:
    return Entry(
        id=f"e{sequence}",
        thread_id="t",
        sequence=sequence,
        requester="main",
        target="qa",
        correlation_id="c",
        role=2,
        source="engine",
        run_id="r",
        content=content,
        create_time=NOW,
    )


def test_export_files_parse_back_to_the_same_rows() -> None:
    thread = Thread(id="t", kind="agent", agent_id="qa", last_sequence=4)
    entries = [entry(1, "a\nb"), entry(2, "ü"), entry(3, ""), entry(4, "{}")]
    segments = [
        Segment(
            thread_id="t",
            number=1,
            first_sequence=1,
            last_sequence=2,
            status="closed",
            handoff_status="ready",
            handoff_summary="sum",
        ),
        Segment(thread_id="t", number=2, first_sequence=3, last_sequence=4, status="open"),
    ]
    sessions = [
        ProviderSession(id="s", agent_thread_id="t", provider_id="p", native_session_id="n", create_time=NOW)
    ]
    files = export_files(thread, entries, segments, sessions)
    assert [f.path for f in files] == [
        "agents/qa/log.1.jsonl",
        "agents/qa/log.jsonl",
        "agents/qa/handoff.md",
        "agents/qa/providers.json",
    ]
    assert (
        files[0].content.count("\n") == 2
        and '"create_time": "2026-07-02T10:00:00.123456Z"' in files[0].content
    )
    parsed = parse_files(files, max_entry_chars=10)
    assert parsed.thread_id == "t" and parsed.agent_id == "qa"
    assert [(e.sequence, e.content, e.role, e.create_time) for e in parsed.entries] == [
        (e.sequence, e.content, e.role, e.create_time) for e in entries
    ]
    assert [
        (s.number, s.first_sequence, s.last_sequence, s.status, s.handoff_summary) for s in parsed.segments
    ] == [
        (1, 1, 2, "closed", "sum"),
        (2, 3, 4, "open", None),
    ]
    assert [(s.provider_id, s.native_session_id, s.release_time) for s in parsed.sessions] == [
        ("p", "n", None)
    ]
    # Exporting what was parsed gives the same files.
    parsed_thread = Thread(id="t", kind="agent", agent_id="qa")
    assert export_files(parsed_thread, parsed.entries, parsed.segments, parsed.sessions) == files


def test_parse_names_the_file_and_line() -> None:
    with pytest.raises(InvalidArgument) as error:
        parse_files([ThreadFile("agents/qa/log.jsonl", '{"a": 1}\n')], max_entry_chars=10)
    assert error.value.message.startswith("agents/qa/log.jsonl line 1: missing field")
    assert error.value.metadata == {"field": "files", "file": "agents/qa/log.jsonl", "line": "1"}
