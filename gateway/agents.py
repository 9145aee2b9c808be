"""Agents (the project's registry, shared by its users), inter-agent asks
(a run of the target agent, streamed as SSE like a message) and the views of
an agent's thread (whole, one requester's exchanges, one correlation)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from sse_starlette import EventSourceResponse

from gateway import deps
from gateway.api import BUSY_POLICIES, SSE_RESPONSES, check_message, entry_json
from gateway.deps import User, rpc
from gateway.errors import ApiError
from gateway.events import message_dict, short_enum
from gateway.schemas import AskBody, CreateAgentBody
from gateway.streams import stream_run
from services.shared.identity import user_metadata
from switchboard.engine.v1 import engine_service_pb2
from switchboard.threads.v1 import threads_pb2, threads_service_pb2

router = APIRouter(prefix="/api/agent")
View = threads_service_pb2.ListEntriesRequest


def agent_json(agent: threads_pb2.Agent) -> dict[str, Any]:
    data = message_dict(agent)
    data["injection_strategy"] = short_enum(data.get("injection_strategy", ""), "INJECTION_STRATEGY_")
    return data


@router.get("/agents", tags=["agents"])
async def list_agents(
    request: Request,
    user: User,
    page_size: Annotated[int, Query(ge=0, le=500)] = 50,
    page_token: Annotated[str, Query(max_length=2000)] = "",
) -> dict[str, Any]:
    response = await rpc(
        request,
        deps.threads(request).ListAgents,
        threads_service_pb2.ListAgentsRequest(page_size=page_size, page_token=page_token),
        user,
    )
    return {"agents": [agent_json(a) for a in response.agents], "next_page_token": response.next_page_token}


@router.post("/agents", status_code=201, tags=["agents"])
async def create_agent(body: CreateAgentBody, request: Request, user: User) -> dict[str, Any]:
    """Registers an agent (a slug id); creating an existing id returns it unchanged."""
    response = await rpc(
        request,
        deps.threads(request).CreateAgent,
        threads_service_pb2.CreateAgentRequest(agent=threads_pb2.Agent(**body.model_dump())),
        user,
    )
    return agent_json(response.agent)


@router.get("/agents/{agent_id}", tags=["agents"])
async def get_agent(agent_id: str, request: Request, user: User) -> dict[str, Any]:
    response = await rpc(
        request, deps.threads(request).GetAgent, threads_service_pb2.GetAgentRequest(agent_id=agent_id), user
    )
    return agent_json(response.agent)


@router.post("/agents/{agent_id}/asks", responses=SSE_RESPONSES, response_model=None, tags=["agents"])
async def ask_agent(
    agent_id: str, body: AskBody, request: Request, user: User
) -> EventSourceResponse | Response:
    """Asks an agent: a run of that agent on its one shared thread, with the
    requester and correlation id on every entry; streamed like a message."""
    check_message(request, body.message)
    stream = deps.engine(request).AskAgent(
        engine_service_pb2.AskAgentRequest(
            request_id=body.request_id or str(uuid.uuid4()),
            requester=body.requester,
            target_agent_id=agent_id,
            message=body.message,
            correlation_id=body.correlation_id,
            busy_policy=BUSY_POLICIES[body.busy_policy],
        ),
        timeout=deps.settings(request).run_stream_timeout,
        metadata=user_metadata(user),
    )
    return await stream_run(stream, request, user)


@router.get("/agents/{agent_id}/entries", tags=["agents"])
async def agent_entries(
    agent_id: str,
    request: Request,
    user: User,
    requester: Annotated[str, Query(max_length=64, description="only this requester's exchanges")] = "",
    correlation_id: Annotated[
        str, Query(max_length=128, description="only this request and its answers")
    ] = "",
    descending: bool = False,
    page_size: Annotated[int, Query(ge=0, le=500)] = 100,
    page_token: Annotated[str, Query(max_length=2000)] = "",
) -> dict[str, Any]:
    """A view of the agent's live thread: all of it, one requester's
    exchanges with the agent (`requester`), or one request and its answers
    (`correlation_id`). `partial_view` says the thread holds more."""
    if requester and correlation_id:
        raise ApiError(400, "INVALID_ARGUMENT", "give requester or correlation_id, not both")
    threads = deps.threads(request)
    message = View(descending=descending, page_size=page_size, page_token=page_token)
    if requester:
        message.for_pair.CopyFrom(View.ForPair(requester=requester, target=agent_id))
    elif correlation_id:
        # The correlation view names a thread: the agent's live one.
        head = await rpc(
            request, threads.ListEntries, View(for_agent=View.ForAgent(agent_id=agent_id), page_size=1), user
        )
        message.for_correlation.CopyFrom(
            View.ForCorrelation(thread_id=head.thread_id, correlation_id=correlation_id)
        )
    else:
        message.for_agent.CopyFrom(View.ForAgent(agent_id=agent_id))
    response = await rpc(request, threads.ListEntries, message, user)
    return {
        "entries": [entry_json(e) for e in response.entries],
        "thread_id": response.thread_id,
        "partial_view": response.partial_view,
        "next_page_token": response.next_page_token,
        "previous_page_token": response.previous_page_token,
    }
