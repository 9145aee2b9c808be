"""Open Responses: `POST /v1/responses` (streamed or not, in the
background or not, continuing a `previous_response_id`), `GET
/v1/responses/{id}` (streamed from `starting_after`) and its cancel. A
response is a run: its id is `resp_<run id>`, its events are encoded from
the run's persisted events by gateway.openai_compat.responses_stream."""

from __future__ import annotations

import functools
import json
import uuid
from typing import Annotated, Any

import grpc
from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from gateway import deps, params, responses
from gateway.api import check_message
from gateway.deps import User, rpc
from gateway.errors import ApiError
from gateway.openai_compat.completion import run_error
from gateway.openai_compat.conversation import CONVERSATION_HEADER, append_turns, conversation_for
from gateway.openai_compat.conversations_api import CONVERSATION_ID, conversation_id, open_conversation
from gateway.openai_compat.errors import OpenAIError, OpenAIRoute, refusal
from gateway.openai_compat.exchange import MAX_MESSAGES, Exchange
from gateway.openai_compat.items import InputItem, item_text
from gateway.openai_compat.response_bodies import OpenResponse
from gateway.openai_compat.responses_stream import STATUSES, ResponseLog, run_id_of
from gateway.openai_compat.routes import AGENT_PREFIX, check_model, run_start
from gateway.streams import EventResponse, Relay, open_run, sse_response
from switchboard.engine.v1 import engine_pb2, engine_service_pb2

router = APIRouter(
    prefix="/v1", route_class=OpenAIRoute, tags=["openai"], responses=responses.OPENAI_ERROR_RESPONSES
)
RESPONSE_ID = r"^resp_[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"


class ConversationParam(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str = Field(pattern=CONVERSATION_ID)


class ResponsesBody(BaseModel):
    """Open Responses' request. Sampling settings and the rest are accepted
    and not used, as in chat completions (docs/protocols.md)."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=200)
    input: str | list[InputItem] = Field(min_length=1)
    instructions: str | None = None
    previous_response_id: str | None = Field(default=None, pattern=RESPONSE_ID)
    conversation: Annotated[str, Field(pattern=CONVERSATION_ID)] | ConversationParam | None = None
    stream: bool = False
    background: bool = False
    tools: list[Any] | None = None


def read_input(body: ResponsesBody) -> Exchange:
    """The request as the chat work reads it: instructions, earlier turns, the message."""
    if body.tools:
        refused = "client tools are not supported: Switchboard's runs call their own tools"
        raise OpenAIError(400, "unsupported_tools", refused, "tools")
    items = [InputItem(role="user", content=body.input)] if isinstance(body.input, str) else body.input
    if len(items) > MAX_MESSAGES:
        raise OpenAIError(400, "invalid_request", f"at most {MAX_MESSAGES} input items", "input")
    instructions = [body.instructions.strip()] if body.instructions and body.instructions.strip() else []
    turns: list[tuple[str, str]] = []
    for index, item in enumerate(items):
        text = item_text(item, f"input[{index}]")
        if item.role in ("system", "developer"):
            instructions += [text.strip()] if text.strip() else []
        else:
            turns.append((item.role, text))
    if not turns or items[-1].role != "user":
        raise OpenAIError(400, "invalid_request", "the last input item must be the user's", "input")
    return Exchange("\n\n".join(instructions), turns[:-1], turns[-1][1])


async def _previous_conversation(request: Request, user: str, previous: str) -> str:
    """The conversation of the response ``previous`` (another user's: 404)."""
    try:
        found: engine_service_pb2.GetRunResponse = await rpc(
            request,
            deps.engine(request).GetRun,
            engine_service_pb2.GetRunRequest(run_id=run_id_of(previous)),
            user,
        )
    except grpc.aio.AioRpcError as error:
        raise refusal(error, "previous_response_id", {}) from error
    if not found.run.conversation_id:
        raise OpenAIError(
            400, "invalid_request", f"{previous} is not a chat response", "previous_response_id"
        )
    return found.run.conversation_id


class ResponseEvents:
    """gateway.streams' encoder for Open Responses clients: `event:` the
    type, `data:` the event, `id:` its sequence number."""

    def __init__(self, log: ResponseLog) -> None:
        self.log = log

    def event(self, response: EventResponse) -> list[dict[str, str]]:
        return [_sse(item) for item in self.log.encode(response.event)]

    def interrupted(self, event: engine_pb2.RunEvent) -> list[dict[str, str]]:
        return [_sse(item) for item in self.log.encode(event)]


def _sse(item: dict[str, Any]) -> dict[str, str]:
    return {"event": item["type"], "data": json.dumps(item), "id": str(item["sequence_number"])}


async def _whole(relay: Relay, log: ResponseLog) -> dict[str, Any]:
    """The response once its run has ended (its events are read and dropped)."""
    async for _ in relay.events():
        pass
    if log.error is not None:
        raise run_error(log.error)
    return log.response()


@router.post(
    "/responses",
    response_model=None,
    responses={
        200: {
            "model": OpenResponse,
            "description": "a response object; with stream true, its events as Server-Sent Events "
            "(event: the type, data: the event, id: its sequence_number)",
            "content": {"text/event-stream": {"schema": {"type": "string", "format": "event-stream"}}},
        }
    },
)
async def create_response(body: ResponsesBody, request: Request, user: User) -> Response:
    """A run on the last user input item, as an Open Responses response."""
    exchange = read_input(body)
    try:
        check_message(request, exchange.message)
    except ApiError as error:
        raise refusal(error, "input", {}) from error
    headers: dict[str, str] = {}
    named = body.conversation.id if isinstance(body.conversation, ConversationParam) else body.conversation
    if named and body.previous_response_id:
        refused = "a response continues a conversation or a previous response, not both"
        raise OpenAIError(400, "invalid_request", refused, "conversation")
    if body.model.startswith(AGENT_PREFIX):
        if body.previous_response_id or named:
            field = "previous_response_id" if body.previous_response_id else "conversation"
            refused = f"an agent model answers on the agent's shared thread: drop {field}"
            raise OpenAIError(400, "invalid_request", refused, field)
        start = run_start(request, user, body.model, exchange)
    elif named:
        await check_model(request, user, body.model)
        conversation = (await open_conversation(request, user, named)).id
        headers = {CONVERSATION_HEADER: conversation}
        if exchange.earlier:
            # The input items are the conversation's next items: the run answers the last.
            try:
                await append_turns(request, user, conversation, exchange.earlier, str(uuid.uuid4()))
            except grpc.aio.AioRpcError as error:
                raise refusal(error, "input", headers) from error
        start = run_start(request, user, body.model, exchange, conversation)
    else:
        await check_model(request, user, body.model)
        conversation = ""
        if body.previous_response_id:
            conversation = await _previous_conversation(request, user, body.previous_response_id)
            exchange = Exchange(
                exchange.instructions, [], exchange.message
            )  # the conversation keeps the history
        headers = await conversation_for(request, user, conversation, exchange)
        start = run_start(request, user, body.model, exchange, headers[CONVERSATION_HEADER])
    try:
        stream, first = await open_run(start)
    except grpc.aio.AioRpcError as error:
        raise refusal(error, None, headers) from error
    if first is None:
        raise OpenAIError(502, "stream_ended", "the run's stream ended before it started", headers=headers)
    log = ResponseLog(
        body.model,
        previous_response_id=body.previous_response_id,
        instructions=body.instructions,
        background=body.background,
        conversation=conversation_id(headers[CONVERSATION_HEADER]) if named else None,
    )
    if body.background:
        # The run goes on without this request: its events stay in the log.
        log.encode(first.event)
        stream.cancel()
        return JSONResponse(log.response(), headers=headers)
    relay = Relay(request, user, stream, first, ResponseEvents(log))
    if body.stream:
        return sse_response(relay.events(), request, headers, sep="\n")
    return JSONResponse(await _whole(relay, log), headers=headers)


def _known(response_id: str) -> str:
    """The run id of a response id; one without the resp_ prefix names none."""
    if not response_id.startswith("resp_"):
        raise OpenAIError(404, "not_found", f"response {response_id!r} not found")
    return run_id_of(response_id)


async def _run(request: Request, user: str, response_id: str) -> engine_pb2.Run:
    found: engine_service_pb2.GetRunResponse = await rpc(
        request,
        deps.engine(request).GetRun,
        engine_service_pb2.GetRunRequest(run_id=_known(response_id)),
        user,
    )
    return found.run


def _watch(request: Request, user: str, run_id: str) -> Any:
    return deps.engine(request).WatchRun(
        engine_service_pb2.WatchRunRequest(run_id=run_id, after_sequence=0),
        timeout=deps.settings(request).run_stream_timeout,
        metadata=deps.identity(request, user),
    )


# Any id the API takes: one without the resp_ prefix names no response (404).
ResponseId = Annotated[str, Path(pattern=params.ID_PATTERN, max_length=params.ID_MAX + 5)]


@router.get(
    "/responses/{response_id}",
    response_model=None,
    responses={
        200: {
            "model": OpenResponse,
            "description": "the response; with stream true, its events after starting_after",
            "content": {"text/event-stream": {"schema": {"type": "string", "format": "event-stream"}}},
        }
    },
)
async def get_response(
    response_id: ResponseId,
    request: Request,
    user: User,
    stream: bool = False,
    starting_after: Annotated[int, Query(ge=-1, le=10**9)] = -1,
) -> Response:
    """The response as it stands (a running one: in progress, without its
    output), or its events from the start of its log after `starting_after`."""
    run = await _run(request, user, response_id)
    log = ResponseLog(run.requested_model or run.model, starting_after=starting_after if stream else -1)
    if stream or run.status != engine_pb2.RUN_STATUS_RUNNING:
        watched, first = await open_run(functools.partial(_watch, request, user, run.id))
        if first is None:
            return Response(status_code=204)
        relay = Relay(request, user, watched, first, ResponseEvents(log))
        if stream:
            return sse_response(relay.events(), request, sep="\n")
        async for _ in relay.events():
            pass
    log.id, log.status = f"resp_{run.id}", STATUSES.get(run.status, "in_progress")
    return JSONResponse(log.response())


@router.post("/responses/{response_id}/cancel", response_model=OpenResponse)
async def cancel_response(response_id: ResponseId, request: Request, user: User) -> dict[str, Any]:
    """Cancels the response's run (an ended one is returned as it is)."""
    cancelled: engine_service_pb2.CancelRunResponse = await rpc(
        request,
        deps.engine(request).CancelRun,
        engine_service_pb2.CancelRunRequest(run_id=_known(response_id)),
        user,
    )
    log = ResponseLog(cancelled.run.requested_model or cancelled.run.model)
    log.id, log.status = f"resp_{cancelled.run.id}", STATUSES.get(cancelled.run.status, "in_progress")
    return log.response()
