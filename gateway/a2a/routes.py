"""A2A over HTTP: every agent at its own JSON-RPC URL with its card under
it, the host's card (the deployment's default agent), and the list of the
agents a caller may address. The JSON-RPC methods are the SDK's dispatcher
over gateway.a2a.handler; this module only answers who calls (401 without a
valid token) and whether they may see the agent (404 when not, as a
missing one)."""

from __future__ import annotations

import logging
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.jsonrpc_models import JSONParseError
from a2a.server.request_handlers.response_helpers import agent_card_to_dict, build_error_response
from a2a.server.routes import ServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.utils.constants import VERSION_HEADER
from fastapi import Request, Response
from fastapi.responses import JSONResponse
from pydantic import Field

from gateway import deps, responses
from gateway.a2a.cards import AGENTS_PATH, agent_card, agent_url
from gateway.a2a.handler import AGENT, CURSOR, IDENTITY, SwitchboardRequestHandler
from gateway.a2a.tasks import CURSOR_EXTENSION, CURSOR_PARAMETER
from gateway.auth import caller_role
from gateway.deps import User, rpc
from gateway.errors import ApiError
from gateway.params import Id, PageSize, PageToken
from gateway.responses.base import Body
from switchboard.router.v1 import router_pb2, router_service_pb2
from switchboard.threads.v1 import threads_pb2, threads_service_pb2

router = responses.ApiRouter(tags=["a2a"])


class _ClientMistakes(logging.Filter):
    """The SDK logs a malformed JSON-RPC request with its traceback, as if
    the server had failed: the line stays, as a warning, without the trace."""

    MISTAKES = ("Failed to validate base JSON-RPC request", "Failed to parse request params")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith(self.MISTAKES):
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


logging.getLogger("a2a.server.routes.jsonrpc_dispatcher").addFilter(_ClientMistakes())
CARD = "/.well-known/agent-card.json"
EXTENSIONS_HEADER = "A2A-Extensions"


class A2aAgent(Body):
    """An agent the caller may address over A2A."""

    id: str = Field(description="the agent's id")
    name: str = Field(description="its display name, as its card gives it")
    url: str = Field(description="its A2A JSON-RPC endpoint")
    card_url: str = Field(description="its agent card")


class A2aAgentList(Body):
    """A page of the agents the caller may address over A2A."""

    agents: list[A2aAgent] = Field(description="the page's agents")
    next_page_token: str = Field(description='the next page\'s token; "" after the last page')


class _HttpContext(ServerCallContextBuilder):
    """The call context of a JSON-RPC request the route has let through:
    the caller, their agent, the extensions they activated and their cursor."""

    def build(self, request: Any) -> ServerCallContext:
        requested = {
            uri.strip() for value in request.headers.getlist(EXTENSIONS_HEADER) for uri in value.split(",")
        }
        return ServerCallContext(
            state={
                # The protocol version the SDK checks (A2A-Version), and no
                # other header: the token stays out of the handler's reach.
                "headers": {VERSION_HEADER.lower(): request.headers.get(VERSION_HEADER, "")},
                IDENTITY: (request.state.a2a_user, caller_role(request)),
                AGENT: request.state.a2a_agent,
                CURSOR: request.headers.get(CURSOR_PARAMETER, ""),
            },
            requested_extensions={uri for uri in requested if uri},
        )


def dispatcher(request: Request) -> JsonRpcDispatcher:
    """One dispatcher for the app, over the engine's stubs of its state."""
    found: JsonRpcDispatcher | None = getattr(request.app.state, "a2a_dispatcher", None)
    if found is None:
        handler = SwitchboardRequestHandler(request.app.state, deps.settings(request))
        found = JsonRpcDispatcher(handler, context_builder=_HttpContext())
        request.app.state.a2a_dispatcher = found
    return found


async def _agent(request: Request, user: str, agent_id: str) -> threads_pb2.Agent:
    """The agent, 404 when the caller may not see it."""
    found = await rpc(
        request, deps.threads(request).GetAgent, threads_service_pb2.GetAgentRequest(agent_id=agent_id), user
    )
    agent: threads_pb2.Agent = found.agent
    return agent


def _base_url(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def _grpc_address(request: Request) -> str:
    settings = deps.settings(request)
    if settings.a2a_grpc_port is None:
        return ""
    return settings.a2a_grpc_address or f"{request.url.hostname}:{settings.a2a_grpc_port}"


async def _card(request: Request, user: str, agent_id: str) -> JSONResponse:
    agent = await _agent(request, user, agent_id)
    listed = await rpc(
        request,
        deps.router_stub(request).ListSkills,
        router_service_pb2.ListSkillsRequest(page_size=100),
        user,
    )
    skills: list[router_pb2.Skill] = list(listed.skills)
    card = agent_card(agent, skills, _base_url(request), _grpc_address(request), request.app.version)
    return JSONResponse(agent_card_to_dict(card))


@router.get("/a2a/agents")
async def list_a2a_agents(
    request: Request, user: User, page_size: PageSize = 50, page_token: PageToken = ""
) -> A2aAgentList:
    """The agents the caller may address over A2A (those of their projects),
    each with its JSON-RPC URL and the URL of its agent card."""
    listed = await rpc(
        request,
        deps.threads(request).ListAgents,
        threads_service_pb2.ListAgentsRequest(page_size=page_size, page_token=page_token),
        user,
    )
    base = _base_url(request)
    return A2aAgentList(
        agents=[
            A2aAgent(
                id=a.id,
                name=a.display_name or a.id,
                url=agent_url(base, a.id),
                card_url=agent_url(base, a.id) + CARD,
            )
            for a in listed.agents
        ],
        next_page_token=listed.next_page_token,
    )


@router.get(AGENTS_PATH + "/{agent_id}" + CARD, response_model=None)
async def a2a_agent_card(agent_id: Id, request: Request, user: User) -> JSONResponse:
    """The agent's A2A agent card."""
    return await _card(request, user, agent_id)


@router.get(CARD, response_model=None)
async def a2a_host_card(request: Request, user: User) -> JSONResponse:
    """The card of the deployment's default agent (the gateway's
    `a2a_default_agent` setting); 404 when none is set."""
    default = deps.settings(request).a2a_default_agent
    if not default:
        raise ApiError(
            404, "NOT_FOUND", "no default A2A agent is set (SWITCHBOARD_GATEWAY_A2A_DEFAULT_AGENT)"
        )
    return await _card(request, user, default)


@router.post(AGENTS_PATH + "/{agent_id}", response_model=None)
async def a2a_json_rpc(agent_id: Id, request: Request, user: User) -> Response:
    """The agent's A2A JSON-RPC endpoint (A2A 1.0: SendMessage,
    SendStreamingMessage, GetTask, ListTasks, CancelTask, SubscribeToTask,
    the push notification config methods). A2A errors are JSON-RPC errors
    (HTTP 200), as the binding specifies."""
    await _agent(request, user, agent_id)
    try:
        (await request.body()).decode("utf-8")
    except UnicodeDecodeError as error:
        # The SDK would call this an internal error: it is the client's parse error.
        return JSONResponse(
            build_error_response(None, JSONParseError(message=f"the body is not UTF-8: {error}"))
        )
    request.state.a2a_user, request.state.a2a_agent = user, agent_id
    response = await dispatcher(request).handle_requests(request)
    if CURSOR_EXTENSION in request.headers.get(EXTENSIONS_HEADER, ""):
        # The extensions the server applied, as A2A's extension header says.
        response.headers[EXTENSIONS_HEADER] = CURSOR_EXTENSION
    return response
