"""The HTTP API under /api/agent: conversations, messages (a run, streamed as
SSE), runs and their event streams."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any

import grpc
from fastapi import APIRouter, Depends, Header, Query, Request, Response
from prometheus_client import Gauge
from sse_starlette import EventSourceResponse

from gateway.auth import current_user
from gateway.errors import ApiError
from gateway.events import message_dict, run_json, to_sse
from gateway.schemas import CreateConversationBody, MessageBody, UpdateConversationBody
from services.shared.clients import call
from services.shared.identity import user_metadata
from switchboard.engine.v1 import engine_pb2, engine_service_pb2, engine_service_pb2_grpc
from switchboard.threads.v1 import threads_pb2, threads_service_pb2, threads_service_pb2_grpc

router = APIRouter(prefix="/api/agent")
User = Annotated[str, Depends(current_user)]


def _threads(request: Request) -> threads_service_pb2_grpc.ThreadsServiceStub:
    return request.app.state.threads  # type: ignore[no-any-return]


def _engine(request: Request) -> engine_service_pb2_grpc.EngineServiceStub:
    return request.app.state.engine  # type: ignore[no-any-return]


def _timeout(request: Request) -> float:
    return float(request.app.state.settings.call_timeout)


@router.post("/conversations", status_code=201)
async def create_conversation(body: CreateConversationBody, request: Request, user: User) -> dict[str, Any]:
    rpc = threads_service_pb2.CreateConversationRequest(request_id=body.request_id, title=body.title)
    if body.allowed_sources is not None:
        rpc.allowed_sources.CopyFrom(threads_pb2.AllowedSources(**body.allowed_sources.model_dump()))
    # Retried only with an idempotency key (a retry must not create twice).
    response = await call(
        _threads(request).CreateConversation,
        rpc,
        timeout=_timeout(request),
        metadata=user_metadata(user),
        idempotent=bool(body.request_id),
    )
    return message_dict(response.conversation)


@router.get("/conversations")
async def list_conversations(
    request: Request,
    user: User,
    page_size: int = 50,
    page_token: str = "",
    q: Annotated[str, Query(max_length=200, description="only titles containing this text")] = "",
    include_archived: bool = False,
) -> dict[str, Any]:
    """Pinned first, then the most recently active."""
    response = await call(
        _threads(request).ListConversations,
        threads_service_pb2.ListConversationsRequest(
            page_size=page_size, page_token=page_token, title_query=q, include_archived=include_archived
        ),
        timeout=_timeout(request),
        metadata=user_metadata(user),
    )
    return {
        "conversations": [message_dict(c) for c in response.conversations],
        "next_page_token": response.next_page_token,
    }


@router.get("/conversations/{conversation_id}")
async def get_conversation(conversation_id: str, request: Request, user: User) -> dict[str, Any]:
    response = await call(
        _threads(request).GetConversation,
        threads_service_pb2.GetConversationRequest(conversation_id=conversation_id),
        timeout=_timeout(request),
        metadata=user_metadata(user),
    )
    return message_dict(response.conversation)


@router.patch("/conversations/{conversation_id}")
async def update_conversation(
    conversation_id: str, body: UpdateConversationBody, request: Request, user: User
) -> dict[str, Any]:
    """Rename and/or pin (seed 002 P2-T15)."""
    fields = body.model_dump(exclude_none=True)
    if not fields:
        raise ApiError(400, "INVALID_ARGUMENT", "nothing to update: give title and/or pinned")
    rpc = threads_service_pb2.UpdateConversationRequest(
        conversation=threads_pb2.Conversation(id=conversation_id, **fields)
    )
    rpc.update_mask.paths.extend(sorted(fields))
    response = await call(
        _threads(request).UpdateConversation, rpc, timeout=_timeout(request), metadata=user_metadata(user)
    )
    return message_dict(response.conversation)


@router.post("/conversations/{conversation_id}/archive")
async def archive_conversation(conversation_id: str, request: Request, user: User) -> dict[str, Any]:
    """Archived conversations leave the default list and stay readable."""
    response = await call(
        _threads(request).ArchiveConversation,
        threads_service_pb2.ArchiveConversationRequest(conversation_id=conversation_id),
        timeout=_timeout(request),
        metadata=user_metadata(user),
    )
    return message_dict(response.conversation)


@router.get("/conversations/{conversation_id}/entries")
async def list_entries(
    conversation_id: str, request: Request, user: User, page_size: int = 100, page_token: str = ""
) -> dict[str, Any]:
    """The conversation's messages in order (user and assistant turns)."""
    response = await call(
        _threads(request).ListEntries,
        threads_service_pb2.ListEntriesRequest(
            thread_id=conversation_id, page_size=page_size, page_token=page_token
        ),
        timeout=_timeout(request),
        metadata=user_metadata(user),
    )
    entries = []
    for entry in response.entries:
        data = message_dict(entry)
        data["role"] = threads_pb2.Role.Name(entry.role).removeprefix("ROLE_").lower()
        data["sequence"] = entry.sequence
        entries.append(data)
    return {
        "entries": entries,
        "next_page_token": response.next_page_token,
        "previous_page_token": response.previous_page_token,
    }


# A stream broken by one of these is reopened with WatchRun after the last
# event sent: the engine replica holding it went away (crash, rollout), and
# another replica serves the rest of the run from the database, including the
# "interrupted" settlement once the dead replica's lease expires.
SSE_CLIENTS = Gauge("switchboard_sse_clients", "Run event streams open to clients.")

_RESUMABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL})


def _is_terminal(event: engine_pb2.RunEvent) -> bool:
    return event.WhichOneof("kind") in ("final", "error")


async def _stream_events(stream: Any, request: Request, user: str) -> EventSourceResponse | Response:
    """Waits for the first event so a refused run is an HTTP error (400, 404,
    413...) rather than a 200 stream; then relays the rest as SSE, resuming
    on another engine replica if the stream breaks. A stream with nothing
    left to send (a finished run) is 204."""
    try:
        first = await stream.read()
    except grpc.aio.AioRpcError:
        stream.cancel()
        raise
    if first is grpc.aio.EOF:
        return Response(status_code=204)
    settings = request.app.state.settings
    engine = _engine(request)
    run_id = first.event.run_id

    async def relay() -> AsyncIterator[dict[str, str]]:
        current, last = stream, first.event
        resume_deadline: float | None = None
        SSE_CLIENTS.inc()
        try:
            yield to_sse(first.event)
            # Read to EOF, even after the terminal event: the engine's stream
            # then ends on its own rather than being cancelled mid-yield.
            while True:
                try:
                    # read(), not iteration: grpc.aio forbids mixing the two on one call.
                    response = await current.read()
                except grpc.aio.AioRpcError as error:
                    if _is_terminal(last):
                        return  # the client has the whole run
                    now = asyncio.get_running_loop().time()
                    resume_deadline = resume_deadline or now + settings.stream_resume_seconds
                    if error.code() not in _RESUMABLE or now >= resume_deadline:
                        yield _interrupted(run_id, error)
                        return
                    current.cancel()
                    await asyncio.sleep(min(1.0, settings.stream_resume_seconds / 10))
                    current = engine.WatchRun(
                        engine_service_pb2.WatchRunRequest(run_id=run_id, after_sequence=last.sequence),
                        timeout=settings.run_stream_timeout,
                        metadata=user_metadata(user),
                    )
                    continue
                if response is grpc.aio.EOF:
                    return
                resume_deadline = None
                last = response.event
                yield to_sse(last)
        finally:
            SSE_CLIENTS.dec()
            current.cancel()  # the run itself goes on in the engine (policy: continue)

    return EventSourceResponse(relay(), ping=settings.sse_ping_seconds, headers={"Cache-Control": "no-store"})


def _interrupted(run_id: str, error: grpc.aio.AioRpcError) -> dict[str, str]:
    """The stream broke for good: tell the client in-band. Not a persisted
    event, so never a resume point (no id); GET /runs/{id} has the outcome."""
    failed = engine_pb2.RunEvent(
        run_id=run_id, error=engine_pb2.RunError(code=error.code().name, message="stream interrupted")
    )
    event = to_sse(failed)
    event.pop("id")
    return event


@router.post(
    "/conversations/{conversation_id}/messages",
    responses={200: {"content": {"text/event-stream": {}}, "description": "The run's events, as SSE"}},
    response_model=None,
)
async def post_message(
    conversation_id: str, body: MessageBody, request: Request, user: User
) -> EventSourceResponse | Response:
    limit = request.app.state.settings.max_message_chars
    if len(body.message) > limit:
        raise ApiError(
            413, "PAYLOAD_TOO_LARGE", f"message exceeds {limit} characters", "ERROR_REASON_TOO_LARGE"
        )
    if not body.message.strip():
        raise ApiError(400, "INVALID_ARGUMENT", "message must not be blank")
    stream = _engine(request).StartRun(
        engine_service_pb2.StartRunRequest(
            request_id=body.request_id or str(uuid.uuid4()),
            conversation_id=conversation_id,
            message=body.message,
            requested_model=body.model,
            surface=engine_pb2.SURFACE_CHAT,
            forced_skills=body.forced_skills,
        ),
        timeout=request.app.state.settings.run_stream_timeout,
        metadata=user_metadata(user),
    )
    return await _stream_events(stream, request, user)


@router.get("/runs/{run_id}")
async def get_run(run_id: str, request: Request, user: User) -> dict[str, Any]:
    response = await call(
        _engine(request).GetRun,
        engine_service_pb2.GetRunRequest(run_id=run_id),
        timeout=_timeout(request),
        metadata=user_metadata(user),
    )
    return run_json(response.run)


@router.get(
    "/runs/{run_id}/events",
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "Events after Last-Event-ID, as SSE"},
        204: {"description": "The run has ended and the client has every event"},
    },
    response_model=None,
)
async def run_events(
    run_id: str,
    request: Request,
    user: User,
    last_event_id: Annotated[str, Header()] = "",
) -> EventSourceResponse | Response:
    after = int(last_event_id) if last_event_id.isdigit() else 0
    stream = _engine(request).WatchRun(
        engine_service_pb2.WatchRunRequest(run_id=run_id, after_sequence=after),
        timeout=request.app.state.settings.run_stream_timeout,
        metadata=user_metadata(user),
    )
    return await _stream_events(stream, request, user)
