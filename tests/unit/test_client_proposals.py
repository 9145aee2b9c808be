"""Note proposals in the terminal client and the MCP tools, without a
system: ``proposals list`` reads the chosen project's (every page, the
state filter), ``show`` prints the proposal and its diff, ``accept`` and
``refuse`` send the API's requests and say what they did in English or
French; a bad state is refused before anything is sent, an id stays one
path segment, and the API's refusals keep their exit codes. The MCP tools
read every page of the call's project (else the server's) and decide by id."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from client import cli, messages
from client.api import Api
from client.mcp_tools import build_server
from tests.unit.test_client_projects import Gateway, run

TARGET = {
    "id": "note-1",
    "project_id": "apollo",
    "kind": "fact",
    "title": "Base de données",
    "body": "Le service tourne sur PostgreSQL 15.",
    "tags": [],
    "author_agent_id": "",
    "source": "",
}
PROPOSAL = {
    "id": "p-1",
    "project_id": "apollo",
    "note": {**TARGET, "id": "", "body": "Le service tourne sur PostgreSQL 16.", "author_agent_id": "qa"},
    "reason": "the migration finished",
    "proposer_user_id": "alice",
    "run_id": "run-9",
    "target_note": TARGET,
    "match_reason": "embedding cosine 0.912 >= 0.70",
    "diff": {
        "old_label": "note note-1",
        "new_label": "proposal",
        "unified": "",
        "hunks": [
            {
                "old_start": 1,
                "old_lines": 3,
                "new_start": 1,
                "new_lines": 3,
                "lines": [
                    {"kind": "context", "text": "# Base de données"},
                    {"kind": "context", "text": ""},
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
    "create_time": "2026-12-04T10:00:00Z",
}
NEW = {
    **PROPOSAL,
    "id": "p-2",
    "target_note": None,
    "match_reason": "",
    "note": {**PROPOSAL["note"], "title": "CI"},
}


def answer(request: httpx.Request) -> httpx.Response:
    """The note proposal routes as far as these commands need them."""
    path, method = request.url.path, request.method
    if path == "/api/agent/note-proposals" and method == "GET":
        if request.url.params.get("page_token"):
            return httpx.Response(200, json={"proposals": [NEW], "next_page_token": ""})
        return httpx.Response(200, json={"proposals": [PROPOSAL], "next_page_token": "t2"})
    if path.endswith("/accept") and method == "POST":
        proposal = {
            **PROPOSAL,
            "state": "accepted",
            "decided_by_user_id": "alice",
            "result_note_id": "note-1",
        }
        return httpx.Response(200, json={"proposal": proposal, "note": {**TARGET, "body": "PostgreSQL 16"}})
    if path.endswith("/refuse") and method == "POST":
        return httpx.Response(200, json={"proposal": {**PROPOSAL, "state": "refused"}})
    if path.startswith("/api/agent/note-proposals/") and method == "GET":
        return httpx.Response(200, json=PROPOSAL)
    return httpx.Response(404, json={"error": {"code": "NOT_FOUND", "message": path, "reason": ""}})


@pytest.fixture
def gateway(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Gateway]:
    for name in ("SWITCHBOARD_URL", "SWITCHBOARD_TOKEN", "SWITCHBOARD_CONFIG", "SWITCHBOARD_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))  # no config file
    monkeypatch.setenv("LANG", "en_GB.UTF-8")
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.delenv("LC_MESSAGES", raising=False)
    fake = Gateway()
    fake.handler = answer
    monkeypatch.setattr(
        cli,
        "http_client",
        lambda settings: httpx.AsyncClient(transport=httpx.MockTransport(fake), base_url="http://sb.test"),
    )
    yield fake
    messages.use("en")


@pytest.mark.parametrize(
    ("argv", "environment", "query"),
    [
        ([], None, ""),
        (["--project", "apollo"], None, "project_id=apollo&"),
        ([], "apollo", "project_id=apollo&"),
        (["--state", "pending"], None, "state=pending&"),
        (["--project", "zeus", "--state", "refused"], "apollo", "project_id=zeus&state=refused&"),
    ],
)
def test_list_reads_every_page_of_the_chosen_project(
    gateway: Gateway,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    environment: str | None,
    query: str,
) -> None:
    if environment is not None:
        monkeypatch.setenv("SWITCHBOARD_PROJECT", environment)
    assert run("proposals", "list", *argv) == 0
    assert [sent for _, sent, _ in gateway.sent()] == [
        f"/api/agent/note-proposals?{query}page_size=500&page_token=",
        f"/api/agent/note-proposals?{query}page_size=500&page_token=t2",
    ]
    assert capsys.readouterr().out.splitlines() == [
        "p-1\tpending\tfact\tBase de données\tqa\tnote-1\t2026-12-04T10:00:00Z",
        "p-2\tpending\tfact\tCI\tqa\t-\t2026-12-04T10:00:00Z",
    ]


def test_list_as_json_is_every_proposal(gateway: Gateway, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("--json", "proposals", "list") == 0
    assert json.loads(capsys.readouterr().out) == [PROPOSAL, NEW]


@pytest.mark.parametrize(
    ("language", "lines"),
    [
        (
            "en_GB.UTF-8",
            ["proposal:       p-1", "updates:        note-1 (Base de données)", "proposed by:    alice"],
        ),
        (
            "fr_FR.UTF-8",
            ["proposition:    p-1", "met à jour:     note-1 (Base de données)", "proposée par:   alice"],
        ),
    ],
)
def test_show_prints_the_proposal_and_its_diff(
    gateway: Gateway,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    language: str,
    lines: list[str],
) -> None:
    monkeypatch.setenv("LANG", language)
    assert run("proposals", "show", "p-1") == 0
    assert gateway.sent() == [("GET", "/api/agent/note-proposals/p-1", None)]
    out = capsys.readouterr().out.splitlines()
    assert set(lines) <= set(out), out
    assert out[-5:] == [
        "@@ -1,3 +1,3 @@",
        " # Base de données",
        " ",
        "-Le service tourne sur PostgreSQL 15.",
        "+Le service tourne sur PostgreSQL 16.",
    ]


def test_show_of_a_new_note_says_so(gateway: Gateway, capsys: pytest.CaptureFixture[str]) -> None:
    gateway.handler = lambda _: httpx.Response(200, json={**NEW, "diff": {"hunks": []}})
    assert run("proposals", "show", "p-2") == 0
    out = capsys.readouterr().out.splitlines()
    assert "updates:        a new note" in out and out[-1] == "(no change)"


@pytest.mark.parametrize(
    ("language", "accepted", "refused"),
    [
        (
            "en_GB.UTF-8",
            "accepted proposal p-1: note note-1 (Base de données) is in the project's memory",
            "refused proposal p-1: nothing was written",
        ),
        (
            "fr_FR.UTF-8",
            "proposition p-1 acceptée : la note note-1 (Base de données) est dans la mémoire du projet",
            "proposition p-1 refusée : rien n'a été écrit",
        ),
    ],
)
def test_accept_and_refuse(
    gateway: Gateway,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    language: str,
    accepted: str,
    refused: str,
) -> None:
    monkeypatch.setenv("LANG", language)
    assert run("proposals", "accept", "p-1") == 0
    assert run("proposals", "refuse", "p-1", "--project", "apollo") == 0
    assert gateway.sent() == [
        ("POST", "/api/agent/note-proposals/p-1/accept", None),
        ("POST", "/api/agent/note-proposals/p-1/refuse", None),
    ]
    assert capsys.readouterr().out.splitlines() == [accepted, refused]


def test_a_decision_as_json_is_the_apis_answer(gateway: Gateway, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("--json", "proposals", "accept", "p-1") == 0
    decided = json.loads(capsys.readouterr().out)
    assert decided["proposal"]["state"] == "accepted" and decided["note"]["id"] == "note-1"


def test_an_id_stays_one_path_segment(gateway: Gateway) -> None:
    assert run("proposals", "refuse", "../p-1?x=1") == 0
    assert gateway.sent()[0][1] == "/api/agent/note-proposals/..%2Fp-1%3Fx%3D1/refuse"


@pytest.mark.parametrize(
    "argv",
    [
        ["proposals", "list", "--state", "waiting"],
        ["proposals", "list", "--state", "PENDING"],
        ["proposals", "show"],
        ["proposals", "accept"],
        ["proposals", "refuse", "p-1", "p-2"],
        ["proposals"],
    ],
)
def test_incomplete_commands_are_usage_errors_before_any_request(gateway: Gateway, argv: list[str]) -> None:
    assert run(*argv) == 2
    assert gateway.requests == []


@pytest.mark.parametrize(
    ("status", "code", "exit_code"),
    [(403, "PERMISSION_DENIED", 4), (404, "NOT_FOUND", 3), (409, "FAILED_PRECONDITION", 5)],
)
def test_the_apis_refusals_keep_their_exit_codes(
    gateway: Gateway, capsys: pytest.CaptureFixture[str], status: int, code: str, exit_code: int
) -> None:
    message = "viewers cannot decide note proposals"
    gateway.handler = lambda _: httpx.Response(
        status, json={"error": {"code": code, "message": message, "reason": ""}}
    )
    assert run("proposals", "accept", "p-1") == exit_code
    err = " ".join(capsys.readouterr().err.split())
    assert f"{message} (HTTP {status})" in err
    # A 403 also says how to get a role that may.
    assert ("the editor role" in err) == (status == 403)


# MCP


def api_on(seen: list[httpx.Request], project: str = "") -> Api:
    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answer(request)

    http = httpx.AsyncClient(transport=httpx.MockTransport(record), base_url="http://sb.test")
    return Api(http, "token-alice", agent="architect", project=project)


@pytest.mark.parametrize(
    ("server", "arguments", "params"),
    [
        ("", {}, {}),
        ("apollo", {}, {"project_id": "apollo"}),
        ("apollo", {"project_id": "zeus", "state": "pending"}, {"project_id": "zeus", "state": "pending"}),
        ("", {"state": "accepted"}, {"state": "accepted"}),
    ],
)
async def test_list_note_proposals_reads_every_page_of_the_project(
    server: str, arguments: dict[str, str], params: dict[str, str]
) -> None:
    seen: list[httpx.Request] = []
    api = api_on(seen, project=server)
    async with Client(build_server(lambda _: api)) as client:
        result = await client.call_tool("list_note_proposals", arguments)
    assert not result.is_error, result.content
    assert result.structured_content == {"proposals": [PROPOSAL, NEW]}
    assert [dict(r.url.params) for r in seen] == [
        {**params, "page_size": "500", "page_token": ""},
        {**params, "page_size": "500", "page_token": "t2"},
    ]


async def test_proposals_are_decided_by_id() -> None:
    seen: list[httpx.Request] = []
    api = api_on(seen)
    async with Client(build_server(lambda _: api)) as client:
        accepted = await client.call_tool("accept_note_proposal", {"id": "p-1"})
        refused = await client.call_tool("refuse_note_proposal", {"id": "a/b"})
    assert not accepted.is_error and accepted.structured_content is not None
    assert accepted.structured_content["note"]["id"] == "note-1"
    assert not refused.is_error and refused.structured_content is not None
    assert refused.structured_content["proposal"]["state"] == "refused"
    assert [(r.method, r.url.raw_path.decode()) for r in seen] == [
        ("POST", "/api/agent/note-proposals/p-1/accept"),
        ("POST", "/api/agent/note-proposals/a%2Fb/refuse"),
    ]


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("list_note_proposals", {"state": "waiting"}),
        ("list_note_proposals", {"project_id": "a b"}),
        ("accept_note_proposal", {"id": ""}),
        ("refuse_note_proposal", {"id": "x" * 129}),
        ("accept_note_proposal", {}),
    ],
)
async def test_bad_arguments_never_reach_the_api(tool: str, arguments: dict[str, Any]) -> None:
    seen: list[httpx.Request] = []
    api = api_on(seen)
    async with Client(build_server(lambda _: api)) as client:
        result = await client.call_tool(tool, arguments)
    assert result.is_error and seen == []


async def test_a_viewers_refusal_is_a_tool_error_with_a_hint() -> None:
    body = {"error": {"code": "PERMISSION_DENIED", "message": "viewers cannot decide", "reason": ""}}

    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(403, json=body)

    http = httpx.AsyncClient(transport=httpx.MockTransport(refuse), base_url="http://sb.test")
    api = Api(http, "token-bob", agent="architect")
    async with Client(build_server(lambda _: api)) as client:
        result = await client.call_tool("accept_note_proposal", {"id": "p-1"})
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    error = json.loads(text[text.index("{") :])["error"]
    assert (
        error["status"] == 403 and error["message"] == "viewers cannot decide" and "editor" in error["hint"]
    )
