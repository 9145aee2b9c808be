"""The cross-user matrix inside the services, on SQLite and PostgreSQL.

Alice makes one of everything (conversation with entries, runs, a note, a
project context, live state, a page with versions, an instruction page, a
proposal, skill feedback, settings). Then, for every gRPC method whose request
names an object (found by walking the service descriptors, so a new one fails
``test_every_id_taking_method_is_in_the_matrix`` until it is covered here),
an intruder calls it once with alice's id and once with a random missing id:
the two answers must be identical once the id is masked (status code, message,
ErrorInfo; or, for lists and creates, the response), the answer must hold
nothing of alice's, and alice's view of her objects must be unchanged.

Methods that are shared by design (agents and their one thread; the
router's workspace skill catalog) are listed in SHARED with their reason.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, ServiceDescriptor
from google.protobuf.duration_pb2 import Duration
from google.protobuf.field_mask_pb2 import FieldMask
from google.protobuf.message import Message

from services.shared.errors import error_info
from switchboard.engine.v1 import engine_pb2, engine_service_pb2
from switchboard.memory.v1 import (
    handoff_service_pb2,
    memory_pb2,
    memory_service_pb2,
    pages_pb2,
    pages_service_pb2,
    projects_pb2,
    projects_service_pb2,
)
from switchboard.router.v1 import router_pb2, router_service_pb2
from switchboard.threads.v1 import threads_pb2, threads_service_pb2
from tests.conftest import DatabaseFactory
from tests.service.harness import as_user
from tests.service.system import System, collect, system

E, M, P, R, T, J = (
    engine_service_pb2,
    memory_service_pb2,
    pages_service_pb2,
    router_service_pb2,
    threads_service_pb2,
    projects_service_pb2,
)
SERVICES: list[ServiceDescriptor] = [
    module.DESCRIPTOR.services_by_name[name]
    for module, name in (
        (E, "EngineService"),
        (T, "ThreadsService"),
        (M, "MemoryService"),
        (P, "PagesService"),
        (handoff_service_pb2, "HandoffService"),
        (J, "ProjectsService"),
        (R, "RouterService"),
    )
]
# A request field that names an object: id, *_id, *_ids, name, skill (an id
# or a name). request_id counts: an idempotency key replayed by another user
# must not hand them the first user's object.
_ID_FIELD = re.compile(r"^(id|name|skill)$|_ids?$")
MARK = "zebracorn"  # in alice's titles and bodies: must never reach bob


def _id_fields(message: Descriptor, seen: frozenset[str] = frozenset()) -> Iterator[str]:
    for f in message.fields:
        if _ID_FIELD.search(f.name):
            yield f.name
        nested = f.message_type
        if nested is not None and not nested.full_name.startswith("google.") and nested.full_name not in seen:
            yield from (f"{f.name}.{name}" for name in _id_fields(nested, seen | {message.full_name}))


def id_taking_methods() -> dict[str, list[str]]:
    """Maps "Service.Method" to the id fields of its request, for every method that has one."""
    found = {}
    for service in SERVICES:
        for method in service.methods:
            fields = list(_id_fields(method.input_type))
            if fields:
                found[f"{service.name}.{method.name}"] = fields
    return found


# Intentionally not per-user: the object the id names is shared by design.
# Those gated by role or agent membership answer PERMISSION_DENIED (the
# object is no secret): ROLE_GATED below checks them as a user and an admin.
SHARED = {
    "ThreadsService.CreateAgent": "agents are the project's registry; a new one is its caller's",
    "ThreadsService.RegisterRemoteAgent": "agents are the project's registry; a new one is its caller's",
    "ThreadsService.GetAgent": "agents are the project's, visible to every user",
    "ThreadsService.UpdateAgent": "the registry: owner or admin (ROLE_GATED)",
    "ThreadsService.EnsureAgentThread": "one live thread per agent, for its members (ROLE_GATED)",
    "ThreadsService.ExportAgentThread": "one live thread per agent, for its members (ROLE_GATED)",
    "ThreadsService.ListAgentMembers": "an agent's members: for members and admins (ROLE_GATED)",
    "ThreadsService.AddAgentMember": "an agent's members: owner or admin (ROLE_GATED)",
    "ThreadsService.RemoveAgentMember": "an agent's members: owner or admin (ROLE_GATED)",
    "ThreadsService.ListAuditEvents": "the registry's audit log: admins (ROLE_GATED)",
    "RouterService.ListAuditEvents": "the catalog's audit log: admins (ROLE_GATED)",
    "HandoffService.RecordHandoffEntries": "summaries of the shared agent threads, not per user",
    "HandoffService.CheckpointHandoff": "summaries of the shared agent threads, not per user",
    "HandoffService.GetHandoffSummary": "summaries of the shared agent threads, not per user",
    "RouterService.GetSkill": "the skill catalog is the workspace's (DESIGN.md, router_service.proto)",
    "RouterService.CreateSkill": "the skill catalog is the workspace's: admins write it (ROLE_GATED)",
    "RouterService.UpdateSkill": "the skill catalog is the workspace's: admins write it (ROLE_GATED)",
    "RouterService.DeleteSkill": "the skill catalog is the workspace's: admins write it (ROLE_GATED)",
    "RouterService.RouteModel": "provider_id names a configured provider, no one's object",
    "RouterService.SetSkillEnablement": "a workspace skill; writes only the caller's enablement (checked)",
    "ThreadsService.ListAgents": "the registry, filtered by project_id, is visible to every user",
    "ProjectsService.CreateProject": "project ids are names of the deployment: a taken one is ALREADY_EXISTS",
    "ProjectsService.ListAuditEvents": "the memory service's audit log: admins (ROLE_GATED)",
}


def new_id() -> str:
    return str(uuid.uuid4())


@dataclass
class World:
    """Alice's objects, and the idempotency keys she made them with."""

    conversation: str = ""
    conversation_request: str = field(default_factory=new_id)
    run: str = ""
    run_request: str = field(default_factory=new_id)
    ask_run: str = ""
    ask_request: str = field(default_factory=new_id)
    note: str = ""
    note_request: str = field(default_factory=new_id)
    note_proposal: str = ""
    note_proposal_request: str = field(default_factory=new_id)
    project: str = "alice-project"
    live_agent: str = "architect"
    page: str = ""
    page_request: str = field(default_factory=new_id)
    instruction_page: str = ""
    instruction_request: str = field(default_factory=new_id)
    proposal: str = ""
    proposal_request: str = field(default_factory=new_id)
    feedback: str = ""
    feedback_request: str = field(default_factory=new_id)
    skill: str = ""  # a workspace skill alice disabled for herself

    def secrets(self) -> set[str]:
        """What no answer to another user may contain (the id they sent aside)."""
        names = {"project", "live_agent", "skill"}  # names anyone may use, or shared
        return {value for key, value in vars(self).items() if value and key not in names} | {MARK}


Build = Callable[[World, str], Message]


@dataclass(frozen=True)
class Case:
    """One call: ``build(world, id)`` is the request naming ``id``; ``foreign``
    picks alice's id. ``code`` is the status expected for both ids; None
    means both calls succeed (a list, or a create on the caller's side)."""

    foreign: Callable[[World], str]
    build: Build
    code: grpc.StatusCode | None = grpc.StatusCode.NOT_FOUND
    missing: Callable[[], str] = new_id
    # Streams: read at most this many responses (a watch never ends).
    first: int = 0
    # Reads of the caller's own state after the call, compared too.
    then: tuple[tuple[str, Message], ...] = ()
    # Reduces a successful answer before comparison (what may differ between
    # two fresh objects beyond ids and times).
    view: Callable[[list[dict[str, Any]]], Any] | None = None


_IMPORTED_NOTE = "---\nname: x\nmetadata:\n  type: project\n---\nImportProjectFiles was here.\n"


def _random_project() -> str:
    return f"project-{uuid.uuid4().hex[:12]}"


def _entry(content: str) -> threads_pb2.Entry:
    return threads_pb2.Entry(role=threads_pb2.ROLE_USER, requester="user", content=content)


def _event_kinds(answers: list[dict[str, Any]]) -> list[str]:
    return [next(iter(a["event"].keys() - {"sequence", "runId", "createTime"})) for a in answers]


def _conversation(w: World) -> str:
    return w.conversation


def _run(w: World) -> str:
    return w.run


def _note(w: World) -> str:
    return w.note


def _project(w: World) -> str:
    return w.project


def _page(w: World) -> str:
    return w.page


def _proposal(w: World) -> str:
    return w.proposal


# Every id-taking method that is per user, in "Service.Method" -> cases.
MATRIX: dict[str, list[Case]] = {
    # Engine: runs are the caller's; a conversation is the caller's.
    "EngineService.StartRun": [
        Case(
            _conversation,
            lambda w, x: E.StartRunRequest(conversation_id=x, request_id=w.run_request, message="hi"),
        )
    ],
    "EngineService.GetRun": [Case(_run, lambda w, x: E.GetRunRequest(run_id=x))],
    "EngineService.WatchRun": [Case(_run, lambda w, x: E.WatchRunRequest(run_id=x))],
    "EngineService.CancelRun": [Case(_run, lambda w, x: E.CancelRunRequest(run_id=x))],
    "EngineService.SetRunWebhook": [
        Case(_run, lambda w, x: E.SetRunWebhookRequest(run_id=x, webhook_url=""))
    ],
    "EngineService.RecordApprovalDecision": [
        Case(
            _run,
            lambda w, x: E.RecordApprovalDecisionRequest(
                run_id=x, decision=engine_pb2.APPROVAL_DECISION_ACCEPTED
            ),
        )
    ],
    "EngineService.ListRuns": [Case(_conversation, lambda w, x: E.ListRunsRequest(conversation_id=x), None)],
    # A run's deliveries are its owner's; a default webhook is set on the caller's own conversation.
    "EngineService.ListWebhookDeliveries": [
        Case(_run, lambda w, x: E.ListWebhookDeliveriesRequest(run_id=x))
    ],
    "EngineService.GetWebhookDefault": [
        Case(
            _conversation,
            lambda w, x: E.GetWebhookDefaultRequest(target=E.WebhookDefaultTarget(conversation_id=x)),
        )
    ],
    "EngineService.SetWebhookDefault": [
        Case(
            _conversation,
            lambda w, x: E.SetWebhookDefaultRequest(
                target=E.WebhookDefaultTarget(conversation_id=x), webhook_url=""
            ),
        )
    ],
    # The target agent is shared; the run and its request_id are the caller's.
    "EngineService.AskAgent": [
        Case(
            lambda w: w.ask_request,
            lambda w, x: E.AskAgentRequest(
                request_id=x, requester="main", target_agent_id="qa-iso", message="Is the build green?"
            ),
            None,
            view=lambda answers: [k for k in _event_kinds(answers) if k in ("runStarted", "final", "error")],
        )
    ],
    # Threads: a conversation is a thread of one user; the agent-thread calls
    # take any thread id, and a conversation's must read like a missing one.
    "ThreadsService.CreateConversation": [
        Case(lambda w: w.conversation_request, lambda w, x: T.CreateConversationRequest(request_id=x), None)
    ],
    "ThreadsService.GetConversation": [
        Case(_conversation, lambda w, x: T.GetConversationRequest(conversation_id=x))
    ],
    "ThreadsService.UpdateConversation": [
        Case(
            _conversation,
            lambda w, x: T.UpdateConversationRequest(
                conversation=threads_pb2.Conversation(
                    id=x, user_id="alice", title="UpdateConversation was here", pinned=True
                ),
                update_mask=FieldMask(paths=["title", "pinned"]),
            ),
        )
    ],
    "ThreadsService.SetAutoTitle": [
        Case(
            _conversation,
            lambda w, x: T.SetAutoTitleRequest(conversation_id=x, request_text="SetAutoTitle was here"),
        )
    ],
    "ThreadsService.ArchiveConversation": [
        Case(_conversation, lambda w, x: T.ArchiveConversationRequest(conversation_id=x))
    ],
    "ThreadsService.AppendEntries": [
        Case(
            _conversation,
            lambda w, x: T.AppendEntriesRequest(
                thread_id=x, request_id=f"{w.run}:user", entries=[_entry("AppendEntries was here")]
            ),
        )
    ],
    "ThreadsService.ListEntries": [
        Case(_conversation, lambda w, x: T.ListEntriesRequest(thread_id=x)),
        Case(
            _conversation,
            lambda w, x: T.ListEntriesRequest(
                for_conversation=T.ListEntriesRequest.ForConversation(conversation_id=x)
            ),
        ),
        Case(
            _conversation,
            lambda w, x: T.ListEntriesRequest(
                for_correlation=T.ListEntriesRequest.ForCorrelation(thread_id=x, correlation_id=w.run)
            ),
        ),
        Case(_conversation, lambda w, x: T.ListEntriesRequest(thread_id=x, correlation_id=w.run)),
    ],
    "ThreadsService.BindProviderSession": [
        Case(
            _conversation,
            lambda w, x: T.BindProviderSessionRequest(
                agent_thread_id=x, provider_id="offline", native_session_id="n-1", replace=True
            ),
        )
    ],
    "ThreadsService.GetProviderSession": [
        Case(
            _conversation, lambda w, x: T.GetProviderSessionRequest(agent_thread_id=x, provider_id="offline")
        )
    ],
    "ThreadsService.ListProviderSessions": [
        Case(
            _conversation,
            lambda w, x: T.ListProviderSessionsRequest(agent_thread_id=x, include_released=True),
        )
    ],
    "ThreadsService.ReleaseProviderSession": [
        Case(
            _conversation,
            lambda w, x: T.ReleaseProviderSessionRequest(agent_thread_id=x, provider_id="offline"),
        )
    ],
    "ThreadsService.ListSegments": [Case(_conversation, lambda w, x: T.ListSegmentsRequest(thread_id=x))],
    "ThreadsService.SetSegmentHandoff": [
        Case(
            _conversation,
            lambda w, x: T.SetSegmentHandoffRequest(
                thread_id=x, number=1, summary="SetSegmentHandoff was here"
            ),
        )
    ],
    # Memory: notes, project context and live state are a project's: another
    # user's project reads exactly like one nobody created, writes included.
    "MemoryService.CreateNote": [
        Case(
            lambda w: w.note_request,
            lambda w, x: M.CreateNoteRequest(
                request_id=x,
                note=memory_pb2.Note(
                    kind=memory_pb2.NOTE_KIND_DECISION,
                    title=f"Launch plan {MARK}",
                    body=f"We ship on Friday, {MARK} included.",
                ),
            ),
            None,
        ),
        Case(
            _project,
            lambda w, x: M.CreateNoteRequest(
                note=memory_pb2.Note(
                    project_id=x,
                    kind=memory_pb2.NOTE_KIND_DECISION,
                    title=f"Launch plan {MARK}",
                    body=f"We ship on Friday, {MARK} included.",
                )
            ),
            missing=_random_project,
        ),
    ],
    "MemoryService.GetNote": [Case(_note, lambda w, x: M.GetNoteRequest(id=x))],
    # A note proposal is its project's: the same rule as the project's notes.
    "MemoryService.ProposeNote": [
        Case(
            lambda w: w.note_proposal_request,
            lambda w, x: M.ProposeNoteRequest(
                request_id=x,
                note=memory_pb2.Note(
                    kind=memory_pb2.NOTE_KIND_FACT, title=f"Plan {MARK}", body=f"Ship {MARK}."
                ),
            ),
            None,
        ),
        Case(
            _project,
            lambda w, x: M.ProposeNoteRequest(
                note=memory_pb2.Note(
                    project_id=x, kind=memory_pb2.NOTE_KIND_FACT, title="ProposeNote", body="was here"
                )
            ),
            missing=_random_project,
        ),
    ],
    "MemoryService.GetNoteProposal": [
        Case(lambda w: w.note_proposal, lambda w, x: M.GetNoteProposalRequest(id=x))
    ],
    "MemoryService.ListNoteProposals": [
        Case(_project, lambda w, x: M.ListNoteProposalsRequest(project_id=x), missing=_random_project)
    ],
    "MemoryService.AcceptNoteProposal": [
        Case(lambda w: w.note_proposal, lambda w, x: M.AcceptNoteProposalRequest(id=x))
    ],
    "MemoryService.RefuseNoteProposal": [
        Case(lambda w: w.note_proposal, lambda w, x: M.RefuseNoteProposalRequest(id=x))
    ],
    "MemoryService.UpdateNote": [
        Case(
            _note,
            lambda w, x: M.UpdateNoteRequest(
                note=memory_pb2.Note(id=x, project_id=w.project, title="UpdateNote was here"),
                update_mask=FieldMask(paths=["title"]),
            ),
        )
    ],
    "MemoryService.DeleteNote": [Case(_note, lambda w, x: M.DeleteNoteRequest(id=x))],
    "MemoryService.ListNotes": [
        Case(_project, lambda w, x: M.ListNotesRequest(project_id=x), missing=_random_project)
    ],
    "MemoryService.RecallNotes": [
        Case(
            _project,
            lambda w, x: M.RecallNotesRequest(project_id=x, query=f"launch plan friday {MARK}"),
            missing=_random_project,
        )
    ],
    # One call of a chat run's context step: the thread's summary is the
    # caller's conversation's only, the project's parts are per user.
    "MemoryService.GetChatContext": [
        Case(
            _conversation,
            lambda w, x: M.GetChatContextRequest(thread_id=x, recall_query=f"launch plan friday {MARK}"),
            None,
        ),
        Case(
            _project,
            lambda w, x: M.GetChatContextRequest(project_id=x, recall_query=f"launch plan friday {MARK}"),
            missing=_random_project,
        ),
    ],
    "MemoryService.GetProjectContext": [
        Case(_project, lambda w, x: M.GetProjectContextRequest(project_id=x), missing=_random_project)
    ],
    "MemoryService.UpdateProjectContext": [
        Case(
            _project,
            lambda w, x: M.UpdateProjectContextRequest(
                context=memory_pb2.ProjectContext(project_id=x, body="UpdateProjectContext was here")
            ),
            missing=_random_project,
        )
    ],
    "MemoryService.ImportProjectFiles": [
        Case(
            _project,
            lambda w, x: M.ImportProjectFilesRequest(
                project_id=x,
                files=[
                    memory_pb2.ProjectFile(path=".ideai/CONTEXT.md", content="# ImportProjectFiles was here"),
                    memory_pb2.ProjectFile(path=".ideai/memory/x.md", content=_IMPORTED_NOTE),
                ],
            ),
            missing=_random_project,
        )
    ],
    "MemoryService.SetLiveState": [
        Case(
            _project,
            lambda w, x: M.SetLiveStateRequest(
                project_id=x, agent_id=w.live_agent, activity="SetLiveState was here"
            ),
            missing=_random_project,
        )
    ],
    "MemoryService.ListLiveState": [
        Case(_project, lambda w, x: M.ListLiveStateRequest(project_id=x), missing=_random_project)
    ],
    "MemoryService.DeleteLiveState": [
        Case(
            _project,
            lambda w, x: M.DeleteLiveStateRequest(project_id=x, agent_id=w.live_agent),
            missing=_random_project,
        )
    ],
    "MemoryService.ClearLiveState": [
        Case(_project, lambda w, x: M.ClearLiveStateRequest(project_id=x), missing=_random_project)
    ],
    "MemoryService.WatchLiveState": [
        Case(_project, lambda w, x: M.WatchLiveStateRequest(project_id=x), missing=_random_project, first=1)
    ],
    # user_id is ignored; a page id in the caller's list gives them nothing of it.
    "MemoryService.UpdatePersonalSettings": [
        Case(
            lambda w: w.instruction_page,
            lambda w, x: M.UpdatePersonalSettingsRequest(
                settings=memory_pb2.PersonalSettings(
                    user_id="alice",
                    display_name="UpdatePersonalSettings was here",
                    instruction_page_ids=[x],
                    active_instruction_page_id=x,
                ),
                update_mask=FieldMask(
                    paths=["display_name", "instruction_page_ids", "active_instruction_page_id"]
                ),
            ),
            None,
            then=(
                ("PagesService.GetActiveInstructions", P.GetActiveInstructionsRequest()),
                ("PagesService.ListInstructionPages", P.ListInstructionPagesRequest()),
            ),
        )
    ],
    # Pages: readable by the owner and the ACL; proposals by the page's owner and the proposer.
    "PagesService.CreatePage": [
        Case(
            lambda w: w.page_request,
            lambda w, x: P.CreatePageRequest(
                request_id=x,
                page=pages_pb2.Page(
                    id=w.page, owner_user_id="alice", title="Mine", body="CreatePage was here"
                ),
            ),
            None,
        )
    ],
    "PagesService.GetPage": [Case(_page, lambda w, x: P.GetPageRequest(page_id=x))],
    "PagesService.UpdatePage": [
        Case(
            _page,
            lambda w, x: P.UpdatePageRequest(
                page=pages_pb2.Page(id=x, owner_user_id="alice", title="UpdatePage was here"),
                update_mask=FieldMask(paths=["title"]),
            ),
        )
    ],
    "PagesService.DeletePage": [Case(_page, lambda w, x: P.DeletePageRequest(page_id=x))],
    "PagesService.SetPageAcl": [
        Case(
            _page,
            lambda w, x: P.SetPageAclRequest(page_id=x, reader_user_ids=["bob"], editor_user_ids=["bob"]),
        )
    ],
    "PagesService.ListPageVersions": [Case(_page, lambda w, x: P.ListPageVersionsRequest(page_id=x))],
    "PagesService.GetPageVersion": [Case(_page, lambda w, x: P.GetPageVersionRequest(page_id=x, version=1))],
    "PagesService.RestorePageVersion": [
        Case(_page, lambda w, x: P.RestorePageVersionRequest(page_id=x, version=1))
    ],
    "PagesService.CreateInstructionPage": [
        Case(lambda w: w.instruction_request, lambda w, x: P.CreateInstructionPageRequest(request_id=x), None)
    ],
    "PagesService.AddInstructionPage": [
        Case(
            lambda w: w.instruction_page,
            lambda w, x: P.AddInstructionPageRequest(page_id=x, make_active=True),
        )
    ],
    "PagesService.RemoveInstructionPage": [
        Case(lambda w: w.instruction_page, lambda w, x: P.RemoveInstructionPageRequest(page_id=x))
    ],
    # Names a page of the caller's own list: any other is "add it first".
    "PagesService.SetActiveInstructionPage": [
        Case(
            lambda w: w.instruction_page,
            lambda w, x: P.SetActiveInstructionPageRequest(page_id=x),
            grpc.StatusCode.FAILED_PRECONDITION,
        )
    ],
    "PagesService.CreateProposal": [
        Case(
            _page,
            lambda w, x: P.CreateProposalRequest(
                request_id=w.proposal_request,
                page_id=x,
                proposed_body="CreateProposal was here",
                proposer_agent_id="main",
            ),
        )
    ],
    "PagesService.GetProposal": [Case(_proposal, lambda w, x: P.GetProposalRequest(proposal_id=x))],
    "PagesService.ListProposals": [Case(_page, lambda w, x: P.ListProposalsRequest(page_id=x), None)],
    "PagesService.AcceptProposal": [Case(_proposal, lambda w, x: P.AcceptProposalRequest(proposal_id=x))],
    "PagesService.RefuseProposal": [Case(_proposal, lambda w, x: P.RefuseProposalRequest(proposal_id=x))],
    # Projects: another user's project reads exactly like one nobody created.
    "ProjectsService.GetProject": [
        Case(_project, lambda w, x: J.GetProjectRequest(id=x), missing=_random_project)
    ],
    "ProjectsService.UpdateProject": [
        Case(
            _project,
            lambda w, x: J.UpdateProjectRequest(
                project=projects_pb2.Project(id=x, display_name="UpdateProject was here"),
                update_mask=FieldMask(paths=["display_name"]),
            ),
            missing=_random_project,
        )
    ],
    "ProjectsService.ListProjectMembers": [
        Case(_project, lambda w, x: J.ListProjectMembersRequest(project_id=x), missing=_random_project)
    ],
    "ProjectsService.SetProjectMember": [
        Case(
            _project,
            lambda w, x: J.SetProjectMemberRequest(
                member=projects_pb2.ProjectMember(
                    project_id=x, user_id="mallory", role=projects_pb2.PROJECT_ROLE_OWNER
                )
            ),
            missing=_random_project,
        )
    ],
    "ProjectsService.RemoveProjectMember": [
        Case(
            _project,
            lambda w, x: J.RemoveProjectMemberRequest(project_id=x, user_id="alice"),
            missing=_random_project,
        )
    ],
    "ProjectsService.CheckProjectAccess": [
        Case(_project, lambda w, x: J.CheckProjectAccessRequest(project_id=x), missing=_random_project)
    ],
    # Router: feedback is the caller's; the router keeps the run id as given.
    "RouterService.CreateSkillFeedback": [
        Case(
            _run,
            lambda w, x: R.CreateSkillFeedbackRequest(
                skill_id=w.skill, request_text="not this one", run_id=x, request_id=new_id()
            ),
            None,
        ),
        Case(
            lambda w: w.feedback_request,
            lambda w, x: R.CreateSkillFeedbackRequest(
                skill_id=w.skill, request_text="not this one", request_id=x
            ),
            None,
        ),
    ],
}

# Per-user reads that name no object: the intruder's answer holds nothing of alice's.
OWN_READS: list[tuple[str, Message]] = [
    ("ThreadsService.ListConversations", T.ListConversationsRequest(include_archived=True)),
    ("ThreadsService.ListConversations", T.ListConversationsRequest(title_query=MARK)),
    ("MemoryService.ListNotes", M.ListNotesRequest()),
    ("MemoryService.RecallNotes", M.RecallNotesRequest(query=f"launch plan {MARK}")),
    ("MemoryService.GetPersonalSettings", M.GetPersonalSettingsRequest()),
    ("MemoryService.GetChatContext", M.GetChatContextRequest(recall_query=f"launch plan {MARK}")),
    ("PagesService.ListPages", P.ListPagesRequest()),
    ("PagesService.ListProposals", P.ListProposalsRequest()),
    ("PagesService.ListInstructionPages", P.ListInstructionPagesRequest()),
    ("PagesService.GetActiveInstructions", P.GetActiveInstructionsRequest()),
    ("RouterService.ListSkillFeedback", R.ListSkillFeedbackRequest()),
]


def test_every_id_taking_method_is_in_the_matrix() -> None:
    found = id_taking_methods()
    assert not set(MATRIX) & set(SHARED), "a method is both checked and excluded"
    missing = sorted(set(found) - set(MATRIX) - set(SHARED))
    assert not missing, f"id-taking methods with no cross-user case: {missing} (add them to MATRIX or SHARED)"
    stale = sorted((set(MATRIX) | set(SHARED)) - set(found))
    assert not stale, f"not id-taking methods (renamed or removed?): {stale}"


# Calling a method by name, reading every answer.

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
# Each intruder writes into its own personal project.
_PERSONAL = re.compile(r"personal-[0-9a-f]{20}")


def _stubs(sb: System) -> dict[str, Any]:
    return {
        "EngineService": sb.engine,
        "ThreadsService": sb.threads,
        "MemoryService": sb.memory,
        "PagesService": sb.pages,
        "ProjectsService": sb.projects,
        "RouterService": sb.router,
    }


def _streaming(method: str) -> bool:
    service, name = method.split(".")
    return next(s for s in SERVICES if s.name == service).methods_by_name[name].server_streaming


async def call(sb: System, user: str, method: str, request: Message, first: int = 0) -> dict[str, Any]:
    """The outcome of one call: the error (code, message, ErrorInfo) or the answers."""
    service, name = method.split(".")
    rpc = getattr(_stubs(sb)[service], name)
    try:
        if _streaming(method):
            stream = rpc(request, **as_user(user))
            answers = []
            try:
                async for answer in stream:
                    answers.append(answer)
                    if first and len(answers) >= first:
                        break
            finally:
                stream.cancel()
        else:
            answers = [await rpc(request, **as_user(user))]
    except grpc.aio.AioRpcError as error:
        info = error_info(error)
        return {
            "code": error.code().name,
            "message": error.details(),
            "reason": info.reason if info else "",
            "metadata": dict(info.metadata) if info else {},
        }
    return {"code": "OK", "answers": [json_format.MessageToDict(a) for a in answers]}


def _fresh(text: str) -> str:
    """Two fresh objects differ in their ids, times and owners' personal projects only."""
    return _PERSONAL.sub("<PERSONAL>", _TIME.sub("<TIME>", _UUID.sub("<UUID>", text)))


# Alice's objects.


async def make_world(sb: System) -> World:
    w = World()
    alice = as_user("alice")
    created = await sb.threads.CreateConversation(
        T.CreateConversationRequest(request_id=w.conversation_request), **alice
    )
    w.conversation = created.conversation.id
    events = await collect(
        sb.engine.StartRun(
            E.StartRunRequest(
                conversation_id=w.conversation,
                request_id=w.run_request,
                message=f"Draft a reply to this email from the supplier about {MARK}",
            ),
            **alice,
        )
    )
    assert events[-1].WhichOneof("kind") == "final", events[-1]
    w.run = events[0].run_id
    await sb.threads.CreateAgent(T.CreateAgentRequest(agent=threads_pb2.Agent(id="qa-iso")), **alice)
    # The AskAgent case's intruders (check_case names them) are members of
    # alice's agent: they may ask it, so their asks test what stays per user
    # on a shared agent (the runs, their request ids).
    for side in "ab":
        member = T.AddAgentMemberRequest(agent_id="qa-iso", user_id=f"bob-askagent-0-{side}")
        await sb.threads.AddAgentMember(member, **alice)
    asked = await collect(
        sb.engine.AskAgent(
            E.AskAgentRequest(
                request_id=w.ask_request,
                requester="main",
                target_agent_id="qa-iso",
                message=f"Status of {MARK}?",
            ),
            **alice,
        )
    )
    assert asked[-1].WhichOneof("kind") == "final", asked[-1]
    w.ask_run = asked[0].run_id
    await sb.projects.CreateProject(
        J.CreateProjectRequest(project=projects_pb2.Project(id=w.project, display_name="Alice's")), **alice
    )
    note = await sb.memory.CreateNote(
        M.CreateNoteRequest(
            request_id=w.note_request,
            note=memory_pb2.Note(
                project_id=w.project,
                kind=memory_pb2.NOTE_KIND_DECISION,
                title=f"Launch plan {MARK}",
                body=f"We ship on Friday, {MARK} included.",
            ),
        ),
        **alice,
    )
    w.note = note.note.id
    proposed = await sb.memory.ProposeNote(
        M.ProposeNoteRequest(
            request_id=w.note_proposal_request,
            note=memory_pb2.Note(
                project_id=w.project,
                kind=memory_pb2.NOTE_KIND_FACT,
                title=f"Proposed {MARK}",
                body=f"Alice's agent proposes {MARK}.",
            ),
        ),
        **alice,
    )
    w.note_proposal = proposed.proposal.id
    await sb.memory.UpdateProjectContext(
        M.UpdateProjectContextRequest(
            context=memory_pb2.ProjectContext(project_id=w.project, body=f"# {MARK}")
        ),
        **alice,
    )
    await sb.memory.SetLiveState(
        M.SetLiveStateRequest(
            project_id=w.project,
            agent_id=w.live_agent,
            activity=f"Reviewing {MARK}",
            ttl=Duration(seconds=3600),
        ),
        **alice,
    )
    page = await sb.pages.CreatePage(
        P.CreatePageRequest(
            request_id=w.page_request, page=pages_pb2.Page(title=f"{MARK} plan", body="v1\n")
        ),
        **alice,
    )
    w.page = page.page.id
    await sb.pages.UpdatePage(
        P.UpdatePageRequest(
            page=pages_pb2.Page(id=w.page, body="v2\n"), update_mask=FieldMask(paths=["body"])
        ),
        **alice,
    )
    instructions = await sb.pages.CreateInstructionPage(
        P.CreateInstructionPageRequest(request_id=w.instruction_request, title=f"{MARK} me"), **alice
    )
    w.instruction_page = instructions.page.id
    proposal = await sb.pages.CreateProposal(
        P.CreateProposalRequest(
            request_id=w.proposal_request,
            page_id=w.page,
            proposed_body=f"v3 {MARK}\n",
            proposer_agent_id="main",
        ),
        **alice,
    )
    w.proposal = proposal.proposal.id
    skills = await sb.router.ListSkills(R.ListSkillsRequest(page_size=100), **alice)
    w.skill = next(s.id for s in skills.skills if not s.builtin)
    await sb.router.SetSkillEnablement(
        R.SetSkillEnablementRequest(skill_id=w.skill, enabled=False, auto_use=R.AUTO_USE_OVERRIDE_OFF),
        **alice,
    )
    feedback = await sb.router.CreateSkillFeedback(
        R.CreateSkillFeedbackRequest(
            request_id=w.feedback_request, skill_id=w.skill, request_text=f"not for {MARK}", run_id=w.run
        ),
        **alice,
    )
    w.feedback = feedback.feedback.id
    await sb.memory.UpdatePersonalSettings(
        M.UpdatePersonalSettingsRequest(
            settings=memory_pb2.PersonalSettings(display_name=f"{MARK} Ally"),
            update_mask=FieldMask(paths=["display_name"]),
        ),
        **alice,
    )
    return w


async def alice_view(sb: System, w: World) -> str:
    """Everything alice can read of her objects, one JSON text."""
    reads: list[tuple[str, Message]] = [
        ("ThreadsService.GetConversation", T.GetConversationRequest(conversation_id=w.conversation)),
        ("ThreadsService.ListConversations", T.ListConversationsRequest(include_archived=True)),
        (
            "ThreadsService.ListEntries",
            T.ListEntriesRequest(
                for_conversation=T.ListEntriesRequest.ForConversation(conversation_id=w.conversation)
            ),
        ),
        ("EngineService.GetRun", E.GetRunRequest(run_id=w.run)),
        ("EngineService.GetRun", E.GetRunRequest(run_id=w.ask_run)),
        ("EngineService.ListRuns", E.ListRunsRequest(conversation_id=w.conversation)),
        ("MemoryService.GetNote", M.GetNoteRequest(id=w.note)),
        ("MemoryService.ListNotes", M.ListNotesRequest()),
        ("MemoryService.GetProjectContext", M.GetProjectContextRequest(project_id=w.project)),
        ("MemoryService.ListLiveState", M.ListLiveStateRequest(project_id=w.project)),
        ("MemoryService.GetPersonalSettings", M.GetPersonalSettingsRequest()),
        ("PagesService.ListPages", P.ListPagesRequest()),
        ("PagesService.ListPageVersions", P.ListPageVersionsRequest(page_id=w.page)),
        ("PagesService.GetProposal", P.GetProposalRequest(proposal_id=w.proposal)),
        ("PagesService.ListProposals", P.ListProposalsRequest()),
        ("PagesService.ListInstructionPages", P.ListInstructionPagesRequest()),
        ("PagesService.GetActiveInstructions", P.GetActiveInstructionsRequest()),
        ("RouterService.GetSkill", R.GetSkillRequest(skill=w.skill)),
        ("RouterService.ListSkillFeedback", R.ListSkillFeedbackRequest()),
    ]
    outcomes = await asyncio.gather(*(call(sb, "alice", method, request) for method, request in reads))
    return json.dumps(
        dict(zip([f"{i} {m}" for i, (m, _) in enumerate(reads)], outcomes, strict=True)), indent=1
    )


@pytest.fixture
async def world(make_database: DatabaseFactory) -> AsyncIterator[tuple[System, World, str]]:
    async with system(make_database) as sb:
        w = await make_world(sb)
        # Settled: whatever the runs finish after their final event is done.
        view = await alice_view(sb, w)
        for _ in range(40):
            await asyncio.sleep(0.05)
            again = await alice_view(sb, w)
            if again == view:
                break
            view = again
        assert MARK in view and w.page in view  # alice sees her objects
        yield sb, w, view


async def check_case(sb: System, w: World, method: str, number: int, case: Case) -> list[str]:
    """The failures of one case, as sentences. Two intruders, one per call,
    so that what the first call creates cannot change the second's answer."""
    where = f"{method}[{number}]"
    theirs, nobody = case.foreign(w), case.missing()
    assert theirs and theirs != nobody, f"{where}: alice has no such object"
    outcomes = []
    for named, side in ((theirs, "a"), (nobody, "b")):
        intruder = f"bob-{method.split('.')[1].lower()}-{number}-{side}"
        request = case.build(w, named)
        outcome = [await call(sb, intruder, method, request, case.first)]
        code = outcome[0]["code"]
        for then_method, then_request in case.then:
            outcome.append(await call(sb, intruder, then_method, then_request))
        if case.view is not None:
            outcome = [case.view(o["answers"]) if "answers" in o else o for o in outcome]
        # Masked: the id named, the intruder, and what the request itself says.
        text = json.dumps(outcome, sort_keys=True)
        sent = str(request)
        leaked = sorted(s for s in w.secrets() - {named} if s in text and s not in sent)
        masked = _fresh(text.replace(named, "<ID>").replace(intruder, "<USER>"))
        outcomes.append((code, masked, leaked))
    failures = []
    expected = case.code.name if case.code else "OK"
    (foreign_code, foreign, leaked), (missing_code, missing, _) = outcomes
    if foreign_code != expected or missing_code != expected:
        failures.append(f"{where}: expected {expected} for both ids, got\n  {foreign}\n  {missing}")
    if leaked:
        failures.append(f"{where}: the answer to alice's id holds alice's {leaked}: {foreign}")
    if foreign != missing:
        failures.append(
            f"{where}: alice's id and a missing one answer differently:\n  {foreign}\n  {missing}"
        )
    return failures


def _diff(before: str, after: str) -> str:
    return "\n".join(difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=1))


async def test_another_users_ids_answer_exactly_like_missing_ones(world: tuple[System, World, str]) -> None:
    sb, w, before = world
    failures = []
    for method, cases in MATRIX.items():
        for number, case in enumerate(cases):
            failures += await check_case(sb, w, method, number, case)
    for method, request in OWN_READS:
        outcome = json.dumps(await call(sb, "bob", method, request))
        leaked = sorted(s for s in w.secrets() if s in outcome)
        if leaked:
            failures.append(f"{method}: bob's answer holds alice's {leaked}: {outcome}")
    # Bob's enablement of a workspace skill is his own (alice's stays off).
    await sb.router.SetSkillEnablement(
        R.SetSkillEnablementRequest(skill_id=w.skill, enabled=True, auto_use=R.AUTO_USE_OVERRIDE_ON),
        **as_user("bob"),
    )
    # Nothing any intruder did changed what alice sees (the writes name their method).
    after = await alice_view(sb, w)
    if after != before:
        failures.append(f"the calls changed alice's objects:\n{_diff(before, after)}")
    assert not failures, "\n".join(failures)


# Function-level permissions, checked before any object: for every method
# gated by a role or by agent ownership, mallory (a user, no member of
# alice's agent) gets PERMISSION_DENIED with its reason, and
# root (an admin) is served, or refused too where being a member is what
# counts. Rows run in order: (method, request, root served?).
ROLE_GATED: list[tuple[str, Callable[[World, str], Message], bool]] = [
    (
        "RouterService.CreateSkill",
        lambda w, s: R.CreateSkillRequest(skill=_skill(f"gated-{new_id()[:8]}")),
        True,
    ),
    (
        "RouterService.UpdateSkill",
        lambda w, s: R.UpdateSkillRequest(
            skill=router_pb2.Skill(id=s, description="gated"), update_mask=FieldMask(paths=["description"])
        ),
        True,
    ),
    ("RouterService.ListAuditEvents", lambda w, s: R.ListAuditEventsRequest(), True),
    (
        "ThreadsService.UpdateAgent",
        lambda w, s: T.UpdateAgentRequest(
            agent=threads_pb2.Agent(id="qa-iso", model="m2"), update_mask=FieldMask(paths=["model"])
        ),
        True,
    ),
    (
        "ThreadsService.AddAgentMember",
        lambda w, s: T.AddAgentMemberRequest(agent_id="qa-iso", user_id="c"),
        True,
    ),
    (
        "ThreadsService.RemoveAgentMember",
        lambda w, s: T.RemoveAgentMemberRequest(agent_id="qa-iso", user_id="c"),
        True,
    ),
    ("ThreadsService.ListAgentMembers", lambda w, s: T.ListAgentMembersRequest(agent_id="qa-iso"), True),
    ("ThreadsService.ListAuditEvents", lambda w, s: T.ListAuditEventsRequest(), True),
    ("ProjectsService.ListAuditEvents", lambda w, s: J.ListAuditEventsRequest(), True),
    (
        "ThreadsService.EnsureAgentThread",
        lambda w, s: T.EnsureAgentThreadRequest(target_agent_id="qa-iso"),
        False,
    ),
    ("ThreadsService.ExportAgentThread", lambda w, s: T.ExportAgentThreadRequest(agent_id="qa-iso"), False),
    (
        "ThreadsService.ListEntries",
        lambda w, s: T.ListEntriesRequest(for_agent=T.ListEntriesRequest.ForAgent(agent_id="qa-iso")),
        False,
    ),
    ("RouterService.DeleteSkill", lambda w, s: R.DeleteSkillRequest(skill_id=s), True),
]


def _skill(name: str) -> router_pb2.Skill:
    return router_pb2.Skill(name=name, description="a gated skill", body="Do it.")


def test_every_role_gated_method_is_in_the_role_matrix() -> None:
    gated = {method for method, reason in SHARED.items() if "ROLE_GATED" in reason}
    assert gated <= {method for method, _, _ in ROLE_GATED}


async def _denied(sb: System, user: str, method: str, request: Message, role: str) -> str:
    service, name = method.split(".")
    try:
        await getattr(_stubs(sb)[service], name)(request, **as_user(user, role))
    except grpc.aio.AioRpcError as error:
        info = error_info(error)
        return f"{error.code().name} {info.reason if info else ''}"
    return "OK"


async def test_role_gated_methods_refuse_users_and_serve_admins(world: tuple[System, World, str]) -> None:
    sb, w, before = world
    target = await sb.router.CreateSkill(
        R.CreateSkillRequest(skill=_skill("gated-target")), **as_user("root", "admin")
    )
    failures = []
    for method, build, admin_served in ROLE_GATED:
        request = build(w, target.skill.id)
        user = await _denied(sb, "mallory", method, request, "user")
        if user != "PERMISSION_DENIED ERROR_REASON_PERMISSION_DENIED":
            failures.append(f"{method} as a user: {user}")
        root = await _denied(sb, "root", method, request, "admin")
        expected = "OK" if admin_served else "PERMISSION_DENIED ERROR_REASON_PERMISSION_DENIED"
        if root != expected:
            failures.append(f"{method} as an admin: {root}, expected {expected}")
    assert not failures, "\n".join(failures)
