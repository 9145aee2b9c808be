"""The /v1 routes: `GET /v1/models` and `POST /v1/chat/completions` (one
request, one run), and OpenAI's other URLs refused as not served."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from typing import Annotated, Any

import grpc
from fastapi import APIRouter, Header, Request, Response

from gateway import deps, params, responses
from gateway.api import check_message
from gateway.catalog import configured_models
from gateway.deps import User, rpc
from gateway.errors import ApiError
from gateway.openai_compat.completion import Completion, stream_chunks, whole_completion
from gateway.openai_compat.conversation import CONVERSATION_HEADER, conversation_for
from gateway.openai_compat.errors import OpenAIError, OpenAIRoute, refusal
from gateway.openai_compat.exchange import ChatCompletionBody, Exchange, read_exchange
from gateway.schemas import PROJECT_ID_PATTERN
from gateway.streams import Relay, open_run, sse_response
from services.shared.projects import MAX_PROJECT_ID_CHARS, is_personal_name
from switchboard.engine.v1 import engine_pb2, engine_service_pb2
from switchboard.memory.v1 import projects_service_pb2
from switchboard.threads.v1 import threads_service_pb2

RUN_HEADER = "X-Switchboard-Run"
# The project whose durable notes, context and live state a chat run reads.
PROJECT_HEADER = "X-Switchboard-Project"
AGENT_PREFIX = "agent:"
AUTO = "auto"

router = APIRouter(
    prefix="/v1", route_class=OpenAIRoute, tags=["openai"], responses=responses.OPENAI_ERROR_RESPONSES
)


async def check_model(request: Request, user: str, model: str) -> None:
    if model == AUTO or any(m.id == model for m in await configured_models(request, user)):
        return
    raise OpenAIError(400, "model_not_found", f"model {model!r} is not configured (GET /v1/models)", "model")


async def _check_project(request: Request, user: str, project_id: str) -> None:
    """A project the user is not a member of is 404 before a conversation is
    created or seeded (the engine would refuse the run after that)."""
    if is_personal_name(project_id):
        return
    try:
        await rpc(
            request,
            deps.projects(request).CheckProjectAccess,
            projects_service_pb2.CheckProjectAccessRequest(project_id=project_id),
            user,
        )
    except grpc.aio.AioRpcError as error:
        raise refusal(error, PROJECT_HEADER, {}) from error


def run_start(
    request: Request,
    user: str,
    model: str,
    exchange: Exchange,
    conversation_id: str = "",
    project_id: str = "",
) -> Callable[[], Any]:
    """What opens the run of one exchange (see open_run): an ask of the agent
    an `agent:<id>` model names, else a chat run in ``conversation_id``."""
    settings = deps.settings(request)
    if model.startswith(AGENT_PREFIX):
        ask = engine_service_pb2.AskAgentRequest(
            request_id=str(uuid.uuid4()),
            requester="user",
            target_agent_id=model.removeprefix(AGENT_PREFIX),
            message=exchange.message,
            client_instructions=exchange.instructions,
        )
        return functools.partial(
            deps.engine(request).AskAgent,
            ask,
            timeout=settings.run_stream_timeout,
            metadata=deps.identity(request, user),
        )
    chat = engine_service_pb2.StartRunRequest(
        request_id=str(uuid.uuid4()),
        conversation_id=conversation_id,
        message=exchange.message,
        requested_model=model,
        surface=engine_pb2.SURFACE_CHAT,
        client_instructions=exchange.instructions,
        project_id=project_id,
    )
    return functools.partial(
        deps.engine(request).StartRun,
        chat,
        timeout=settings.run_stream_timeout,
        metadata=deps.identity(request, user),
    )


@router.get("/models")
async def list_models(request: Request, user: User) -> responses.OpenAIModelList:
    """`auto`, every configured model, then `agent:<id>` for each agent."""

    def model(model_id: str, owner: str = "switchboard") -> responses.OpenAIModel:
        return responses.OpenAIModel(id=model_id, object="model", created=0, owned_by=owner)

    data = [model(AUTO)]
    data += [model(m.id, m.provider or "switchboard") for m in await configured_models(request, user)]
    token = ""
    while True:
        response: threads_service_pb2.ListAgentsResponse = await rpc(
            request,
            deps.threads(request).ListAgents,
            threads_service_pb2.ListAgentsRequest(page_size=500, page_token=token),
            user,
        )
        data += [model(f"{AGENT_PREFIX}{a.id}") for a in response.agents]
        token = response.next_page_token
        if not token:
            return responses.OpenAIModelList(object="list", data=data)


@router.post(
    "/chat/completions",
    response_model=None,
    responses={
        200: {
            "model": responses.ChatCompletion,
            "description": "chat.completion JSON; with stream true, chat.completion.chunk events as "
            "Server-Sent Events (data: one ChatCompletionChunk), ending data: [DONE]",
            "content": {"text/event-stream": {"schema": {"type": "string", "format": "event-stream"}}},
        }
    },
)
async def chat_completions(
    body: ChatCompletionBody,
    request: Request,
    user: User,
    conversation_id: Annotated[
        str, Header(alias=CONVERSATION_HEADER, max_length=params.ID_MAX, pattern=f"^$|{params.ID_PATTERN}")
    ] = "",
    project_id: Annotated[
        str,
        Header(alias=PROJECT_HEADER, max_length=MAX_PROJECT_ID_CHARS, pattern=f"^$|{PROJECT_ID_PATTERN}"),
    ] = "",
) -> Response:
    """A run on the last user message, streamed as `chat.completion.chunk`
    events (`stream: true`) or answered as one `chat.completion`. The run
    reads the memory of the project `X-Switchboard-Project` names (none: the
    user's personal project); an `agent:<id>` model works in its agent's own
    project, whatever the header says."""
    exchange = read_exchange(body)
    try:
        check_message(request, exchange.message)
    except ApiError as error:
        raise refusal(error, "messages", {}) from error
    settings = deps.settings(request)
    if len(exchange.instructions) > settings.max_message_chars:
        raise OpenAIError(
            413,
            "payload_too_large",
            f"system messages exceed {settings.max_message_chars} characters",
            "messages",
        )
    if body.model.startswith(AGENT_PREFIX):
        if conversation_id:
            raise OpenAIError(
                400,
                "invalid_request",
                f"an agent model answers on the agent's shared thread: drop {CONVERSATION_HEADER}",
                CONVERSATION_HEADER,
            )
        headers: dict[str, str] = {}
        # Either call opens a stream of run events (see open_run).
        # Either call opens a stream of run events (see open_run).
        start: Callable[[], Any] = run_start(request, user, body.model, exchange)
    else:
        await check_model(request, user, body.model)
        await _check_project(request, user, project_id)
        headers = await conversation_for(request, user, conversation_id, exchange)
        start = run_start(request, user, body.model, exchange, headers[CONVERSATION_HEADER], project_id)
    try:
        stream, first = await open_run(start)
    except grpc.aio.AioRpcError as error:
        raise refusal(error, None, headers) from error
    if first is None:
        raise OpenAIError(502, "stream_ended", "the run's stream ended before it started", headers=headers)
    headers[RUN_HEADER] = first.event.run_id
    relay = Relay(request, user, stream, first)
    completion = Completion(first.event.run_id, body.model)
    if body.stream:
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        return sse_response(stream_chunks(relay, completion, include_usage), request, headers)
    return await whole_completion(relay, completion, headers)


@router.api_route("/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"], include_in_schema=False)
async def unknown(path: str) -> Response:
    """The rest of OpenAI's API (embeddings, files...) is not served."""
    served = "only /v1/models, /v1/chat/completions, /v1/responses and /v1/conversations are"
    raise OpenAIError(404, "unknown_url", f"/v1/{path} is not served: {served}")
