"""The note proposal routes, in-process over a fake memory service:
malformed paths and queries are refused before any service is called (never
a 5xx), and what a well-formed request sends and answers is the contract's
(the state by its short name both ways, the notes rendered as the notes
routes render a note, target_note null for a new note, the diff as the page
proposals' diff, the service's refusals with their status). The rules
(membership, roles, a decided or stale proposal) are tested against the
memory service itself."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from switchboard.memory.v1 import memory_pb2, memory_service_pb2, pages_pb2
from tests.unit.test_gateway_projects import client_of
from tests.unit.test_gateway_streams import NoService, app_with, rpc_error

WHEN = Timestamp(seconds=1_790_000_000)
LATER = Timestamp(seconds=1_790_000_600)
PROPOSAL_ID = "7b0c9a52-3f7e-4d7e-9a51-0c2f3e4d5a6b"
TARGET = memory_pb2.Note(
    id="note-1",
    project_id="apollo",
    kind=memory_pb2.NOTE_KIND_FACT,
    title="Base de données",
    body="Le service tourne sur PostgreSQL 15.",
    tags=["infra"],
    update_time=WHEN,
)
DIFF = pages_pb2.TextDiff(
    old_label="note note-1",
    new_label="proposal",
    unified="--- note note-1\n+++ proposal\n@@ -3 +3 @@\n-Le service tourne sur PostgreSQL 15.\n"
    "+Le service tourne sur PostgreSQL 16.\n",
    hunks=[
        pages_pb2.DiffHunk(
            old_start=3,
            old_lines=1,
            new_start=3,
            new_lines=1,
            lines=[
                pages_pb2.DiffLine(
                    kind=pages_pb2.DIFF_LINE_KIND_REMOVED, text="Le service tourne sur PostgreSQL 15."
                ),
                pages_pb2.DiffLine(
                    kind=pages_pb2.DIFF_LINE_KIND_ADDED, text="Le service tourne sur PostgreSQL 16."
                ),
            ],
        )
    ],
    added_lines=1,
    removed_lines=1,
)


def proposal(
    state: int = memory_pb2.NOTE_PROPOSAL_STATE_PENDING, target: bool = True
) -> memory_pb2.NoteProposal:
    made = memory_pb2.NoteProposal(
        id=PROPOSAL_ID,
        project_id="apollo",
        note=memory_pb2.Note(
            project_id="apollo",
            kind=memory_pb2.NOTE_KIND_FACT,
            title="Base de données",
            body="Le service tourne sur PostgreSQL 16.",
            tags=["infra"],
            author_agent_id="qa",
        ),
        reason="the migration to 16 finished today",
        proposer_user_id="alice",
        run_id="run-9",
        diff=DIFF,
        state=state,  # type: ignore[arg-type]
        create_time=WHEN,
    )
    if target:
        made.target_note.CopyFrom(TARGET)
        made.match_reason = "embedding cosine 0.912 >= 0.70"
    if state != memory_pb2.NOTE_PROPOSAL_STATE_PENDING:
        made.decided_by_user_id = "bob"
        made.decide_time.CopyFrom(LATER)
    if state == memory_pb2.NOTE_PROPOSAL_STATE_ACCEPTED:
        made.result_note_id = "note-1"
    return made


class FakeMemory:
    """MemoryService's note proposal RPCs answering from fixed objects,
    recording each request (or refusing every call with ``refusal``)."""

    def __init__(self, refusal: grpc.aio.AioRpcError | None = None) -> None:
        self.requests: list[tuple[str, Any]] = []
        self.refusal = refusal

    def _seen(self, name: str, request: Any) -> None:
        self.requests.append((name, request))
        if self.refusal is not None:
            raise self.refusal

    async def ListNoteProposals(self, request: Any, **_: Any) -> Any:  # noqa: N802
        self._seen("ListNoteProposals", request)
        return memory_service_pb2.ListNoteProposalsResponse(
            proposals=[proposal(), proposal(target=False)], next_page_token="t2"
        )

    async def GetNoteProposal(self, request: Any, **_: Any) -> Any:  # noqa: N802
        self._seen("GetNoteProposal", request)
        return memory_service_pb2.GetNoteProposalResponse(proposal=proposal(target=False))

    async def AcceptNoteProposal(self, request: Any, **_: Any) -> Any:  # noqa: N802
        self._seen("AcceptNoteProposal", request)
        note = memory_pb2.Note()
        note.CopyFrom(TARGET)
        note.body = "Le service tourne sur PostgreSQL 16."
        note.update_time.CopyFrom(LATER)
        return memory_service_pb2.AcceptNoteProposalResponse(
            proposal=proposal(memory_pb2.NOTE_PROPOSAL_STATE_ACCEPTED), note=note
        )

    async def RefuseNoteProposal(self, request: Any, **_: Any) -> Any:  # noqa: N802
        self._seen("RefuseNoteProposal", request)
        return memory_service_pb2.RefuseNoteProposalResponse(
            proposal=proposal(memory_pb2.NOTE_PROPOSAL_STATE_REFUSED)
        )


@pytest.fixture
async def no_services() -> AsyncIterator[httpx.AsyncClient]:
    async with client_of(app_with(NoService())) as client:
        yield client


@pytest.fixture
def memory() -> FakeMemory:
    return FakeMemory()


@pytest.fixture
async def gateway(memory: FakeMemory) -> AsyncIterator[httpx.AsyncClient]:
    app = app_with(NoService())
    app.state.memory = memory
    async with client_of(app) as client:
        yield client


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/agent/note-proposals/" + "a" * 129),
        ("GET", "/api/agent/note-proposals/a%20b"),
        ("GET", "/api/agent/note-proposals/%C3%A9t%C3%A9"),  # été
        ("GET", "/api/agent/note-proposals/a%00b"),
        ("GET", "/api/agent/note-proposals/-leading-dash"),
        ("POST", "/api/agent/note-proposals/a%3Bb/accept"),  # a;b
        ("POST", "/api/agent/note-proposals/%27%20OR%201%3D1/refuse"),  # ' OR 1=1
        ("POST", "/api/agent/note-proposals/" + "x" * 5000 + "/accept"),
        ("GET", "/api/agent/note-proposals?state=PENDING"),
        ("GET", "/api/agent/note-proposals?state=unspecified"),
        ("GET", "/api/agent/note-proposals?state=waiting"),
        ("GET", "/api/agent/note-proposals?project_id=a%20b"),
        ("GET", "/api/agent/note-proposals?project_id=" + "p" * 129),
        ("GET", "/api/agent/note-proposals?project_id=%C3%A9quipe"),
        ("GET", "/api/agent/note-proposals?page_size=501"),
        ("GET", "/api/agent/note-proposals?page_size=-1"),
        ("GET", "/api/agent/note-proposals?page_token=%22"),
    ],
)
async def test_malformed_requests_are_400_before_any_service(
    no_services: httpx.AsyncClient, method: str, path: str
) -> None:
    response = await no_services.request(method, path)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "INVALID_ARGUMENT" and error["message"], error


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/agent/note-proposals/a%2Fb"),  # a/b: no such route
        ("POST", "/api/agent/note-proposals/"),
        ("POST", "/api/agent/note-proposals/p1/unknown"),
        ("DELETE", "/api/agent/note-proposals/p1"),
        ("PUT", "/api/agent/note-proposals/p1/accept"),
        ("GET", "/api/agent/note-proposals/p1/accept"),
    ],
)
async def test_paths_no_route_matches_are_never_served_nor_5xx(
    no_services: httpx.AsyncClient, method: str, path: str
) -> None:
    response = await no_services.request(method, path)
    # 404 or 405, or the framework's redirect of a trailing slash: no service is called.
    assert 300 <= response.status_code < 500, (method, path, response.text)


RENDERED_TARGET = {
    "id": "note-1",
    "project_id": "apollo",
    "kind": "fact",
    "title": "Base de données",
    "body": "Le service tourne sur PostgreSQL 15.",
    "tags": ["infra"],
    "author_agent_id": "",
    "source": "",
    "update_time": "2026-09-21T14:13:20Z",
}


async def test_a_listed_proposal_is_rendered_with_its_notes_and_diff(
    gateway: httpx.AsyncClient, memory: FakeMemory
) -> None:
    listed = await gateway.get(
        "/api/agent/note-proposals",
        params={"project_id": "apollo", "state": "pending", "page_size": 20, "page_token": "t1"},
    )
    assert listed.status_code == 200, listed.text
    body = listed.json()
    assert body["next_page_token"] == "t2"
    updating, new = body["proposals"]
    assert updating == {
        "id": PROPOSAL_ID,
        "project_id": "apollo",
        "note": {
            "id": "",
            "project_id": "apollo",
            "kind": "fact",
            "title": "Base de données",
            "body": "Le service tourne sur PostgreSQL 16.",
            "tags": ["infra"],
            "author_agent_id": "qa",
            "source": "",
        },
        "reason": "the migration to 16 finished today",
        "proposer_user_id": "alice",
        "run_id": "run-9",
        "target_note": RENDERED_TARGET,
        "match_reason": "embedding cosine 0.912 >= 0.70",
        "diff": {
            "old_label": "note note-1",
            "new_label": "proposal",
            "unified": DIFF.unified,
            "hunks": [
                {
                    "old_start": 3,
                    "old_lines": 1,
                    "new_start": 3,
                    "new_lines": 1,
                    "lines": [
                        {"kind": "removed", "text": "Le service tourne sur PostgreSQL 15."},
                        {"kind": "added", "text": "Le service tourne sur PostgreSQL 16."},
                    ],
                }
            ],
            "added_lines": 1,
            "removed_lines": 1,
        },
        "state": "pending",
        "decided_by_user_id": "",
        "result_note_id": "",
        "create_time": "2026-09-21T14:13:20Z",
    }
    # A new note: target_note is null (present), match_reason empty.
    assert new["target_note"] is None and new["match_reason"] == ""
    assert "decide_time" not in new
    ((name, request),) = memory.requests
    assert name == "ListNoteProposals"
    assert request == memory_service_pb2.ListNoteProposalsRequest(
        project_id="apollo", state=memory_pb2.NOTE_PROPOSAL_STATE_PENDING, page_size=20, page_token="t1"
    )


@pytest.mark.parametrize(
    ("query", "project", "state"),
    [
        ({}, "", memory_pb2.NOTE_PROPOSAL_STATE_UNSPECIFIED),
        ({"state": ""}, "", memory_pb2.NOTE_PROPOSAL_STATE_UNSPECIFIED),
        (
            {"state": "accepted", "project_id": "personal"},
            "personal",
            memory_pb2.NOTE_PROPOSAL_STATE_ACCEPTED,
        ),
        ({"state": "refused", "project_id": "a.b_c-1"}, "a.b_c-1", memory_pb2.NOTE_PROPOSAL_STATE_REFUSED),
    ],
)
async def test_the_state_and_project_reach_the_service(
    gateway: httpx.AsyncClient, memory: FakeMemory, query: dict[str, str], project: str, state: int
) -> None:
    response = await gateway.get("/api/agent/note-proposals", params=query)
    assert response.status_code == 200, response.text
    ((_, request),) = memory.requests
    assert (request.project_id, request.state, request.page_size) == (project, state, 50)


async def test_one_proposal_is_read_by_its_id(gateway: httpx.AsyncClient, memory: FakeMemory) -> None:
    response = await gateway.get(f"/api/agent/note-proposals/{PROPOSAL_ID}")
    assert response.status_code == 200, response.text
    assert response.json()["id"] == PROPOSAL_ID and response.json()["target_note"] is None
    assert memory.requests == [("GetNoteProposal", memory_service_pb2.GetNoteProposalRequest(id=PROPOSAL_ID))]


async def test_accepting_answers_the_proposal_and_the_note_written(
    gateway: httpx.AsyncClient, memory: FakeMemory
) -> None:
    response = await gateway.post(f"/api/agent/note-proposals/{PROPOSAL_ID}/accept")
    assert response.status_code == 200, response.text
    decided = response.json()
    assert set(decided) == {"proposal", "note"}
    assert decided["proposal"]["state"] == "accepted"
    assert decided["proposal"]["decided_by_user_id"] == "bob"
    assert decided["proposal"]["result_note_id"] == "note-1"
    assert decided["proposal"]["decide_time"] == "2026-09-21T14:23:20Z"
    assert decided["note"] == {
        **RENDERED_TARGET,
        "body": "Le service tourne sur PostgreSQL 16.",
        "update_time": "2026-09-21T14:23:20Z",
    }
    assert memory.requests == [
        ("AcceptNoteProposal", memory_service_pb2.AcceptNoteProposalRequest(id=PROPOSAL_ID))
    ]


async def test_refusing_answers_the_proposal_only(gateway: httpx.AsyncClient, memory: FakeMemory) -> None:
    # A body is neither needed nor read.
    response = await gateway.post(f"/api/agent/note-proposals/{PROPOSAL_ID}/refuse", json={"reason": "x"})
    assert response.status_code == 200, response.text
    assert set(response.json()) == {"proposal"}
    assert response.json()["proposal"]["state"] == "refused"
    assert memory.requests == [
        ("RefuseNoteProposal", memory_service_pb2.RefuseNoteProposalRequest(id=PROPOSAL_ID))
    ]


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (grpc.StatusCode.NOT_FOUND, 404),
        (grpc.StatusCode.PERMISSION_DENIED, 403),
        (grpc.StatusCode.FAILED_PRECONDITION, 409),
        (grpc.StatusCode.INVALID_ARGUMENT, 400),
    ],
)
async def test_the_services_refusals_keep_their_status(code: grpc.StatusCode, status: int) -> None:
    app = app_with(NoService())
    memory = FakeMemory(rpc_error(code, f"note proposal {PROPOSAL_ID!r} says no"))
    app.state.memory = memory
    async with client_of(app) as client:
        for method, path in (
            ("GET", "/api/agent/note-proposals?project_id=apollo"),
            ("GET", f"/api/agent/note-proposals/{PROPOSAL_ID}"),
            ("POST", f"/api/agent/note-proposals/{PROPOSAL_ID}/accept"),
            ("POST", f"/api/agent/note-proposals/{PROPOSAL_ID}/refuse"),
        ):
            response = await client.request(method, path)
            assert response.status_code == status, (method, path, response.text)
            assert response.json()["error"]["message"] == f"note proposal {PROPOSAL_ID!r} says no"
    assert len(memory.requests) == 4


async def test_reads_are_retried_on_unavailable_and_decisions_are_not() -> None:
    """A decision's answer lost on the way would make its retry find the
    proposal decided (409): it is sent once; a read is safe to repeat."""
    app = app_with(NoService())
    memory = FakeMemory(rpc_error(grpc.StatusCode.UNAVAILABLE, "memory is restarting"))
    app.state.memory = memory
    async with client_of(app) as client:
        for method, path, calls in (
            ("GET", f"/api/agent/note-proposals/{PROPOSAL_ID}", 3),
            ("POST", f"/api/agent/note-proposals/{PROPOSAL_ID}/accept", 1),
            ("POST", f"/api/agent/note-proposals/{PROPOSAL_ID}/refuse", 1),
        ):
            memory.requests.clear()
            response = await client.request(method, path)
            assert response.status_code == 503, response.text
            assert len(memory.requests) == calls, (method, path)
