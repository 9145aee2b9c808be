"""Projects in the terminal client and the MCP tools, without a system: the
global ``--project`` (before or after the command, over SWITCHBOARD_PROJECT)
reaches every project-scoped request, ``projects …`` sends the API's
requests and says what it did in English or French, a malformed project id
is refused before anything is sent, and the MCP tools that act on a
project's data name the call's project, else the server's."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from client import cli, messages
from client.api import Api
from client.mcp_tools import build_server

PROJECT = {
    "id": "apollo",
    "display_name": "Apollo",
    "owner_user_id": "alice",
    "personal": False,
    "note_policy": "review",
    "role": "owner",
    "create_time": "2026-12-04T10:00:00Z",
    "update_time": "2026-12-04T10:00:00Z",
}
PERSONAL = {**PROJECT, "id": "personal-0a1b", "display_name": "Alice", "personal": True}
ANSWER = (
    'id: 1\nevent: run_started\ndata: {"run_id":"r1","conversation_id":"c1","sequence":1}\n\n'
    'id: 2\nevent: final\ndata: {"text":"Oui.","status":"done","model":"m","run_id":"r1","sequence":2}\n\n'
)


def answer(request: httpx.Request) -> httpx.Response:
    """The API as far as these commands need it."""
    path, method = request.url.path, request.method
    if path == "/api/agent/conversations" and method == "POST":
        return httpx.Response(201, json={"id": "c1"})
    if path.endswith("/messages"):
        return httpx.Response(200, text=ANSWER, headers={"content-type": "text/event-stream"})
    if path == "/api/agent/project-context/import":
        return httpx.Response(200, json={"items": [{"path": ".ideai/CONTEXT.md", "outcome": "created"}]})
    if path == "/api/agent/projects" and method == "GET":
        return httpx.Response(200, json={"projects": [PERSONAL, PROJECT], "next_page_token": ""})
    if path == "/api/agent/projects" and method == "POST":
        body = json.loads(request.content)
        return httpx.Response(201, json={**PROJECT, **body})
    if path.endswith("/members") and method == "GET":
        member = {
            "project_id": "apollo",
            "user_id": "bob",
            "role": "viewer",
            "update_time": "2026-12-04T11:00:00Z",
        }
        return httpx.Response(200, json={"members": [member], "next_page_token": ""})
    if "/members/" in path and method == "PUT":
        user = path.rsplit("/", 1)[-1]
        return httpx.Response(
            200, json={"project_id": "apollo", "user_id": user, **json.loads(request.content)}
        )
    if "/members/" in path and method == "DELETE":
        return httpx.Response(204)
    if path.startswith("/api/agent/projects/"):
        return httpx.Response(200, json={**PROJECT, "id": path.rsplit("/", 1)[-1]})
    return httpx.Response(404, json={"error": {"code": "NOT_FOUND", "message": path, "reason": ""}})


class Gateway:
    """What the command line sent."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []
        self.handler: Callable[[httpx.Request], httpx.Response] = answer

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.handler(request)

    def sent(self) -> list[tuple[str, str, Any]]:
        """Each request as (method, path?query, JSON body or None)."""
        return [
            (
                r.method,
                r.url.raw_path.decode(),
                json.loads(r.content) if r.content else None,
            )
            for r in self.requests
        ]


@pytest.fixture
def gateway(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Gateway]:
    for name in ("SWITCHBOARD_URL", "SWITCHBOARD_TOKEN", "SWITCHBOARD_CONFIG", "SWITCHBOARD_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))  # no config file
    monkeypatch.setenv("LANG", "en_GB.UTF-8")
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.delenv("LC_MESSAGES", raising=False)
    fake = Gateway()
    monkeypatch.setattr(
        cli,
        "http_client",
        lambda settings: httpx.AsyncClient(transport=httpx.MockTransport(fake), base_url="http://sb.test"),
    )
    yield fake
    messages.use("en")


def run(*argv: str) -> int:
    try:
        return cli.main(list(argv))
    except SystemExit as exit_:  # argparse's refusals
        return int(exit_.code or 0)


@pytest.mark.parametrize(
    ("argv", "environment", "project"),
    [
        (["chat", "-m", "Bonjour"], None, None),
        (["--project", "apollo", "chat", "-m", "Bonjour"], None, "apollo"),
        (["chat", "-m", "Bonjour", "--project", "apollo"], None, "apollo"),
        (["chat", "-m", "Bonjour"], "apollo", "apollo"),
        (["chat", "-m", "Bonjour", "--project", "zeus.v2"], "apollo", "zeus.v2"),
        # An empty --project is the personal project, over the environment's.
        (["--project", "", "chat", "-m", "Bonjour"], "apollo", None),
    ],
)
def test_a_chat_message_names_the_chosen_project(
    gateway: Gateway,
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    environment: str | None,
    project: str | None,
) -> None:
    if environment is not None:
        monkeypatch.setenv("SWITCHBOARD_PROJECT", environment)
    assert run(*argv) == 0
    (_, _, message) = gateway.sent()[-1]
    assert message["message"] == "Bonjour"
    assert message.get("project_id") == project


@pytest.mark.parametrize(("argv", "query"), [([], ""), (["--project", "apollo"], "?project_id=apollo")])
def test_context_import_sends_the_folder_to_the_chosen_project(
    gateway: Gateway, tmp_path: Path, argv: list[str], query: str
) -> None:
    (tmp_path / "repo" / ".ideai").mkdir(parents=True)
    (tmp_path / "repo" / ".ideai" / "CONTEXT.md").write_text("# Apollo\n", encoding="utf-8")
    assert run("context", "import", str(tmp_path / "repo"), *argv) == 0
    assert gateway.sent() == [
        (
            "POST",
            "/api/agent/project-context/import" + query,
            {"files": [{"path": ".ideai/CONTEXT.md", "content": "# Apollo\n"}]},
        )
    ]


@pytest.mark.parametrize(
    ("language", "words"),
    [("en_GB.UTF-8", "is not a project id"), ("fr_FR.UTF-8", "n'est pas un identifiant")],
)
@pytest.mark.parametrize("value", ["a b", "équipe", "x" * 129, "a/b"])
def test_a_malformed_project_is_a_usage_error_before_any_request(
    gateway: Gateway,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    language: str,
    words: str,
    value: str,
) -> None:
    monkeypatch.setenv("LANG", language)
    assert run("--project", value, "projects", "list") == 2
    assert words in capsys.readouterr().err
    assert run("chat", "-m", "hi", "--project", value) == 2
    assert gateway.requests == []


def test_a_malformed_project_in_the_environment_is_a_settings_error(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SWITCHBOARD_PROJECT", "not a project")
    assert run("projects", "list") == 2
    assert "project" in capsys.readouterr().err and gateway.requests == []


def test_projects_list_shows_each_project_with_the_users_role(
    gateway: Gateway, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("projects", "list") == 0
    assert gateway.sent() == [("GET", "/api/agent/projects?page_size=500&page_token=", None)]
    assert capsys.readouterr().out.splitlines() == [
        "personal-0a1b\tAlice (personal)\towner\treview\talice",
        "apollo\tApollo\towner\treview\talice",
    ]
    assert run("--json", "projects", "list") == 0
    assert json.loads(capsys.readouterr().out) == [PERSONAL, PROJECT]


@pytest.mark.parametrize(
    ("argv", "body"),
    [
        (["apollo"], {"id": "apollo", "display_name": "apollo"}),
        (["apollo", "--name", "Équipe Apollo"], {"id": "apollo", "display_name": "Équipe Apollo"}),
        (
            ["apollo", "--note-policy", "auto"],
            {"id": "apollo", "display_name": "apollo", "note_policy": "auto"},
        ),
    ],
)
def test_projects_create(
    gateway: Gateway, capsys: pytest.CaptureFixture[str], argv: list[str], body: dict[str, str]
) -> None:
    assert run("projects", "create", *argv) == 0
    assert gateway.sent() == [("POST", "/api/agent/projects", body)]
    assert capsys.readouterr().out == f"created project apollo ({body['display_name']})\n"


@pytest.mark.parametrize(
    ("argv", "path"),
    [
        (["projects", "show", "zeus"], "/api/agent/projects/zeus"),
        # Without an ID: the chosen project; an ID wins over --project.
        (["--project", "apollo", "projects", "show"], "/api/agent/projects/apollo"),
        (["--project", "apollo", "projects", "show", "zeus"], "/api/agent/projects/zeus"),
        (["projects", "show", "zeus", "--project", "apollo"], "/api/agent/projects/zeus"),
        (["projects", "show"], "/api/agent/projects/personal"),
        (
            ["--project", "apollo", "projects", "members"],
            "/api/agent/projects/apollo/members?page_size=500&page_token=",
        ),
    ],
)
def test_show_and_members_name_the_id_else_the_chosen_project(
    gateway: Gateway, argv: list[str], path: str
) -> None:
    assert run(*argv) == 0
    assert [(method, sent) for method, sent, _ in gateway.sent()] == [("GET", path)]


def test_projects_show_in_french(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LANG", "fr_FR.UTF-8")
    assert run("projects", "show", "apollo") == 0
    out = capsys.readouterr().out
    assert "projet:       apollo" in out and "votre rôle:   owner" in out and "propriétaire: alice" in out


@pytest.mark.parametrize(
    ("language", "added", "removed"),
    [
        ("en_GB.UTF-8", "bob is editor of apollo", "bob is no longer a member of apollo"),
        ("fr_FR.UTF-8", "bob est editor de apollo", "bob n'est plus membre de apollo"),
    ],
)
def test_members_are_added_and_removed(
    gateway: Gateway,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    language: str,
    added: str,
    removed: str,
) -> None:
    monkeypatch.setenv("LANG", language)
    assert run("projects", "add-member", "apollo", "bob", "--role", "editor") == 0
    assert run("projects", "remove-member", "apollo", "bob") == 0
    assert gateway.sent() == [
        ("PUT", "/api/agent/projects/apollo/members/bob", {"role": "editor"}),
        ("DELETE", "/api/agent/projects/apollo/members/bob", None),
    ]
    assert capsys.readouterr().out.splitlines() == [added, removed]


def test_a_user_id_stays_one_path_segment(gateway: Gateway) -> None:
    assert run("projects", "add-member", "apollo", "../eve?x=1", "--role", "viewer") == 0
    assert gateway.sent()[0][1] == "/api/agent/projects/apollo/members/..%2Feve%3Fx%3D1"


@pytest.mark.parametrize(
    "argv",
    [
        ["projects", "add-member", "apollo", "bob"],  # no role
        ["projects", "add-member", "apollo", "bob", "--role", "admin"],
        ["projects", "create", "apollo", "--note-policy", "never"],
        ["projects", "update", "apollo"],  # nothing to change
        ["projects", "remove-member", "apollo"],
    ],
)
def test_incomplete_commands_are_usage_errors_before_any_request(gateway: Gateway, argv: list[str]) -> None:
    assert run(*argv) == 2
    assert gateway.requests == []


def test_update_sends_only_what_was_given(gateway: Gateway) -> None:
    assert run("projects", "update", "apollo", "--note-policy", "auto") == 0
    assert run("projects", "update", "apollo", "--name", "Apollo 2") == 0
    assert gateway.sent() == [
        ("PATCH", "/api/agent/projects/apollo", {"note_policy": "auto"}),
        ("PATCH", "/api/agent/projects/apollo", {"display_name": "Apollo 2"}),
    ]


@pytest.mark.parametrize(
    ("language", "words"), [("en_GB.UTF-8", "the editor role"), ("fr_FR.UTF-8", "le rôle editor")]
)
def test_a_403_says_how_to_get_a_role_and_a_404_is_not_found(
    gateway: Gateway,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    language: str,
    words: str,
) -> None:
    monkeypatch.setenv("LANG", language)
    denied = {"code": "PERMISSION_DENIED", "message": "viewers cannot add members", "reason": ""}
    gateway.handler = lambda _: httpx.Response(403, json={"error": denied})
    assert run("projects", "add-member", "apollo", "carol", "--role", "viewer") == 4
    text = " ".join(capsys.readouterr().err.split())
    assert "viewers cannot add members (HTTP 403)" in text and words in text
    missing = {"code": "NOT_FOUND", "message": "project 'zeus' not found", "reason": ""}
    gateway.handler = lambda _: httpx.Response(404, json={"error": missing})
    assert run("projects", "show", "zeus") == 3


# MCP


def api_on(seen: list[httpx.Request], project: str = "") -> Api:
    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path == "/api/agent/projects":
            token = request.url.params.get("page_token", "")
            page = {"projects": [PERSONAL], "next_page_token": "p2"} if not token else {"projects": [PROJECT]}
            return httpx.Response(200, json=page)
        return httpx.Response(200, json={"ok": True})

    http = httpx.AsyncClient(transport=httpx.MockTransport(record), base_url="http://sb.test")
    return Api(http, "token-alice", agent="architect", project=project)


async def test_list_projects_reads_every_page() -> None:
    seen: list[httpx.Request] = []
    api = api_on(seen)
    async with Client(build_server(lambda _: api)) as client:
        result = await client.call_tool("list_projects", {})
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert not result.is_error and result.structured_content == {"projects": [PERSONAL, PROJECT]}
    assert [r.url.params["page_token"] for r in seen] == ["", "p2"]
    assert (
        tools["list_projects"].annotations is not None and tools["list_projects"].annotations.read_only_hint
    )
    for name in ("save_note", "recall", "set_live_state", "live_state"):
        assert "project_id" in tools[name].input_schema["properties"], name
        assert "project_id" not in tools[name].input_schema.get("required", []), name


NOTE = {"title": "Déploiement", "body": "le vendredi", "request": "Retiens : déploiement le vendredi"}
TOOL_CALLS = [
    ("save_note", NOTE, "POST", "/api/agent/notes"),
    ("recall", {"query": "déploiement"}, "GET", "/api/agent/notes"),
    ("set_live_state", {"agent": "qa", "activity": "testing"}, "PUT", "/api/agent/live-state/qa"),
    ("live_state", {}, "GET", "/api/agent/live-state"),
]


@pytest.mark.parametrize(("tool", "arguments", "method", "path"), TOOL_CALLS)
@pytest.mark.parametrize(
    ("server", "call", "sent"),
    [("", "", None), ("apollo", "", "apollo"), ("apollo", "zeus", "zeus"), ("", "zeus", "zeus")],
)
async def test_project_tools_name_the_calls_project_else_the_servers(
    tool: str,
    arguments: dict[str, Any],
    method: str,
    path: str,
    server: str,
    call: str,
    sent: str | None,
) -> None:
    seen: list[httpx.Request] = []
    api = api_on(seen, project=server)
    async with Client(build_server(lambda _: api)) as client:
        result = await client.call_tool(tool, {**arguments, **({"project_id": call} if call else {})})
    assert not result.is_error, result.content
    (request,) = seen
    assert (request.method, request.url.path) == (method, path)
    assert request.url.params.get("project_id") == sent


@pytest.mark.parametrize("value", ["a b", "x" * 129, "équipe"])
async def test_a_malformed_project_never_reaches_the_api(value: str) -> None:
    seen: list[httpx.Request] = []
    api = api_on(seen)
    async with Client(build_server(lambda _: api)) as client:
        result = await client.call_tool("live_state", {"project_id": value})
    assert result.is_error and seen == []
