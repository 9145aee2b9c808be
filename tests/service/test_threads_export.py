"""Export and import of an agent thread as the files of its folder, through the real
stub on SQLite and PostgreSQL: a round trip into a fresh database gives the
same files, and bad files are refused naming the file and the line."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import grpc
import pytest

from services.threads.server import build_server
from services.threads.settings import ThreadsSettings
from switchboard.threads.v1 import threads_pb2, threads_service_pb2_grpc
from switchboard.threads.v1 import threads_service_pb2 as pb
from tests.service.harness import as_user, expect_error, running

Stub = threads_service_pb2_grpc.ThreadsServiceStub
ForAgent = pb.ListEntriesRequest.ForAgent
INVALID = (grpc.StatusCode.INVALID_ARGUMENT, "ERROR_REASON_INVALID_ARGUMENT")
NOT_FOUND = (grpc.StatusCode.NOT_FOUND, "ERROR_REASON_NOT_FOUND")
PRECONDITION = (grpc.StatusCode.FAILED_PRECONDITION, "ERROR_REASON_FAILED_PRECONDITION")
Factory = Callable[[str], AbstractAsyncContextManager[str]]


@asynccontextmanager
async def threads(db_url: str, **settings: Any) -> AsyncIterator[Stub]:
    config = ThreadsSettings(port=0, database_url=db_url, rotate_after_entries=3, **settings)
    async with running(build_server, config) as (_, channel):
        yield Stub(channel)


async def agent_thread(stub: Stub, slug: str = "qa") -> str:
    await stub.CreateAgent(pb.CreateAgentRequest(agent=threads_pb2.Agent(id=slug)), **as_user("u"))
    response = await stub.EnsureAgentThread(pb.EnsureAgentThreadRequest(target_agent_id=slug), **as_user("u"))
    return response.thread.id


def turn(requester: str, role: int, content: str, run_id: str = "") -> threads_pb2.Entry:
    return threads_pb2.Entry(
        requester=requester,
        target="qa",
        correlation_id=f"c-{requester}",
        role=role,  # type: ignore[arg-type]
        source=f"agent:{requester}",
        run_id=run_id,
        content=content,
    )


async def fill(stub: Stub, thread_id: str) -> None:
    """8 entries over 3 rotations (segments 1, 2 closed; 3 open), a handoff on
    segment 2, a released and two live provider sessions."""
    contents = ['say "hi"\nthen stop', "héllo ✓", "", "tab\tand \\ backslash", "e", "f", "g", "h"]
    for batch in ([0, 1], [2], [3, 4, 5], [6, 7]):
        await stub.AppendEntries(
            pb.AppendEntriesRequest(
                thread_id=thread_id,
                entries=[
                    turn(
                        "main" if i % 2 else "architect",
                        threads_pb2.ROLE_USER if i % 3 else threads_pb2.ROLE_ASSISTANT,
                        contents[i],
                        run_id=f"run-{i}",
                    )
                    for i in batch
                ],
            ),
            **as_user("u"),
        )
    await stub.SetSegmentHandoff(
        pb.SetSegmentHandoffRequest(thread_id=thread_id, number=1, summary="old"), **as_user("u")
    )
    await stub.SetSegmentHandoff(
        pb.SetSegmentHandoffRequest(
            thread_id=thread_id, number=2, summary="## Objectif courant\n- tests\n---\nnot front matter\n"
        ),
        **as_user("u"),
    )
    for provider, native, replace in [
        ("claude", "s-1", False),
        ("claude", "s-2", True),
        ("codex", "x-1", False),
    ]:
        await stub.BindProviderSession(
            pb.BindProviderSessionRequest(
                agent_thread_id=thread_id, provider_id=provider, native_session_id=native, replace=replace
            ),
            **as_user("u"),
        )


def as_dict(files: Any) -> dict[str, str]:
    return {f.path: f.content for f in files}


async def export(stub: Stub, agent_id: str = "qa") -> pb.ExportAgentThreadResponse:
    response: pb.ExportAgentThreadResponse = await stub.ExportAgentThread(
        pb.ExportAgentThreadRequest(agent_id=agent_id), **as_user("u")
    )
    return response


async def test_export_import_into_a_fresh_database_and_export_again_gives_the_same_files(
    db_url: str, make_database: Factory
) -> None:
    async with threads(db_url) as stub:
        qa = await agent_thread(stub)
        await fill(stub, qa)
        first = await export(stub)
        before = await stub.ListSegments(pb.ListSegmentsRequest(thread_id=qa), **as_user("u"))
    files = as_dict(first.files)
    assert [f.path for f in first.files] == [
        "agents/qa/log.1.jsonl",
        "agents/qa/log.2.jsonl",
        "agents/qa/log.jsonl",
        "agents/qa/handoff.md",
        "agents/qa/providers.json",
    ]
    lines = [json.loads(line) for line in files["agents/qa/log.1.jsonl"].splitlines()]
    assert [line["sequence"] for line in lines] == [1, 2, 3]
    assert lines[0]["content"] == 'say "hi"\nthen stop' and lines[0]["thread_id"] == qa
    assert set(lines[0]) == {
        "thread_id",
        "sequence",
        "requester",
        "target",
        "correlation_id",
        "role",
        "source",
        "run_id",
        "create_time",
        "content",
    }
    assert lines[0]["role"] == "assistant" and lines[1]["role"] == "user" and lines[0]["run_id"] == "run-0"
    assert len(files["agents/qa/log.2.jsonl"].splitlines()) == 3
    assert len(files["agents/qa/log.jsonl"].splitlines()) == 2
    # The latest handoff only: what a model receives with the recent tail.
    assert files["agents/qa/handoff.md"] == (
        "---\nsegment: 2\n---\n## Objectif courant\n- tests\n---\nnot front matter\n"
    )
    providers = json.loads(files["agents/qa/providers.json"])
    assert [(p["provider_id"], p["native_session_id"], p["release_time"] is None) for p in providers] == [
        ("claude", "s-1", False),
        ("claude", "s-2", True),
        ("codex", "x-1", True),
    ]

    async with make_database("other") as other_url, threads(other_url) as fresh:
        imported = await fresh.ImportAgentThread(
            pb.ImportAgentThreadRequest(files=first.files), **as_user("u")
        )
        assert (
            imported.thread.id == qa
            and imported.thread.agent_id == "qa"
            and imported.thread.last_sequence == 8
        )
        again = await export(fresh)
        assert [(f.path, f.content) for f in again.files] == [(f.path, f.content) for f in first.files]
        after = await fresh.ListSegments(pb.ListSegmentsRequest(thread_id=qa), **as_user("u"))
        assert [(s.number, s.first_sequence, s.last_sequence, s.state) for s in after.segments] == [
            (s.number, s.first_sequence, s.last_sequence, s.state) for s in before.segments
        ]
        # The imported thread is live: it takes appends and keeps rotating.
        await fresh.AppendEntries(
            pb.AppendEntriesRequest(thread_id=qa, entries=[turn("main", threads_pb2.ROLE_USER, "i")]),
            **as_user("u"),
        )
        whole = await fresh.ListEntries(
            pb.ListEntriesRequest(for_agent=ForAgent(agent_id="qa")), **as_user("u")
        )
        assert [e.sequence for e in whole.entries] == list(range(1, 10))
        live = await fresh.GetProviderSession(
            pb.GetProviderSessionRequest(agent_thread_id=qa, provider_id="claude"), **as_user("u")
        )
        assert live.session.native_session_id == "s-2"
        # A second import while the thread has entries is refused.
        await expect_error(
            fresh.ImportAgentThread(pb.ImportAgentThreadRequest(files=first.files), **as_user("u")),
            *PRECONDITION,
        )


async def test_import_into_the_agents_empty_live_thread_keeps_its_id(db_url: str) -> None:
    async with threads(db_url) as stub:
        qa = await agent_thread(stub)
        await fill(stub, qa)
        files = (await export(stub)).files
        renamed = [
            threads_pb2.ThreadFile(path=f.path.replace("/qa/", "/qa2/"), content=f.content) for f in files
        ]
        renamed = [
            threads_pb2.ThreadFile(
                path=f.path, content=f.content.replace('"target": "qa"', '"target": "qa2"')
            )
            for f in renamed
        ]
        empty = await agent_thread(stub, "qa2")
        imported = await stub.ImportAgentThread(pb.ImportAgentThreadRequest(files=renamed), **as_user("u"))
        assert imported.thread.id == empty and imported.thread.last_sequence == 8
        segments = await stub.ListSegments(pb.ListSegmentsRequest(thread_id=empty), **as_user("u"))
        assert [s.number for s in segments.segments] == [1, 2, 3]
        assert segments.segments[1].handoff_summary.startswith("## Objectif courant")


async def test_export_errors(db_url: str) -> None:
    async with threads(db_url, max_export_chars=5) as stub:
        await expect_error(export(stub, ""), *INVALID)
        await expect_error(export(stub, "ghost"), *NOT_FOUND)
        await stub.CreateAgent(pb.CreateAgentRequest(agent=threads_pb2.Agent(id="idle")), **as_user("u"))
        await expect_error(export(stub, "idle"), *NOT_FOUND)
        qa = await agent_thread(stub)
        assert [f.path for f in (await export(stub)).files] == [
            "agents/qa/log.jsonl",
            "agents/qa/providers.json",
        ]
        await stub.AppendEntries(
            pb.AppendEntriesRequest(
                thread_id=qa, entries=[turn("main", threads_pb2.ROLE_USER, "longer than 5")]
            ),
            **as_user("u"),
        )
        await expect_error(export(stub), *PRECONDITION)


def line(number: int, **changes: Any) -> str:
    data: dict[str, Any] = {
        "thread_id": "t-1",
        "sequence": number,
        "requester": "main",
        "target": "qa",
        "correlation_id": "c",
        "role": "user",
        "source": "",
        "run_id": "",
        "create_time": "2026-07-02T10:00:00.000000Z",
        "content": f"m{number}",
    }
    data.update(changes)
    return json.dumps({k: v for k, v in data.items() if v is not None})


def layout(**files: str) -> list[threads_pb2.ThreadFile]:
    names = {"log": "log.jsonl", "log1": "log.1.jsonl", "log2": "log.2.jsonl", "handoff": "handoff.md"}
    names |= {"providers": "providers.json", "live_state": "live_state.json"}
    return [threads_pb2.ThreadFile(path=f"agents/qa/{names[k]}", content=v) for k, v in files.items()]


def live_state(**changes: Any) -> str:
    """A live_state.json as an export writes it."""
    data: dict[str, Any] = {
        "project_id": "apollo",
        "agent_id": "qa",
        "activity": "Je relis l'export des factures",
        "detail": "before Tuesday's release",
        "update_time": "2026-07-02T10:00:00.000000Z",
        "expire_time": "2026-07-02T10:05:00.000000Z",
    }
    data.update(changes)
    return json.dumps({k: v for k, v in data.items() if v is not None}, ensure_ascii=False, indent=2) + "\n"


BAD_IMPORTS: list[tuple[str, list[threads_pb2.ThreadFile], str]] = [
    ("no files", [], "files"),
    ("unknown file", [threads_pb2.ThreadFile(path="agents/qa/notes.txt", content="")], "agents/qa/notes.txt"),
    ("path escapes", [threads_pb2.ThreadFile(path="agents/../qa/log.jsonl", content="")], "agents/../qa"),
    (
        "two agents",
        [*layout(log=""), threads_pb2.ThreadFile(path="agents/dev/log.jsonl", content="")],
        "several agents",
    ),
    ("open segment missing", layout(log1=line(1)), "agents/qa/log.jsonl: is missing"),
    ("segment gap", layout(log2=line(1), log=""), "agents/qa/log.1.jsonl: is missing"),
    ("bad json", layout(log=line(1) + "\n{nope\n"), "agents/qa/log.jsonl line 2: not valid JSON"),
    ("not an object", layout(log="[1]\n"), "agents/qa/log.jsonl line 1: must be a JSON object"),
    ("missing field", layout(log=line(1, content=None)), "line 1: missing field 'content'"),
    ("wrong type", layout(log=line(1, sequence="1")), "line 1: field 'sequence' must be a int"),
    ("other target", layout(log=line(1, target="dev")), "line 1: target must be the agent"),
    ("no requester", layout(log=line(1, requester="")), "line 1: requester must not be empty"),
    ("bad role", layout(log=line(1, role="robot")), "line 1: role must be one of"),
    ("gap", layout(log=line(1) + "\n" + line(3)), "line 2: sequence 3 where 2 was expected"),
    ("two threads", layout(log=line(1) + "\n" + line(2, thread_id="t-2")), "line 2: thread_id 't-2' differs"),
    ("bad time", layout(log=line(1, create_time="yesterday")), "line 1: create_time 'yesterday'"),
    ("naive time", layout(log=line(1, create_time="2026-07-02T10:00:00")), "has no time zone"),
    ("blank line", layout(log=line(1) + "\n\n" + line(2)), "agents/qa/log.jsonl line 2: not valid JSON"),
    ("empty closed segment", layout(log1="", log=""), "agents/qa/log.1.jsonl: a closed segment"),
    ("handoff without front matter", layout(log1=line(1), log="", handoff="summary"), "front matter"),
    (
        "handoff of the open segment",
        layout(log1=line(1), log="", handoff="---\nsegment: 2\n---\ns"),
        "segment 2",
    ),
    ("blank handoff", layout(log1=line(1), log="", handoff="---\nsegment: 1\n---\n "), "must not be blank"),
    ("providers not json", layout(log="", providers="{"), "agents/qa/providers.json: not valid JSON"),
    ("providers not a list", layout(log="", providers="{}"), "must be a JSON array"),
    (
        "provider without id",
        layout(log="", providers='[{"native_session_id": "s", "create_time": "2026-07-02T10:00:00Z"}]'),
        "session 0: provider_id",
    ),
    (
        "two live sessions",
        layout(
            log="",
            providers=json.dumps(
                [
                    {"provider_id": "p", "native_session_id": s, "create_time": "2026-07-02T10:00:00Z"}
                    for s in "ab"
                ]
            ),
        ),
        "session 1: provider 'p' has two live sessions",
    ),
    ("live state not json", layout(log="", live_state="{"), "agents/qa/live_state.json: not valid JSON"),
    ("live state not an object", layout(log="", live_state="[]"), "live_state.json: must be a JSON object"),
    ("live state without activity", layout(log="", live_state=live_state(activity=None)), "'activity'"),
    (
        "live state of another agent",
        layout(log="", live_state=live_state(agent_id="dev")),
        "live_state.json: agent_id must be the agent of the folder, 'qa'",
    ),
    ("live state bad time", layout(log="", live_state=live_state(expire_time="soon")), "expire_time 'soon'"),
]


@pytest.fixture
async def stub(db_url: str) -> AsyncIterator[Stub]:
    async with threads(db_url, max_entry_chars=50) as stub:
        yield stub


@pytest.mark.parametrize(
    ("files", "message"), [(f, m) for _, f, m in BAD_IMPORTS], ids=[n for n, _, _ in BAD_IMPORTS]
)
async def test_bad_imports_are_invalid_argument_naming_the_file_and_line(
    stub: Stub, files: list[threads_pb2.ThreadFile], message: str
) -> None:
    error = await expect_error(
        stub.ImportAgentThread(pb.ImportAgentThreadRequest(files=files), **as_user("u")), *INVALID
    )
    assert message in (error.details() or ""), error.details()
    # Nothing was written: the agent has no thread.
    await expect_error(export(stub), *NOT_FOUND)


async def test_oversize_content_and_handoff_are_too_large(stub: Stub) -> None:
    for files in [
        layout(log=line(1, content="x" * 51)),
        layout(log1=line(1), log="", handoff="---\nsegment: 1\n---\n" + "x" * 4097),
    ]:
        await expect_error(
            stub.ImportAgentThread(pb.ImportAgentThreadRequest(files=files), **as_user("u")),
            grpc.StatusCode.INVALID_ARGUMENT,
            "ERROR_REASON_TOO_LARGE",
        )


async def test_a_minimal_import_creates_the_agent_and_its_thread(stub: Stub) -> None:
    # An export's live_state.json is accepted; what it said was true then,
    # so nothing of it is restored (and this service alone has none to show).
    files = layout(
        log1=line(1) + "\n" + line(2),
        log=line(3) + "\n",
        handoff="---\nsegment: 1\n---\nsummary",
        live_state=live_state(),
    )
    imported = await stub.ImportAgentThread(pb.ImportAgentThreadRequest(files=files), **as_user("u"))
    assert imported.thread.id == "t-1" and imported.thread.last_sequence == 3
    agent = await stub.GetAgent(pb.GetAgentRequest(agent_id="qa"), **as_user("u"))
    assert agent.agent.display_name == "qa"
    segments = await stub.ListSegments(pb.ListSegmentsRequest(thread_id="t-1"), **as_user("u"))
    assert [(s.number, s.first_sequence, s.last_sequence, s.handoff_state) for s in segments.segments] == [
        (1, 1, 2, threads_pb2.HANDOFF_STATE_READY),
        (2, 3, 3, threads_pb2.HANDOFF_STATE_NOT_DUE),
    ]
    assert segments.segments[0].handoff_summary == "summary"
    assert [f.path for f in (await export(stub)).files] == [
        "agents/qa/log.1.jsonl",
        "agents/qa/log.jsonl",
        "agents/qa/handoff.md",
        "agents/qa/providers.json",
    ]
