"""AG-UI: `POST /api/agent/ag-ui` takes the protocol's RunAgentInput and
answers with its events (Server-Sent Events, encoded by gateway.agui.encoder
from the run's persisted events).

- The thread is a conversation: the caller's conversation of that id, or
  one made for the thread id on first use (the same one every time after).
- The last message is the run's message (a user message with text); the
  context entries become the client's instructions; `forwardedProps` may
  name a `model` and a `project_id`.
- The run id is the idempotency key: posting the same RunAgentInput again
  follows the same run. With `Last-Event-ID` (the `switchboard_cursor` of
  the last event received: its SSE id, also in its metadata), the stream
  goes on after it: a dropped connection loses nothing and repeats nothing.
"""

from __future__ import annotations

import functools
import re
from collections.abc import AsyncIterator
from typing import Annotated, Any

import grpc
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    ResumeEntry,
    RunAgentInput,
    RunFinishedEvent,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    UserMessage,
)
from fastapi import Header, Request, Response

from gateway import deps, params, personal, responses
from gateway.agui.encoder import CUSTOM_PREFIX, AguiEncoder, parse_cursor, to_sse
from gateway.api import check_message
from gateway.deps import User, rpc
from gateway.errors import ApiError
from gateway.schemas import PROJECT_ID_PATTERN
from gateway.streams import EventResponse, Relay, open_run, sse_response
from switchboard.engine.v1 import engine_pb2, engine_service_pb2
from switchboard.threads.v1 import threads_service_pb2

router = responses.ApiRouter(prefix="/api/agent", tags=["ag-ui"])

# Last-Event-ID: an event's cursor, "<run event sequence>.<k>" (or a bare sequence).
Cursor = Annotated[
    str, Header(alias="Last-Event-ID", max_length=40, pattern=r"^([0-9]{1,18}(\.[0-9]{1,6})?)?$")
]
# Idempotency keys of what AG-UI ids stand for.
THREAD_KEY, RUN_KEY = "ag-ui-thread:", "ag-ui-run:"


class AguiStream:
    """gateway.streams' encoder for AG-UI clients."""

    def __init__(self, encoder: AguiEncoder) -> None:
        self._encoder = encoder

    def event(self, response: EventResponse) -> list[dict[str, str]]:
        return [to_sse(event) for event in self._encoder.encode(response.event)]

    def interrupted(self, event: engine_pb2.RunEvent) -> list[dict[str, str]]:
        return [to_sse(item) for item in self._encoder.encode(event)]


def _message_text(body: RunAgentInput) -> str:
    """The text of the last message, which must be the user's."""
    last = body.messages[-1] if body.messages else None
    if not isinstance(last, UserMessage):
        raise ApiError(400, "INVALID_ARGUMENT", "the last message must be the user's (role user)")
    if isinstance(last.content, str):
        return last.content
    texts = [getattr(part, "text", None) for part in last.content]
    if any(text is None for text in texts):
        raise ApiError(400, "INVALID_ARGUMENT", "only text parts are read in a user message")
    return "".join(text or "" for text in texts)


def _forwarded(body: RunAgentInput, name: str, pattern: str) -> str:
    """A string of forwardedProps, checked like the native API's field."""
    props = body.forwarded_props if isinstance(body.forwarded_props, dict) else {}
    value = props.get(name, "")
    if not isinstance(value, str) or (value and not re.fullmatch(pattern, value)):
        raise ApiError(400, "INVALID_ARGUMENT", f"forwardedProps.{name} must be a string matching {pattern}")
    return value


def _instructions(body: RunAgentInput) -> str:
    return "\n".join(f"{item.description}: {item.value}" for item in body.context or [])


async def _conversation(request: Request, user: str, thread_id: str) -> str:
    """The caller's conversation ``thread_id``, or the one made for it."""
    try:
        found: threads_service_pb2.GetConversationResponse = await rpc(
            request,
            deps.threads(request).GetConversation,
            threads_service_pb2.GetConversationRequest(conversation_id=thread_id),
            user,
        )
        return found.conversation.id
    except grpc.aio.AioRpcError as error:
        if error.code() not in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT):
            raise
    made: threads_service_pb2.CreateConversationResponse = await rpc(
        request,
        deps.threads(request).CreateConversation,
        threads_service_pb2.CreateConversationRequest(request_id=THREAD_KEY + thread_id),
        user,
    )
    return made.conversation.id


async def _settle(request: Request, user: str, entry: ResumeEntry) -> dict[str, str]:
    """An interrupt's answer: a proposal accepted or refused exactly as the
    page's buttons do (its waiting run settled with it); a cancelled answer
    leaves it pending."""
    if entry.status == "cancelled":
        return {"interrupt_id": entry.interrupt_id, "decision": "", "state": "pending"}
    payload = entry.payload if isinstance(entry.payload, dict) else {}
    decision = payload.get("decision")
    if decision not in ("accept", "refuse"):
        raise ApiError(
            400, "INVALID_ARGUMENT", 'a resolved interrupt\'s payload is {"decision": "accept" | "refuse"}'
        )
    if not re.fullmatch(params.ID_PATTERN, entry.interrupt_id) or len(entry.interrupt_id) > params.ID_MAX:
        raise ApiError(400, "INVALID_ARGUMENT", "interruptId is a proposal id")
    decide = personal.accept_proposal if decision == "accept" else personal.refuse_proposal
    decided = await decide(entry.interrupt_id, request, user, None)
    return {"interrupt_id": entry.interrupt_id, "decision": decision, "state": str(decided.proposal.state)}


async def _resumed(body: RunAgentInput, decided: list[dict[str, str]]) -> AsyncIterator[dict[str, str]]:
    """The stream answering a resume: the decisions, as a run of their own."""
    events: list[BaseEvent] = [
        RunStartedEvent(thread_id=body.thread_id, run_id=body.run_id),
        *(CustomEvent(name=f"{CUSTOM_PREFIX}approval", value=item) for item in decided),
        RunFinishedEvent(
            thread_id=body.thread_id,
            run_id=body.run_id,
            result={"decisions": decided},
            outcome=RunFinishedSuccessOutcome(),
        ),
    ]
    for event in events:
        yield to_sse(event)


@router.post(
    "/ag-ui",
    **responses.event_stream(
        "AG-UI events as Server-Sent Events: `data:` one event's JSON, `id:` its cursor",
        {204: {"description": "The run has ended and the client has every event"}},
    ),
)
async def run_agent(
    body: RunAgentInput,
    request: Request,
    user: User,
    last_event_id: Cursor = "",
) -> Response:
    """One AG-UI run: the last (user) message of `messages` as a chat run on
    the thread's conversation, streamed as AG-UI events; or, with `resume`,
    the user's answers to a run's interrupts (its proposals) recorded."""
    if len(body.thread_id) > params.ID_MAX or len(body.run_id) > params.ID_MAX:
        raise ApiError(400, "INVALID_ARGUMENT", f"threadId and runId are at most {params.ID_MAX} characters")
    if body.resume:
        decided = [await _settle(request, user, entry) for entry in body.resume]
        return sse_response(_resumed(body, decided), request, sep="\n")
    text = _message_text(body)
    check_message(request, text)
    model = _forwarded(body, "model", r"[A-Za-z0-9._:/-]{1,200}")
    project_id = _forwarded(body, "project_id", PROJECT_ID_PATTERN)
    conversation_id = await _conversation(request, user, body.thread_id)
    start = functools.partial(
        deps.engine(request).StartRun,
        engine_service_pb2.StartRunRequest(
            request_id=RUN_KEY + body.run_id,
            conversation_id=conversation_id,
            message=text,
            requested_model=model,
            surface=engine_pb2.SURFACE_CHAT,
            client_instructions=_instructions(body),
            project_id=project_id,
        ),
        timeout=deps.settings(request).run_stream_timeout,
        metadata=deps.identity(request, user),
    )
    stream, first = await open_run(start)
    if first is None:
        return Response(status_code=204)
    encoder = AguiEncoder(body.thread_id, body.run_id, parse_cursor(last_event_id))
    relay = Relay(request, user, stream, first, AguiStream(encoder))
    headers: dict[str, Any] = {"X-Switchboard-Conversation": conversation_id}
    # Lines end with LF: AG-UI's client splits events on a blank line of LFs.
    return sse_response(relay.events(), request, headers, sep="\n")
