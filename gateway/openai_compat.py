"""OpenAI's chat-completions API over Switchboard's runs: `GET /v1/models`
and `POST /v1/chat/completions`, so chat clients, editor plugins and agent
CLIs that speak only that API get routing, memory, instruction pages,
sources and run records unchanged.

One request is one run, posted with the client's last message only:

* its conversation is named by the ``X-Switchboard-Conversation`` header,
  or created (its id comes back in that header); the run's id comes back in
  ``X-Switchboard-Run``;
* the project whose memory the run reads is named by the
  ``X-Switchboard-Project`` header (none: the user's personal project);
* the client's earlier messages must be the latest turns of that
  conversation (:func:`history_matches`); the model gets the earlier turns
  from the conversation's stored history, never twice. A new conversation
  is first seeded with the earlier messages the client sent;
* system (and developer) messages become the run's client-instructions
  layer, after the user's instruction page;
* ``agent:<id>`` models ask that agent on its shared thread, as
  ``POST /api/agent/agents/{id}/asks`` does;
* ``usage`` holds the run's tokens (its final event: the run record's);
* errors have OpenAI's shape, ``{"error": {"message", "type", "param",
  "code"}}``, with the HTTP API's status codes, and ``x-should-retry:
  false`` (the official SDKs would otherwise repeat a POST that may already
  have posted a message) except on 503 before anything was written.

The stream is a view of the HTTP API's own (``gateway.streams``): the same
relay, resumed on another engine replica the same way."""

from __future__ import annotations

import functools
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import grpc
from fastapi import APIRouter, Header, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from gateway import deps, params, responses
from gateway.api import check_message
from gateway.catalog import configured_models
from gateway.deps import User, rpc
from gateway.errors import HTTP_STATUS, ApiError, from_rpc_error
from gateway.schemas import PROJECT_ID_PATTERN
from gateway.streams import Relay, open_run, sse_response
from services.shared.identity import user_metadata
from services.shared.projects import MAX_PROJECT_ID_CHARS, is_personal_name
from switchboard.engine.v1 import engine_pb2, engine_service_pb2
from switchboard.memory.v1 import projects_service_pb2
from switchboard.threads.v1 import threads_pb2, threads_service_pb2

log = logging.getLogger(__name__)

CONVERSATION_HEADER = "X-Switchboard-Conversation"
RUN_HEADER = "X-Switchboard-Run"
# The project whose durable notes, context and live state a chat run reads.
PROJECT_HEADER = "X-Switchboard-Project"
AGENT_PREFIX = "agent:"
AUTO = "auto"
# Messages of one request; a longer history is the conversation's to keep.
MAX_MESSAGES = 1000
# Entries per AppendEntries call (the threads service's own limit).
SEED_BATCH = 100

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
}
# The quotas' refusals, which OpenAI's clients know as rate_limit_exceeded
# (memory's storage quota is not among them: it is not a run's).
RATE_LIMIT_REASONS = frozenset({"ERROR_REASON_RATE_LIMITED", "ERROR_REASON_TOO_MANY_RUNS"})
# A run that fails after it started: its error event's code -> HTTP status.
RUN_ERROR_STATUS = {"BUDGET_EXCEEDED": 429, "CANCELLED": 499, "INTERRUPTED": 503}


def openai_error(status: int, message: str, code: str = "", param: str | None = None) -> dict[str, Any]:
    kind = ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code or None}}


class OpenAIError(Exception):
    """A refusal in OpenAI's shape. ``headers`` name what was already
    created (the conversation, the run), so a client can look at it."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.param = status, code, message, param
        self.headers = headers or {}


# Where pydantic's location names the member of a union a value failed
# (``content.str``), the field is named without it.
_UNION_TAGS = frozenset({"str", "int", "bool", "float", "list", "dict", "none"})


def _param(location: Sequence[int | str]) -> str:
    """A pydantic location as OpenAI names a field: ``messages[0].content``."""
    name = ""
    for part in location:
        if part == "body":
            continue
        if isinstance(part, str) and (part in _UNION_TAGS or "[" in part):
            break
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name


def _translate(exc: Exception) -> OpenAIError | None:
    if isinstance(exc, OpenAIError):
        return exc
    if isinstance(exc, grpc.aio.AioRpcError):
        exc = from_rpc_error(exc)
    if isinstance(exc, ApiError):
        if exc.reason in RATE_LIMIT_REASONS:
            return OpenAIError(429, "rate_limit_exceeded", exc.message, headers=exc.headers())
        return OpenAIError(exc.status, exc.code.lower(), exc.message, headers=exc.headers())
    if isinstance(exc, RequestValidationError):
        problems = exc.errors()
        first = problems[0] if problems else {}
        if first.get("type") == "json_invalid":  # its location is a character offset
            return OpenAIError(400, "invalid_json", f"the body is not JSON: {first.get('msg', '')}")
        param = _param(first.get("loc", ()))
        message = f"{param or 'body'}: {first.get('msg', 'invalid request')}"
        return OpenAIError(400, "invalid_request", message, param or None)
    if isinstance(exc, StarletteHTTPException):
        return OpenAIError(exc.status_code, "http_error", str(exc.detail))
    return None


def _refusal(exc: ApiError | grpc.aio.AioRpcError, param: str | None, headers: dict[str, str]) -> OpenAIError:
    """A service's refusal, naming the field and what was already created."""
    error = _translate(exc)
    assert error is not None
    error.param, error.headers = param, {**error.headers, **headers}
    return error


def error_response(error: OpenAIError) -> JSONResponse:
    headers = dict(error.headers)
    created = {name for name in headers if name != "Retry-After"}
    waits = error.status == 429 and "Retry-After" in headers
    if (error.status != 503 and not waits) or created:
        # The SDKs retry 409, 429 and 5xx: only a 503, or a rate limit's 429
        # with its Retry-After, before anything was written is safe (and
        # worth) repeating.
        headers["x-should-retry"] = "false"
    body = openai_error(error.status, error.message, error.code, error.param)
    return JSONResponse(body, status_code=error.status, headers=headers)


class OpenAIRoute(APIRoute):
    """Every failure of these routes in OpenAI's shape: body validation,
    authentication and the services' errors included."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as exc:
                error = _translate(exc)
                if error is None:
                    log.exception("unexpected error on %s %s", request.method, request.url.path)
                    error = OpenAIError(500, "internal", "internal error")
                elif error.status >= 500:
                    log.warning("%s %s: %s %s", request.method, request.url.path, error.code, error.message)
                return error_response(error)

        return route


router = APIRouter(
    prefix="/v1", route_class=OpenAIRoute, tags=["openai"], responses=responses.OPENAI_ERROR_RESPONSES
)


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: str = Field(max_length=50)
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    tool_calls: list[Any] | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatCompletionBody(BaseModel):
    """OpenAI's request. Sampling and length settings (temperature, top_p,
    max_tokens, stop, seed, user...) are accepted and not used: a model's
    settings are its provider's configuration (docs/clients.md)."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=200)
    messages: list[ChatMessage] = Field(min_length=1, max_length=MAX_MESSAGES)
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int | None = Field(default=None, ge=1, le=1)
    tools: list[Any] | None = None
    functions: list[Any] | None = None


@dataclass(frozen=True)
class Exchange:
    """A request read: the client's instructions, its earlier turns
    (role, text), and the message the run is posted with."""

    instructions: str
    earlier: list[tuple[str, str]]
    message: str


def _text(message: ChatMessage, index: int) -> str:
    if isinstance(message.content, str):
        return message.content
    if message.content is None:
        if message.tool_calls:
            raise OpenAIError(
                400,
                "unsupported_tool_calls",
                "client tools are not supported: Switchboard's runs call their own tools",
                f"messages[{index}].tool_calls",
            )
        raise OpenAIError(400, "invalid_request", "a message needs content", f"messages[{index}].content")
    texts = []
    for number, part in enumerate(message.content):
        if part.type != "text" or part.text is None:
            raise OpenAIError(
                400,
                "unsupported_content",
                f"only text content is supported, not {part.type!r}",
                f"messages[{index}].content[{number}]",
            )
        texts.append(part.text)
    return "\n".join(texts)


def read_exchange(body: ChatCompletionBody) -> Exchange:
    if body.tools or body.functions:
        raise OpenAIError(
            400,
            "unsupported_tools",
            "client tools are not supported: Switchboard's runs call their own tools",
            "tools" if body.tools else "functions",
        )
    instructions: list[str] = []
    turns: list[tuple[str, str]] = []
    for index, message in enumerate(body.messages):
        if message.role in ("tool", "function"):
            raise OpenAIError(
                400,
                "unsupported_tool_calls",
                f"{message.role} messages are not supported: Switchboard's runs call their own tools",
                f"messages[{index}].role",
            )
        text = _text(message, index)
        if message.role in ("system", "developer"):
            if text.strip():
                instructions.append(text.strip())
        else:
            turns.append((message.role, text))
    if not turns or body.messages[-1].role != "user":
        raise OpenAIError(
            400,
            "invalid_request",
            "the last message must be the user's: it is the one the run answers",
            f"messages[{len(body.messages) - 1}].role",
        )
    return Exchange("\n\n".join(instructions), turns[:-1], turns[-1][1])


# History


def _same(text: str) -> str:
    return " ".join(text.split())


def answered(turns: Sequence[tuple[str, frozenset[str]]]) -> list[tuple[str, frozenset[str]]]:
    """Without the user messages that got no answer (the next message is not
    the assistant's): a failed or cancelled run's, kept by one side only."""
    return [
        (role, texts)
        for number, (role, texts) in enumerate(turns)
        if role != "user" or (number + 1 < len(turns) and turns[number + 1][0] == "assistant")
    ]


def stored_turns(entries: Sequence[threads_pb2.Entry]) -> list[tuple[str, frozenset[str]]]:
    """A conversation's entries (oldest first) as the texts a client may
    hold of each turn: the user's message, then the answer, which is all of
    the run's assistant text or its last message (tool calls and results
    are the run's own)."""
    turns: list[tuple[str, frozenset[str]]] = []
    answer: list[str] = []

    def close() -> None:
        if answer:
            turns.append(("assistant", frozenset({_same("".join(answer)), _same(answer[-1])})))
            answer.clear()

    for entry in entries:
        if entry.role == threads_pb2.ROLE_USER:
            close()
            turns.append(("user", frozenset({_same(entry.content)})))
        elif entry.role == threads_pb2.ROLE_ASSISTANT and entry.content:
            answer.append(entry.content)
    close()
    return answered(turns)


def history_matches(client: Sequence[tuple[str, str]], stored: Sequence[tuple[str, frozenset[str]]]) -> bool:
    """Whether the client's earlier messages are the latest turns of the
    stored conversation, in order, with the same text (whitespace aside).
    Unanswered user messages are left out on both sides, so a client may
    keep or drop a turn whose run failed. Sending only the new message
    always matches."""
    mine = answered([(role, frozenset({_same(text)})) for role, text in client])
    if len(mine) > len(stored):
        return False
    tail = stored[len(stored) - len(mine) :]
    pairs = zip(mine, tail, strict=True)
    return all(role == s_role and texts <= s_texts for (role, texts), (s_role, s_texts) in pairs)


async def _stored_tail(
    request: Request, user: str, conversation_id: str, wanted: int
) -> list[tuple[str, frozenset[str]]]:
    """The conversation's latest turns, read newest first until more than
    ``wanted`` are complete (the oldest page may begin inside a turn)."""
    entries: list[threads_pb2.Entry] = []
    token = ""
    while True:
        response: threads_service_pb2.ListEntriesResponse = await rpc(
            request,
            deps.threads(request).ListEntries,
            threads_service_pb2.ListEntriesRequest(
                for_conversation=threads_service_pb2.ListEntriesRequest.ForConversation(
                    conversation_id=conversation_id
                ),
                descending=True,
                page_size=SEED_BATCH,
                page_token=token,
            ),
            user,
        )
        entries += response.entries
        token = response.next_page_token
        turns = stored_turns(entries[::-1])
        if not token:
            return turns
        if len(turns) > wanted + 1:
            return turns[1:]


async def _seed(request: Request, user: str, conversation_id: str, turns: Sequence[tuple[str, str]]) -> None:
    """A new conversation gets the turns the client already had, so its
    first run sees them as history."""
    roles = {"user": threads_pb2.ROLE_USER, "assistant": threads_pb2.ROLE_ASSISTANT}
    for start in range(0, len(turns), SEED_BATCH):
        await rpc(
            request,
            deps.threads(request).AppendEntries,
            threads_service_pb2.AppendEntriesRequest(
                request_id=f"{conversation_id}:client-history:{start}",
                thread_id=conversation_id,
                entries=[
                    threads_pb2.Entry(
                        role=roles[role], content=text, source="client", requester=user, target="personal"
                    )
                    for role, text in turns[start : start + SEED_BATCH]
                ],
            ),
            user,
        )


async def _conversation(
    request: Request, user: str, conversation_id: str, exchange: Exchange
) -> dict[str, str]:
    """The conversation the run goes to, as response headers: the one named
    (its history checked against the client's) or a new one."""
    if conversation_id:
        # Unknown, or another user's: 404.
        await rpc(
            request,
            deps.threads(request).GetConversation,
            threads_service_pb2.GetConversationRequest(conversation_id=conversation_id),
            user,
        )
        headers = {CONVERSATION_HEADER: conversation_id}
        if exchange.earlier:
            stored = await _stored_tail(request, user, conversation_id, len(exchange.earlier))
            if not history_matches(exchange.earlier, stored):
                raise OpenAIError(
                    409,
                    "conversation_history_mismatch",
                    "the earlier messages differ from the conversation's stored history: send its "
                    "turns as they were, only the new message, or no "
                    f"{CONVERSATION_HEADER} header to start a new conversation",
                    "messages",
                    headers,
                )
        return headers
    response: threads_service_pb2.CreateConversationResponse = await rpc(
        request,
        deps.threads(request).CreateConversation,
        threads_service_pb2.CreateConversationRequest(),
        user,
        idempotent=False,
    )
    headers = {CONVERSATION_HEADER: response.conversation.id}
    if exchange.earlier:
        try:
            await _seed(request, user, response.conversation.id, exchange.earlier)
        except grpc.aio.AioRpcError as error:
            raise _refusal(error, "messages", headers) from error
    return headers


async def _check_model(request: Request, user: str, model: str) -> None:
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
        raise _refusal(error, PROJECT_HEADER, {}) from error


# Responses


class Completion:
    """A run's events, as the HTTP API's SSE clients get them, turned into
    OpenAI's chunks or one completion."""

    def __init__(self, run_id: str, model: str) -> None:
        self.id = f"chatcmpl-{run_id}"
        self.model = model
        self.created = int(time.time())

    def _base(self, kind: str) -> dict[str, Any]:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}

    def chunk(self, delta: dict[str, str], finish: str | None = None) -> dict[str, str]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return {"data": json.dumps({**self._base("chat.completion.chunk"), "choices": [choice]})}

    def usage_chunk(self, usage: dict[str, int]) -> dict[str, str]:
        return {"data": json.dumps({**self._base("chat.completion.chunk"), "choices": [], "usage": usage})}

    def whole(self, text: str, usage: dict[str, int]) -> dict[str, Any]:
        message = {"role": "assistant", "content": text, "refusal": None}
        choice = {"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}
        return {**self._base("chat.completion"), "choices": [choice], "usage": usage}


def _usage(final: dict[str, Any]) -> dict[str, int]:
    tokens = final.get("usage") or {}
    prompt, completion = int(tokens.get("tokens_in", 0)), int(tokens.get("tokens_out", 0))
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _run_error(data: dict[str, Any]) -> OpenAIError:
    code = str(data.get("code", "")) or "INTERNAL"
    known = grpc.StatusCode.__members__.get(code)
    # A gRPC status keeps the HTTP API's mapping; anything else (a provider's
    # error) is the upstream model's failure.
    status = RUN_ERROR_STATUS.get(code) or (HTTP_STATUS.get(known, 500) if known is not None else 502)
    name = code.removeprefix("ERROR_REASON_").lower()
    return OpenAIError(status, name, str(data.get("message", "")) or "the run failed")


async def _events(relay: Relay) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    async for item in relay.events():
        yield item.get("event", ""), json.loads(item["data"])


async def _stream(relay: Relay, completion: Completion, include_usage: bool) -> AsyncIterator[dict[str, str]]:
    yield completion.chunk({"role": "assistant", "content": ""})
    streamed = False
    async for kind, data in _events(relay):
        if kind == "delta":
            streamed = True
            yield completion.chunk({"content": data.get("text", "")})
        elif kind == "reasoning":
            # DeepSeek's field for a model's visible reasoning, which several clients show.
            yield completion.chunk({"reasoning_content": data.get("text", "")})
        elif kind == "final":
            if data.get("text") and not streamed:
                yield completion.chunk({"content": data["text"]})
            yield completion.chunk({}, "stop")
            if include_usage:
                yield completion.usage_chunk(_usage(data))
        elif kind == "error":
            error = _run_error(data)
            yield {"data": json.dumps(openai_error(error.status, error.message, error.code))}
    yield {"data": "[DONE]"}


async def _whole(relay: Relay, completion: Completion, headers: dict[str, str]) -> JSONResponse:
    parts: list[str] = []
    async for kind, data in _events(relay):
        if kind == "delta":
            parts.append(data.get("text", ""))
        elif kind == "final":
            text = "".join(parts) or str(data.get("text", ""))
            return JSONResponse(completion.whole(text, _usage(data)), headers=headers)
        elif kind == "error":
            error = _run_error(data)
            error.headers = headers
            raise error
    raise OpenAIError(502, "stream_ended", "the run's stream ended without an outcome", headers=headers)


# Routes


@router.get("/models", response_model=responses.OpenAIModelList)
async def list_models(request: Request, user: User) -> dict[str, Any]:
    """`auto`, every configured model, then `agent:<id>` for each agent."""
    data = [{"id": AUTO, "object": "model", "created": 0, "owned_by": "switchboard"}]
    data += [
        {"id": m.id, "object": "model", "created": 0, "owned_by": m.provider or "switchboard"}
        for m in await configured_models(request, user)
    ]
    token = ""
    while True:
        response: threads_service_pb2.ListAgentsResponse = await rpc(
            request,
            deps.threads(request).ListAgents,
            threads_service_pb2.ListAgentsRequest(page_size=500, page_token=token),
            user,
        )
        data += [
            {"id": f"{AGENT_PREFIX}{a.id}", "object": "model", "created": 0, "owned_by": "switchboard"}
            for a in response.agents
        ]
        token = response.next_page_token
        if not token:
            return {"object": "list", "data": data}


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
        raise _refusal(error, "messages", {}) from error
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
        start = functools.partial(
            deps.engine(request).AskAgent,
            engine_service_pb2.AskAgentRequest(
                request_id=str(uuid.uuid4()),
                requester="user",
                target_agent_id=body.model.removeprefix(AGENT_PREFIX),
                message=exchange.message,
                client_instructions=exchange.instructions,
            ),
            timeout=settings.run_stream_timeout,
            metadata=user_metadata(user),
        )
    else:
        await _check_model(request, user, body.model)
        await _check_project(request, user, project_id)
        headers = await _conversation(request, user, conversation_id, exchange)
        start = functools.partial(
            deps.engine(request).StartRun,
            engine_service_pb2.StartRunRequest(
                request_id=str(uuid.uuid4()),
                conversation_id=headers[CONVERSATION_HEADER],
                message=exchange.message,
                requested_model=body.model,
                surface=engine_pb2.SURFACE_CHAT,
                client_instructions=exchange.instructions,
                project_id=project_id,
            ),
            timeout=settings.run_stream_timeout,
            metadata=user_metadata(user),
        )
    try:
        stream, first = await open_run(start)
    except grpc.aio.AioRpcError as error:
        raise _refusal(error, None, headers) from error
    if first is None:
        raise OpenAIError(502, "stream_ended", "the run's stream ended before it started", headers=headers)
    headers[RUN_HEADER] = first.run_id
    relay = Relay(request, user, stream, first)
    completion = Completion(first.run_id, body.model)
    if body.stream:
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        return sse_response(_stream(relay, completion, include_usage), request, headers)
    return await _whole(relay, completion, headers)


@router.api_route("/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"], include_in_schema=False)
async def unknown(path: str) -> Response:
    """The rest of OpenAI's API (embeddings, files...) is not served."""
    served = "only /v1/models and /v1/chat/completions are"
    raise OpenAIError(404, "unknown_url", f"/v1/{path} is not served: {served}")
