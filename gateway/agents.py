"""Agents (the project's registry, shared by its users), inter-agent asks
(a run of the target agent, streamed as SSE like a message), the views of
an agent's thread (whole, one requester's exchanges, one correlation), its
rotation segments with their handoff summaries, and its export and import."""

from __future__ import annotations

import functools
import uuid
from typing import Annotated, Any

import grpc
from fastapi import Request, Response
from google.protobuf.field_mask_pb2 import FieldMask
from sse_starlette import EventSourceResponse

from gateway import deps, params, responses
from gateway.agent_models import check_provider_pin
from gateway.api import check_message
from gateway.deps import User, rpc
from gateway.enums import BUSY_POLICIES, INJECTION_STRATEGIES
from gateway.errors import ApiError
from gateway.params import Id, PageSize, PageToken, ProjectId
from gateway.schemas import (
    AskBody,
    CreateAgentBody,
    ImportThreadBody,
    RegisterRemoteAgentBody,
    UpdateAgentBody,
)
from gateway.streams import stream_run
from switchboard.engine.v1 import engine_service_pb2
from switchboard.threads.v1 import threads_pb2, threads_service_pb2

router = responses.ApiRouter(prefix="/api/agent")
View = threads_service_pb2.ListEntriesRequest


@router.get("/agents", tags=["agents"])
async def list_agents(
    request: Request,
    user: User,
    page_size: PageSize = 50,
    page_token: PageToken = "",
    project_id: ProjectId = "",
) -> responses.AgentList:
    """The registry, or with ``project_id`` the agents of that project."""
    response = await rpc(
        request,
        deps.threads(request).ListAgents,
        threads_service_pb2.ListAgentsRequest(
            page_size=page_size, page_token=page_token, project_id=project_id
        ),
        user,
    )
    return responses.AgentList(
        agents=[responses.Agent.from_proto(a) for a in response.agents],
        next_page_token=response.next_page_token,
    )


@router.post("/agents", status_code=201, tags=["agents"])
async def create_agent(
    body: CreateAgentBody, request: Request, user: User, project_id: ProjectId = ""
) -> responses.Agent:
    """Registers an agent (a slug id) in ``project_id`` (the caller's
    personal project by default; an editor's or owner's otherwise); creating
    an existing id returns it unchanged."""
    fields = body.model_dump()
    await check_provider_pin(request, user, fields["provider_id"], fields["model"])
    fields["injection_strategy"] = INJECTION_STRATEGIES.number(body.injection_strategy)
    agent = threads_pb2.Agent(**fields, project_id=project_id)
    response = await rpc(
        request, deps.threads(request).CreateAgent, threads_service_pb2.CreateAgentRequest(agent=agent), user
    )
    return responses.Agent.from_proto(response.agent)


@router.post("/agents/remote", status_code=201, tags=["agents"])
async def register_remote_agent(
    body: RegisterRemoteAgentBody, request: Request, user: User, project_id: ProjectId = ""
) -> responses.Agent:
    """Registers a remote A2A agent by the URL of its agent card, in
    ``project_id`` as POST /agents does: the card is fetched and checked
    first (400 for a URL the outbound guard refuses, a card that cannot be
    fetched or is not a usable agent card; 409 for an id another agent
    has). Its asks then go to it over A2A, on its own shared thread."""
    response = await rpc(
        request,
        deps.threads(request).RegisterRemoteAgent,
        threads_service_pb2.RegisterRemoteAgentRequest(
            agent_id=body.id, card_url=body.card_url, display_name=body.display_name, project_id=project_id
        ),
        user,
        timeout=deps.settings(request).remote_agent_register_timeout,
    )
    return responses.Agent.from_proto(response.agent)


@router.get("/agents/{agent_id}", tags=["agents"])
async def get_agent(agent_id: Id, request: Request, user: User) -> responses.Agent:
    response = await rpc(
        request, deps.threads(request).GetAgent, threads_service_pb2.GetAgentRequest(agent_id=agent_id), user
    )
    return responses.Agent.from_proto(response.agent)


@router.patch("/agents/{agent_id}", tags=["agents"])
async def update_agent(agent_id: Id, body: UpdateAgentBody, request: Request, user: User) -> responses.Agent:
    """Renames the agent or changes its persona, provider pin, model or
    injection strategy; only the fields present are written. A model of
    another provider is a provider swap: the next run releases the old
    provider's session and starts from the thread's handoff summary."""
    fields: dict[str, Any] = {
        key: value for key, value in body.model_dump(exclude_unset=True).items() if value is not None
    }
    if not fields:
        raise ApiError(400, "INVALID_ARGUMENT", "give at least one field to change")
    if "provider_id" in fields or "model" in fields:
        # The pin and the model are checked together: the one not given is the stored one.
        both = fields.keys() >= {"provider_id", "model"}
        stored = threads_pb2.Agent() if both else await _agent(request, user, agent_id)
        await check_provider_pin(
            request, user, fields.get("provider_id", stored.provider_id), fields.get("model", stored.model)
        )
    if "injection_strategy" in fields:
        fields["injection_strategy"] = INJECTION_STRATEGIES.number(fields["injection_strategy"])
    response = await rpc(
        request,
        deps.threads(request).UpdateAgent,
        threads_service_pb2.UpdateAgentRequest(
            agent=threads_pb2.Agent(id=agent_id, **fields), update_mask=FieldMask(paths=sorted(fields))
        ),
        user,
    )
    return responses.Agent.from_proto(response.agent)


@router.get("/agents/{agent_id}/members", tags=["agents"])
async def list_agent_members(agent_id: Id, request: Request, user: User) -> responses.AgentMembers:
    """Who may ask the agent and read its thread (for its members and admins)."""
    response = await rpc(
        request,
        deps.threads(request).ListAgentMembers,
        threads_service_pb2.ListAgentMembersRequest(agent_id=agent_id),
        user,
    )
    return responses.AgentMembers(agent_id=agent_id, owner=response.owner, members=list(response.members))


# A member is a user id as the tokens name it: one line of text.
MemberId = params.Name


@router.put("/agents/{agent_id}/members/{user_id}", tags=["agents"])
async def add_agent_member(
    agent_id: Id, user_id: MemberId, request: Request, user: User
) -> responses.AgentMembers:
    """Lets a user ask the agent and read its thread (its owner or an admin;
    403 for anyone else). Adding a member twice changes nothing."""
    threads = deps.threads(request)
    response = await rpc(
        request,
        threads.AddAgentMember,
        threads_service_pb2.AddAgentMemberRequest(agent_id=agent_id, user_id=user_id),
        user,
    )
    owner = await _owner(request, user, agent_id)
    return responses.AgentMembers(agent_id=agent_id, owner=owner, members=list(response.members))


@router.delete("/agents/{agent_id}/members/{user_id}", tags=["agents"])
async def remove_agent_member(
    agent_id: Id, user_id: MemberId, request: Request, user: User
) -> responses.AgentMembers:
    """Removes a member (its owner or an admin); the owner stays (409)."""
    response = await rpc(
        request,
        deps.threads(request).RemoveAgentMember,
        threads_service_pb2.RemoveAgentMemberRequest(agent_id=agent_id, user_id=user_id),
        user,
    )
    owner = await _owner(request, user, agent_id)
    return responses.AgentMembers(agent_id=agent_id, owner=owner, members=list(response.members))


async def _agent(request: Request, user: str, agent_id: str) -> threads_pb2.Agent:
    response = await rpc(
        request, deps.threads(request).GetAgent, threads_service_pb2.GetAgentRequest(agent_id=agent_id), user
    )
    agent: threads_pb2.Agent = response.agent
    return agent


async def _owner(request: Request, user: str, agent_id: str) -> str:
    return (await _agent(request, user, agent_id)).owner


@router.post(
    "/agents/{agent_id}/asks",
    **responses.event_stream(responses.RUN_EVENTS),
    tags=["agents"],
)
async def ask_agent(
    agent_id: Id, body: AskBody, request: Request, user: User
) -> EventSourceResponse | Response:
    """Asks an agent: a run of that agent on its one shared thread, with the
    requester and correlation id on every entry; streamed like a message."""
    check_message(request, body.message)
    start = functools.partial(
        deps.engine(request).AskAgent,
        engine_service_pb2.AskAgentRequest(
            request_id=body.request_id or str(uuid.uuid4()),
            requester=body.requester,
            target_agent_id=agent_id,
            message=body.message,
            correlation_id=body.correlation_id,
            busy_policy=BUSY_POLICIES.number(body.busy_policy),
        ),
        timeout=deps.settings(request).run_stream_timeout,
        metadata=deps.identity(request, user),
    )
    return await stream_run(start, request, user)


@router.get("/agents/{agent_id}/entries", tags=["agents"])
async def agent_entries(
    agent_id: Id,
    request: Request,
    user: User,
    requester: Annotated[str, params.text(64, description="only this requester's exchanges")] = "",
    correlation_id: Annotated[str, params.text(128, description="only this request and its answers")] = "",
    descending: bool = False,
    page_size: PageSize = 100,
    page_token: PageToken = "",
) -> responses.AgentEntryPage:
    """A view of the agent's live thread: all of it, one requester's
    exchanges with the agent (`requester`), or one request and its answers
    (`correlation_id`). `partial_view` says the thread holds more."""
    if requester and correlation_id:
        raise ApiError(400, "INVALID_ARGUMENT", "give requester or correlation_id, not both")
    message = View(descending=descending, page_size=page_size, page_token=page_token)
    if requester:
        message.for_pair.CopyFrom(View.ForPair(requester=requester, target=agent_id))
    else:
        # The correlation view names a thread: the agent's live one.
        thread_id = await _live_thread_id(request, user, agent_id)
        if not thread_id:
            # A registered agent that nobody has asked yet has no thread: an empty view.
            return responses.AgentEntryPage(
                entries=[], thread_id="", partial_view=False, next_page_token="", previous_page_token=""
            )
        if correlation_id:
            message.for_correlation.CopyFrom(
                View.ForCorrelation(thread_id=thread_id, correlation_id=correlation_id)
            )
        else:
            message.for_agent.CopyFrom(View.ForAgent(agent_id=agent_id))
    response = await rpc(request, deps.threads(request).ListEntries, message, user)
    return responses.AgentEntryPage(
        entries=[responses.Entry.from_proto(e) for e in response.entries],
        thread_id=response.thread_id,
        partial_view=response.partial_view,
        next_page_token=response.next_page_token,
        previous_page_token=response.previous_page_token,
    )


async def _live_thread_id(request: Request, user: str, agent_id: str) -> str:
    """The agent's live thread ("" before its first ask: none is created
    here); 404 for an unknown agent."""
    threads = deps.threads(request)
    try:
        head: threads_service_pb2.ListEntriesResponse = await rpc(
            request, threads.ListEntries, View(for_agent=View.ForAgent(agent_id=agent_id), page_size=1), user
        )
    except grpc.aio.AioRpcError as error:
        if error.code() != grpc.StatusCode.NOT_FOUND:
            raise
        # Unknown agent: its own 404; a registered one simply has no thread yet.
        await rpc(request, threads.GetAgent, threads_service_pb2.GetAgentRequest(agent_id=agent_id), user)
        return ""
    return head.thread_id


@router.get("/agents/{agent_id}/segments", tags=["agents"])
async def agent_segments(
    agent_id: Id,
    request: Request,
    user: User,
    page_size: PageSize = 100,
    page_token: PageToken = "",
) -> responses.SegmentPage:
    """The segments of the agent's live thread, oldest first: each rotation
    closed one, and its handoff summary is what a model receives in its
    place. None before the thread's first entry."""
    thread_id = await _live_thread_id(request, user, agent_id)
    if not thread_id:
        return responses.SegmentPage(segments=[], thread_id="", next_page_token="")
    response = await rpc(
        request,
        deps.threads(request).ListSegments,
        threads_service_pb2.ListSegmentsRequest(
            thread_id=thread_id, page_size=page_size, page_token=page_token
        ),
        user,
    )
    return responses.SegmentPage(
        segments=[responses.Segment.from_proto(s) for s in response.segments],
        thread_id=thread_id,
        next_page_token=response.next_page_token,
    )


@router.get("/agents/{agent_id}/export", tags=["agents"])
async def export_agent_thread(agent_id: Id, request: Request, user: User) -> responses.AgentThreadExport:
    """The agent's thread as files in the project folder's layout (agents/<id>/log.jsonl,
    log.N.jsonl per closed segment, handoff.md, providers.json); the page
    saves them as one JSON download, which POST /agents/import takes back."""
    response = await rpc(
        request,
        deps.threads(request).ExportAgentThread,
        threads_service_pb2.ExportAgentThreadRequest(agent_id=agent_id),
        user,
    )
    return responses.AgentThreadExport(
        agent_id=agent_id,
        files=[responses.ThreadFile(path=f.path, content=f.content) for f in response.files],
    )


@router.post("/agents/import", status_code=201, tags=["agents"])
async def import_agent_thread(
    body: ImportThreadBody, request: Request, user: User
) -> responses.AgentThreadImport:
    """Imports one agent's exported thread (registering the agent if
    missing). 409 when that agent already has a thread with entries."""
    response = await rpc(
        request,
        deps.threads(request).ImportAgentThread,
        threads_service_pb2.ImportAgentThreadRequest(
            files=[threads_pb2.ThreadFile(path=f.path, content=f.content) for f in body.files]
        ),
        user,
        idempotent=False,
    )
    return responses.AgentThreadImport(thread=responses.ImportedAgentThread.from_proto(response.thread))
