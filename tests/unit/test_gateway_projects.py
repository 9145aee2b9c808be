"""The project routes, a chat message's project and the OpenAI endpoint's
X-Switchboard-Project header, in-process over fake services: malformed
paths, bodies and headers are refused before any service is called (never a
5xx), and what a well-formed request sends and answers is the contract's
(the role and note policy by their short names, only the fields given in
the update mask, the project passed on to StartRun). The services' rules
(membership, roles) are tested against the memory service itself."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import pytest
from fastapi import FastAPI
from google.protobuf.timestamp_pb2 import Timestamp

from switchboard.memory.v1 import memory_pb2, memory_service_pb2, projects_pb2, projects_service_pb2
from switchboard.threads.v1 import threads_pb2, threads_service_pb2
from tests.unit.test_gateway_streams import FlakyEngine, NoService, app_with, rpc_error

WHEN = Timestamp(seconds=1_790_000_000)
APOLLO = projects_pb2.Project(
    id="apollo",
    display_name="Apollo",
    owner_user_id="alice",
    note_policy=projects_pb2.NOTE_POLICY_AUTO,
    caller_role=projects_pb2.PROJECT_ROLE_EDITOR,
    create_time=WHEN,
    update_time=WHEN,
)


class FakeProjects:
    """ProjectsService answering from fixed objects, recording each request."""

    def __init__(self, refusal: grpc.aio.AioRpcError | None = None) -> None:
        self.requests: list[tuple[str, Any]] = []
        self.refusal = refusal

    def _seen(self, name: str, request: Any) -> None:
        self.requests.append((name, request))
        if self.refusal is not None:
            raise self.refusal

    async def ListProjects(self, request: Any, **_: Any) -> Any:  # noqa: N802
        self._seen("ListProjects", request)
        return projects_service_pb2.ListProjectsResponse(projects=[APOLLO], next_page_token="t2")

    async def CreateProject(self, request: Any, **_: Any) -> Any:  # noqa: N802
        self._seen("CreateProject", request)
        project = projects_pb2.Project()
        project.CopyFrom(request.project)
        project.owner_user_id, project.caller_role = "alice", projects_pb2.PROJECT_ROLE_OWNER
        return projects_service_pb2.CreateProjectResponse(project=project)

    async def GetProject(self, request: Any, **_: Any) -> Any:  # noqa: N802
        self._seen("GetProject", request)
        return projects_service_pb2.GetProjectResponse(project=APOLLO)

    async def UpdateProject(self, request: Any, **_: Any) -> Any:  # noqa: N802
        self._seen("UpdateProject", request)
        return projects_service_pb2.UpdateProjectResponse(project=APOLLO)

    async def ListProjectMembers(self, request: Any, **_: Any) -> Any:  # noqa: N802
        self._seen("ListProjectMembers", request)
        member = projects_pb2.ProjectMember(
            project_id=request.project_id,
            user_id="bob",
            role=projects_pb2.PROJECT_ROLE_VIEWER,
            update_time=WHEN,
        )
        return projects_service_pb2.ListProjectMembersResponse(members=[member])

    async def SetProjectMember(self, request: Any, **_: Any) -> Any:  # noqa: N802
        self._seen("SetProjectMember", request)
        return projects_service_pb2.SetProjectMemberResponse(member=request.member)

    async def RemoveProjectMember(self, request: Any, **_: Any) -> Any:  # noqa: N802
        self._seen("RemoveProjectMember", request)
        return projects_service_pb2.RemoveProjectMemberResponse()

    async def CheckProjectAccess(self, request: Any, **_: Any) -> Any:  # noqa: N802
        self._seen("CheckProjectAccess", request)
        return projects_service_pb2.CheckProjectAccessResponse(
            project_id=request.project_id, role=projects_pb2.PROJECT_ROLE_VIEWER
        )


def client_of(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


@pytest.fixture
async def no_services() -> AsyncIterator[httpx.AsyncClient]:
    async with client_of(app_with(NoService())) as client:
        yield client


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/api/agent/projects/" + "a" * 129, None),
        ("GET", "/api/agent/projects/apollo%20two", None),
        ("GET", "/api/agent/projects/%C3%A9t%C3%A9", None),  # été
        ("GET", "/api/agent/projects/a%00b", None),
        ("GET", "/api/agent/projects/a%3Bb/members", None),  # a;b
        ("GET", "/api/agent/projects?page_size=501", None),
        ("GET", "/api/agent/projects?page_token=%22", None),
        ("GET", "/api/agent/projects/apollo/members?page_size=-1", None),
        ("PATCH", "/api/agent/projects/a%20b", {"display_name": "x"}),
        ("PUT", "/api/agent/projects/apollo/members/bob%0Aeve", {"role": "viewer"}),
        ("PUT", "/api/agent/projects/apollo/members/" + "b" * 129, {"role": "viewer"}),
        ("DELETE", "/api/agent/projects/apollo/members/bob%7F", None),
        ("DELETE", "/api/agent/projects/apo%24llo/members/bob", None),  # apo$llo
        ("POST", "/api/agent/projects", {"id": "apollo"}),  # no display_name
        ("POST", "/api/agent/projects", {"id": "", "display_name": "Apollo"}),
        ("POST", "/api/agent/projects", {"id": "a b", "display_name": "Apollo"}),
        ("POST", "/api/agent/projects", {"id": "x" * 129, "display_name": "Apollo"}),
        ("POST", "/api/agent/projects", {"id": "apollo", "display_name": ""}),
        ("POST", "/api/agent/projects", {"id": "apollo", "display_name": "A", "note_policy": "never"}),
        ("POST", "/api/agent/projects", {"id": "apollo", "display_name": "A", "owner_user_id": "eve"}),
        ("PATCH", "/api/agent/projects/apollo", {}),
        ("PATCH", "/api/agent/projects/apollo", {"display_name": None, "note_policy": None}),
        ("PATCH", "/api/agent/projects/apollo", {"display_name": ""}),
        ("PATCH", "/api/agent/projects/apollo", {"note_policy": "AUTO"}),
        ("PUT", "/api/agent/projects/apollo/members/bob", {}),
        ("PUT", "/api/agent/projects/apollo/members/bob", {"role": "admin"}),
        ("PUT", "/api/agent/projects/apollo/members/bob", {"role": "unspecified"}),
        ("POST", "/api/agent/conversations/c/messages", {"message": "hi", "project_id": "a b"}),
        ("POST", "/api/agent/conversations/c/messages", {"message": "hi", "project_id": "p" * 129}),
        ("POST", "/api/agent/conversations/c/messages", {"message": "hi", "project_id": "équipe"}),
    ],
)
async def test_malformed_project_requests_are_400_before_any_service(
    no_services: httpx.AsyncClient, method: str, path: str, body: Any
) -> None:
    response = await no_services.request(method, path, json=body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "INVALID_ARGUMENT" and error["message"], error


@pytest.mark.parametrize(
    "path",
    [
        "/api/agent/projects/a%2Fb",  # a/b: no such route
        "/api/agent/projects/apollo/members/",
        "/api/agent/projects/apollo/unknown",
    ],
)
async def test_paths_no_route_matches_are_never_served_nor_5xx(
    no_services: httpx.AsyncClient, path: str
) -> None:
    for method in ("GET", "PUT", "DELETE", "PATCH"):
        response = await no_services.request(method, path, json={"role": "viewer"})
        # 404 or 405, or the framework's redirect of a trailing slash: no service is called.
        assert 300 <= response.status_code < 500, (method, path, response.text)


@pytest.fixture
def projects() -> FakeProjects:
    return FakeProjects()


@pytest.fixture
async def gateway(projects: FakeProjects) -> AsyncIterator[httpx.AsyncClient]:
    app = app_with(NoService())
    app.state.projects = projects
    async with client_of(app) as client:
        yield client


async def test_a_project_is_answered_with_the_callers_role_and_short_names(
    gateway: httpx.AsyncClient, projects: FakeProjects
) -> None:
    listed = await gateway.get("/api/agent/projects", params={"page_size": 20, "page_token": "t1"})
    assert listed.status_code == 200, listed.text
    assert listed.json() == {
        "projects": [
            {
                "id": "apollo",
                "display_name": "Apollo",
                "owner_user_id": "alice",
                "personal": False,
                "note_policy": "auto",
                "role": "editor",
                "create_time": "2026-09-21T14:13:20Z",
                "update_time": "2026-09-21T14:13:20Z",
            }
        ],
        "next_page_token": "t2",
    }
    ((name, request),) = projects.requests
    assert name == "ListProjects" and (request.page_size, request.page_token) == (20, "t1")
    one = await gateway.get("/api/agent/projects/personal")
    assert one.status_code == 200 and one.json()["role"] == "editor" and "caller_role" not in one.json()
    assert projects.requests[-1] == ("GetProject", projects_service_pb2.GetProjectRequest(id="personal"))


@pytest.mark.parametrize(
    ("body", "policy"),
    [
        ({"id": "apollo", "display_name": "Apollo"}, projects_pb2.NOTE_POLICY_UNSPECIFIED),
        (
            {"id": "apollo.v2_x-1", "display_name": "Équipe Apollo", "note_policy": "auto"},
            projects_pb2.NOTE_POLICY_AUTO,
        ),
        ({"id": "A", "display_name": "A", "note_policy": "review"}, projects_pb2.NOTE_POLICY_REVIEW),
    ],
)
async def test_a_created_project_is_201_with_its_note_policy(
    gateway: httpx.AsyncClient, projects: FakeProjects, body: dict[str, str], policy: int
) -> None:
    response = await gateway.post("/api/agent/projects", json=body)
    assert response.status_code == 201, response.text
    ((name, request),) = projects.requests
    assert name == "CreateProject"
    assert (request.project.id, request.project.display_name) == (body["id"], body["display_name"])
    assert request.project.note_policy == policy
    created = response.json()
    assert created["id"] == body["id"] and created["role"] == "owner"
    assert created["note_policy"] == body.get("note_policy", "unspecified")


@pytest.mark.parametrize(
    ("body", "paths"),
    [
        ({"display_name": "Apollo 2"}, ["display_name"]),
        ({"note_policy": "review"}, ["note_policy"]),
        ({"display_name": "Apollo 2", "note_policy": "auto"}, ["display_name", "note_policy"]),
    ],
)
async def test_an_update_masks_only_the_fields_given(
    gateway: httpx.AsyncClient, projects: FakeProjects, body: dict[str, str], paths: list[str]
) -> None:
    response = await gateway.patch("/api/agent/projects/apollo", json=body)
    assert response.status_code == 200, response.text
    ((name, request),) = projects.requests
    assert name == "UpdateProject" and request.project.id == "apollo"
    assert list(request.update_mask.paths) == paths
    assert request.project.display_name == body.get("display_name", "")
    expected = {"review": projects_pb2.NOTE_POLICY_REVIEW, "auto": projects_pb2.NOTE_POLICY_AUTO}
    assert request.project.note_policy == expected.get(body.get("note_policy", ""), 0)


async def test_members_are_listed_set_and_removed(gateway: httpx.AsyncClient, projects: FakeProjects) -> None:
    listed = await gateway.get("/api/agent/projects/apollo/members")
    assert listed.json() == {
        "members": [
            {
                "project_id": "apollo",
                "user_id": "bob",
                "role": "viewer",
                "update_time": "2026-09-21T14:13:20Z",
            }
        ],
        "next_page_token": "",
    }
    # A user id is one line of any text, as the tokens name users.
    put = await gateway.put("/api/agent/projects/apollo/members/zoé@example.org", json={"role": "owner"})
    assert put.status_code == 200, put.text
    assert put.json() == {"project_id": "apollo", "user_id": "zoé@example.org", "role": "owner"}
    assert projects.requests[-1][1].member == projects_pb2.ProjectMember(
        project_id="apollo", user_id="zoé@example.org", role=projects_pb2.PROJECT_ROLE_OWNER
    )
    removed = await gateway.delete("/api/agent/projects/apollo/members/bob")
    assert removed.status_code == 204 and removed.content == b""
    assert projects.requests[-1] == (
        "RemoveProjectMember",
        projects_service_pb2.RemoveProjectMemberRequest(project_id="apollo", user_id="bob"),
    )


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (grpc.StatusCode.NOT_FOUND, 404),
        (grpc.StatusCode.PERMISSION_DENIED, 403),
        (grpc.StatusCode.ALREADY_EXISTS, 409),
        (grpc.StatusCode.FAILED_PRECONDITION, 409),
        (grpc.StatusCode.INVALID_ARGUMENT, 400),
    ],
)
async def test_the_services_refusals_keep_their_status(code: grpc.StatusCode, status: int) -> None:
    app = app_with(NoService())
    app.state.projects = FakeProjects(rpc_error(code, "project 'apollo' says no"))
    async with client_of(app) as client:
        for method, path, body in (
            ("POST", "/api/agent/projects", {"id": "apollo", "display_name": "Apollo"}),
            ("PATCH", "/api/agent/projects/apollo", {"display_name": "x"}),
            ("PUT", "/api/agent/projects/apollo/members/bob", {"role": "editor"}),
            ("DELETE", "/api/agent/projects/apollo/members/bob", None),
        ):
            response = await client.request(method, path, json=body)
            assert response.status_code == status, (method, path, response.text)
            assert response.json()["error"]["message"] == "project 'apollo' says no"


@pytest.mark.parametrize(("body", "project"), [({}, ""), ({"project_id": "apollo"}, "apollo")])
async def test_a_messages_project_reaches_start_run(body: dict[str, str], project: str) -> None:
    engine = FlakyEngine()
    async with client_of(app_with(engine)) as client:
        response = await client.post(
            "/api/agent/conversations/c/messages", json={"message": "Bonjour", **body}
        )
    assert response.status_code == 200, response.text
    (start,) = engine.requests
    assert start.project_id == project and start.message == "Bonjour"


class FakeThreads:
    """Creates one conversation per request, recording each."""

    def __init__(self) -> None:
        self.created = 0

    async def CreateConversation(self, request: Any, **_: Any) -> Any:  # noqa: N802
        self.created += 1
        return threads_service_pb2.CreateConversationResponse(
            conversation=threads_pb2.Conversation(id=f"conv-{self.created}")
        )


HELLO = {"model": "auto", "messages": [{"role": "user", "content": "Quel est le plan ?"}]}


@pytest.mark.parametrize("value", ["a b", "p" * 129, "équipe", "a;b", "../x"])
async def test_a_malformed_project_header_is_an_openai_400_before_any_service(value: str) -> None:
    async with client_of(app_with(NoService())) as client:
        response = await client.post(
            "/v1/chat/completions", json=HELLO, headers={"X-Switchboard-Project": value.encode()}
        )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == "invalid_request"
    assert "X-Switchboard-Project" in (error["param"] or ""), error
    assert response.headers["x-should-retry"] == "false"


@pytest.mark.parametrize(
    ("header", "checked", "project"),
    [
        ({}, False, ""),
        ({"X-Switchboard-Project": "personal"}, False, "personal"),
        ({"X-Switchboard-Project": "apollo"}, True, "apollo"),
    ],
)
async def test_the_project_header_reaches_start_run_after_a_membership_check(
    header: dict[str, str], checked: bool, project: str
) -> None:
    engine, projects, threads = FlakyEngine(), FakeProjects(), FakeThreads()
    app = app_with(engine)
    app.state.projects, app.state.threads = projects, threads
    async with client_of(app) as client:
        response = await client.post("/v1/chat/completions", json=HELLO, headers=header)
    assert response.status_code == 200, response.text
    assert response.headers["X-Switchboard-Conversation"] == "conv-1"
    (start,) = engine.requests
    assert start.project_id == project and start.conversation_id == "conv-1"
    assert [name for name, _ in projects.requests] == (["CheckProjectAccess"] if checked else [])


async def test_a_project_the_user_is_no_member_of_is_404_and_nothing_is_created() -> None:
    projects, threads = (
        FakeProjects(rpc_error(grpc.StatusCode.NOT_FOUND, "project 'apollo' not found")),
        FakeThreads(),
    )
    app = app_with(NoService())
    app.state.projects, app.state.threads = projects, threads
    async with client_of(app) as client:
        response = await client.post(
            "/v1/chat/completions", json=HELLO, headers={"X-Switchboard-Project": "apollo"}
        )
    assert response.status_code == 404, response.text
    error = response.json()["error"]
    assert (error["type"], error["param"]) == ("not_found_error", "X-Switchboard-Project")
    assert "X-Switchboard-Conversation" not in response.headers and threads.created == 0


class SlowImport:
    """MemoryService whose ImportProjectFiles takes ``seconds``: it answers
    only if the gateway's deadline allows it, as a real channel would."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def ImportProjectFiles(self, request: Any, timeout: float, **_: Any) -> Any:  # noqa: N802
        if timeout < self.seconds:
            raise rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
        await asyncio.sleep(self.seconds)
        item = memory_pb2.ImportItem(path=request.files[0].path, outcome=memory_pb2.IMPORT_OUTCOME_CREATED)
        return memory_service_pb2.ImportProjectFilesResponse(items=[item])


async def test_a_project_import_has_a_deadline_of_its_own_beyond_a_unary_calls() -> None:
    """Importing up to 500 files (each note checked for repeats, embedded)
    is seconds of work: it is not cut at the unary calls' deadline."""
    app = app_with(NoService(), call_timeout=0.05, import_timeout=5)
    app.state.memory = SlowImport(seconds=0.2)
    files = [{"path": ".ideai/memory/deploys.md", "content": "# Les déploiements\n\nLe vendredi, jamais."}]
    async with client_of(app) as client:
        response = await client.post("/api/agent/project-context/import", json={"files": files})
    assert response.status_code == 200, response.text
    assert response.json()["items"][0]["outcome"] == "created"
