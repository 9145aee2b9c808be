"""The project-role matrix inside the services, on SQLite and PostgreSQL.

Every RPC whose request names a project (found by walking the service
descriptors, so a new one fails ``test_every_project_method_is_in_the_matrix``
until it is classified here) is called by a viewer, an editor and an owner of
alice's project: a role below what the call needs is PERMISSION_DENIED with
the reason, and a role that suffices is served. Non-members are the
isolation matrix's (tests/service/test_isolation_matrix.py): NOT_FOUND.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.descriptor import Descriptor, ServiceDescriptor
from google.protobuf.duration_pb2 import Duration
from google.protobuf.field_mask_pb2 import FieldMask
from google.protobuf.message import Message

from services.shared.errors import error_info
from switchboard.memory.v1 import memory_pb2, memory_service_pb2, projects_pb2, projects_service_pb2
from switchboard.threads.v1 import threads_pb2, threads_service_pb2
from tests.conftest import DatabaseFactory
from tests.fakes.a2a_agent import serve_agent
from tests.service.harness import as_user
from tests.service.system import System, system

M, J, T = memory_service_pb2, projects_service_pb2, threads_service_pb2
SERVICES: list[ServiceDescriptor] = [
    M.DESCRIPTOR.services_by_name["MemoryService"],
    J.DESCRIPTOR.services_by_name["ProjectsService"],
    T.DESCRIPTOR.services_by_name["ThreadsService"],
]
PROJECT = "apollo"
ROLES = {"viewer": 1, "editor": 2, "owner": 3}
# The card URL of the remote agent the test serves (RegisterRemoteAgent's row).
REMOTE_CARD = {"url": ""}


def _project_fields(message: Descriptor, seen: frozenset[str] = frozenset()) -> Iterator[str]:
    for f in message.fields:
        if f.name == "project_id" or (f.name == "id" and message.name == "Project"):
            yield f.name
        nested = f.message_type
        if nested is not None and not nested.full_name.startswith("google.") and nested.full_name not in seen:
            yield from (f"{f.name}.{name}" for name in _project_fields(nested, seen | {message.full_name}))


def project_methods() -> set[str]:
    return {
        f"{service.name}.{method.name}"
        for service in SERVICES
        for method in service.methods
        if list(_project_fields(method.input_type))
    }


Prepare = Callable[[System], Awaitable[str]]


@dataclass(frozen=True)
class Row:
    """``build(ref)`` is the request; ``ref`` is what ``prepare`` made for
    this call (a proposal, a member), or a fresh token for unique texts."""

    need: str
    build: Callable[[str], Message]
    prepare: Prepare | None = None


def note(ref: str) -> memory_pb2.Note:
    return memory_pb2.Note(
        project_id=PROJECT, kind=memory_pb2.NOTE_KIND_FACT, title=f"Fact {ref}", body=f"Fact {ref} holds."
    )


async def a_proposal(sb: System) -> str:
    made = await sb.memory.ProposeNote(M.ProposeNoteRequest(note=note(uuid.uuid4().hex)), **as_user("alice"))
    return made.proposal.id


async def a_note(sb: System) -> str:
    made = await sb.memory.CreateNote(M.CreateNoteRequest(note=note(uuid.uuid4().hex)), **as_user("alice"))
    return made.note.id


async def a_member(sb: System) -> str:
    user = f"member-{uuid.uuid4().hex[:8]}"
    member = projects_pb2.ProjectMember(
        project_id=PROJECT, user_id=user, role=projects_pb2.PROJECT_ROLE_VIEWER
    )
    await sb.projects.SetProjectMember(J.SetProjectMemberRequest(member=member), **as_user("alice"))
    return user


async def a_live_entry(sb: System) -> str:
    agent = f"agent-{uuid.uuid4().hex[:8]}"
    await sb.memory.SetLiveState(
        M.SetLiveStateRequest(
            project_id=PROJECT, agent_id=agent, activity="working", ttl=Duration(seconds=60)
        ),
        **as_user("alice"),
    )
    return agent


MATRIX: dict[str, Row] = {
    # Reads: every member.
    "MemoryService.ListNotes": Row("viewer", lambda r: M.ListNotesRequest(project_id=PROJECT)),
    "MemoryService.RecallNotes": Row(
        "viewer", lambda r: M.RecallNotesRequest(project_id=PROJECT, query="fact")
    ),
    "MemoryService.GetProjectContext": Row(
        "viewer", lambda r: M.GetProjectContextRequest(project_id=PROJECT)
    ),
    "MemoryService.ListLiveState": Row("viewer", lambda r: M.ListLiveStateRequest(project_id=PROJECT)),
    "MemoryService.WatchLiveState": Row("viewer", lambda r: M.WatchLiveStateRequest(project_id=PROJECT)),
    "MemoryService.GetChatContext": Row("viewer", lambda r: M.GetChatContextRequest(project_id=PROJECT)),
    "MemoryService.ListNoteProposals": Row(
        "viewer", lambda r: M.ListNoteProposalsRequest(project_id=PROJECT)
    ),
    "ProjectsService.GetProject": Row("viewer", lambda r: J.GetProjectRequest(id=PROJECT)),
    "ProjectsService.ListProjectMembers": Row(
        "viewer", lambda r: J.ListProjectMembersRequest(project_id=PROJECT)
    ),
    "ProjectsService.CheckProjectAccess": Row(
        "viewer", lambda r: J.CheckProjectAccessRequest(project_id=PROJECT)
    ),
    "ThreadsService.ListAgents": Row("viewer", lambda r: T.ListAgentsRequest(project_id=PROJECT)),
    # Writes of the project's memory and agents: editors and owners.
    "MemoryService.CreateNote": Row("editor", lambda r: M.CreateNoteRequest(note=note(r))),
    "MemoryService.UpdateNote": Row(
        "editor",
        lambda r: M.UpdateNoteRequest(
            note=memory_pb2.Note(id=r, project_id=PROJECT, title=f"Edited {uuid.uuid4().hex}"),
            update_mask=FieldMask(paths=["title"]),
        ),
        a_note,
    ),
    "MemoryService.ProposeNote": Row("editor", lambda r: M.ProposeNoteRequest(note=note(r))),
    "MemoryService.AcceptNoteProposal": Row(
        "editor", lambda r: M.AcceptNoteProposalRequest(id=r), a_proposal
    ),
    "MemoryService.RefuseNoteProposal": Row(
        "editor", lambda r: M.RefuseNoteProposalRequest(id=r), a_proposal
    ),
    "MemoryService.UpdateProjectContext": Row(
        "editor",
        lambda r: M.UpdateProjectContextRequest(
            context=memory_pb2.ProjectContext(project_id=PROJECT, body=r)
        ),
    ),
    "MemoryService.ImportProjectFiles": Row(
        "editor",
        lambda r: M.ImportProjectFilesRequest(
            project_id=PROJECT, files=[memory_pb2.ProjectFile(path=".ideai/CONTEXT.md", content=f"# {r}")]
        ),
    ),
    "MemoryService.SetLiveState": Row(
        "editor", lambda r: M.SetLiveStateRequest(project_id=PROJECT, agent_id="qa", activity=r)
    ),
    "MemoryService.DeleteLiveState": Row(
        "editor", lambda r: M.DeleteLiveStateRequest(project_id=PROJECT, agent_id=r), a_live_entry
    ),
    "MemoryService.ClearLiveState": Row("editor", lambda r: M.ClearLiveStateRequest(project_id=PROJECT)),
    "ThreadsService.CreateAgent": Row(
        "editor",
        lambda r: T.CreateAgentRequest(agent=threads_pb2.Agent(id=f"a-{r[:12]}", project_id=PROJECT)),
    ),
    # The card (of a real a2a-sdk server) is read only past the role check.
    "ThreadsService.RegisterRemoteAgent": Row(
        "editor",
        lambda r: T.RegisterRemoteAgentRequest(
            agent_id=f"r-{r[:12]}", card_url=REMOTE_CARD["url"], project_id=PROJECT
        ),
    ),
    # Members and settings: owners.
    "ProjectsService.UpdateProject": Row(
        "owner",
        lambda r: J.UpdateProjectRequest(
            project=projects_pb2.Project(id=PROJECT, display_name=r),
            update_mask=FieldMask(paths=["display_name"]),
        ),
    ),
    "ProjectsService.SetProjectMember": Row(
        "owner",
        lambda r: J.SetProjectMemberRequest(
            member=projects_pb2.ProjectMember(
                project_id=PROJECT, user_id=f"new-{r[:8]}", role=projects_pb2.PROJECT_ROLE_VIEWER
            )
        ),
    ),
    "ProjectsService.RemoveProjectMember": Row(
        "owner", lambda r: J.RemoveProjectMemberRequest(project_id=PROJECT, user_id=r), a_member
    ),
}
# Name a project's object by its id (a proposal, the project itself): in the
# matrix, though the walker finds no project field in their requests.
BY_ID = {"MemoryService.AcceptNoteProposal", "MemoryService.RefuseNoteProposal", "ProjectsService.GetProject"}
# Name a project, but not an existing one to act in.
EXEMPT = {
    "ProjectsService.CreateProject": "creates the project: no role yet (a taken id is ALREADY_EXISTS)",
    "ThreadsService.UpdateAgent": "its owner or an admin changes an agent (ROLE_GATED); not its project",
}


def test_every_project_method_is_in_the_matrix() -> None:
    found = project_methods()
    assert not set(MATRIX) & set(EXEMPT)
    missing = sorted(found - set(MATRIX) - set(EXEMPT))
    assert not missing, f"methods naming a project with no role row: {missing}"
    assert not sorted(set(MATRIX) - found - BY_ID), "rows for methods that name no project"


def _stubs(sb: System) -> dict[str, Any]:
    return {"MemoryService": sb.memory, "ProjectsService": sb.projects, "ThreadsService": sb.threads}


async def outcome(sb: System, user: str, method: str, request: Message) -> str:
    service, name = method.split(".")
    call = getattr(_stubs(sb)[service], name)
    try:
        if next(s for s in SERVICES if s.name == service).methods_by_name[name].server_streaming:
            stream = call(request, **as_user(user))
            async for _ in stream:
                break
            stream.cancel()
        else:
            await call(request, **as_user(user))
    except grpc.aio.AioRpcError as error:
        info = error_info(error)
        return f"{error.code().name} {info.reason if info else ''} {error.details()}"
    return "OK"


async def test_each_role_is_served_or_refused_with_its_reason(make_database: DatabaseFactory) -> None:
    with serve_agent("Remote", {}, streaming=False) as remote:
        REMOTE_CARD["url"] = remote.card_url
        await _each_role_is_served_or_refused(make_database)


async def _each_role_is_served_or_refused(make_database: DatabaseFactory) -> None:
    # Registering a remote agent reads its card from the test's loopback server.
    async with system(make_database, threads_settings={"remote_agent_allow_loopback": True}) as sb:
        users = {"viewer": "vera", "editor": "eddie", "owner": "olga"}
        await sb.projects.CreateProject(
            J.CreateProjectRequest(project=projects_pb2.Project(id=PROJECT, display_name="Apollo")),
            **as_user("alice"),
        )
        for role, user in users.items():
            member = projects_pb2.ProjectMember(project_id=PROJECT, user_id=user, role=ROLES[role])  # type: ignore[arg-type]
            await sb.projects.SetProjectMember(J.SetProjectMemberRequest(member=member), **as_user("alice"))
        context = memory_pb2.ProjectContext(project_id=PROJECT, body="Tests before merge.")
        await sb.memory.UpdateProjectContext(
            M.UpdateProjectContextRequest(context=context), **as_user("alice")
        )
        failures = []
        for method, row in MATRIX.items():
            for role, user in users.items():
                ref = await row.prepare(sb) if row.prepare else uuid.uuid4().hex
                got = await outcome(sb, user, method, row.build(ref))
                if ROLES[role] >= ROLES[row.need]:
                    if got != "OK":
                        failures.append(f"{method} as {role}: {got}")
                elif not got.startswith("PERMISSION_DENIED ERROR_REASON_PERMISSION_DENIED"):
                    failures.append(f"{method} as {role}: {got}, expected PERMISSION_DENIED")
                elif f"{user} is {'an' if role[0] in 'aeiou' else 'a'} {role}" not in got:
                    failures.append(f"{method} as {role}: the reason does not say the role: {got}")
        assert not failures, "\n".join(failures)
