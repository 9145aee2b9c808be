"""AG-UI: `POST /api/agent/ag-ui` takes the protocol's RunAgentInput and
answers with its events (Server-Sent Events, encoded by gateway.agui.encoder
from the run's persisted events).

- The thread is a conversation: the caller's conversation of that id, or
  one made for the thread id on first use (the same one every time after);
  or, as `agent:<agent id>`, that agent's shared thread, where the run is
  an ask of the agent.
- The last message is the run's message (a user message with text); the
  context entries become the client's instructions; `forwardedProps` may
  name a `model` and a `project_id` (a conversation's). The input's
  `state` is the client's copy of the project's live state: not read (the
  live state is written by the project's members and agents), the run's
  STATE_SNAPSHOT replaces it.
- The run id is the idempotency key: posting the same RunAgentInput again
  follows the same run. With `Last-Event-ID` (the `switchboard_cursor` of
  the last event received: its SSE id, also in its metadata), the stream
  goes on after it: a dropped connection loses nothing and repeats nothing.
"""

from __future__ import annotations

import functools
import re
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from typing import Annotated, Any, cast

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
from gateway.agui.encoder import CUSTOM_PREFIX, AguiEncoder, parse_cursor, to_fill, to_sse
from gateway.agui.records import Records, Thread
from gateway.api import check_message
from gateway.deps import User, rpc
from gateway.errors import ApiError
from gateway.schemas import PROJECT_ID_PATTERN
from gateway.streams import EventResponse, Relay, open_run, sse_response
from switchboard.engine.v1 import engine_pb2, engine_service_pb2
from switchboard.threads.v1 import threads_pb2, threads_service_pb2

router = responses.ApiRouter(prefix="/api/agent", tags=["ag-ui"])

# Last-Event-ID: an event's cursor, "<run event sequence>.<k>" (or a bare sequence).
Cursor = Annotated[
    str, Header(alias="Last-Event-ID", max_length=40, pattern=r"^([0-9]{1,18}(\.[0-9]{1,6})?)?$")
]
# Idempotency keys of what AG-UI ids stand for.
THREAD_KEY, RUN_KEY = "ag-ui-thread:", "ag-ui-run:"
# A threadId naming an agent's shared thread: "agent:<agent id>".
AGENT_THREAD = "agent:"
# Who asks, on an agent's thread, through AG-UI (as through the ask route by default).
REQUESTER = "user"


class ToFill(dict[str, str]):
    """An event the route fills in from the services (gateway.agui.records)
    before it is written; it goes through the relay's queue as the others."""

    def __init__(self, event: BaseEvent) -> None:
        super().__init__()
        self.event = event


class AguiStream:
    """gateway.streams' encoder for AG-UI clients."""

    def __init__(self, encoder: AguiEncoder) -> None:
        self._encoder = encoder

    def event(self, response: EventResponse) -> list[dict[str, str]]:
        return self._sse(response.event)

    def interrupted(self, event: engine_pb2.RunEvent) -> list[dict[str, str]]:
        return self._sse(event)

    def _sse(self, event: engine_pb2.RunEvent) -> list[dict[str, str]]:
        return [ToFill(item) if to_fill(item) else to_sse(item) for item in self._encoder.encode(event)]


async def _filled(relay: Relay, records: Records) -> AsyncIterator[dict[str, str]]:
    """The relay's events, those to fill in filled (or left out when they
    have nothing to show)."""
    events = relay.events()
    # Closed with this stream: a client that leaves releases the relay at once.
    async with aclosing(cast(AsyncGenerator[dict[str, str], None], events)):
        async for item in events:
            if isinstance(item, ToFill):
                filled = await records.fill(item.event, relay.run_id)
                if filled is None:
                    continue
                item = to_sse(filled)
            yield item


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


async def _check_agent_project(request: Request, user: str, agent_id: str, project_id: str) -> None:
    """An agent's thread reads its agent's project: another one named is a mistake."""
    found: threads_service_pb2.GetAgentResponse = await rpc(
        request, deps.threads(request).GetAgent, threads_service_pb2.GetAgentRequest(agent_id=agent_id), user
    )
    agent: threads_pb2.Agent = found.agent
    if project_id and project_id != agent.project_id:
        raise ApiError(
            400,
            "INVALID_ARGUMENT",
            f"forwardedProps.project_id: agent {agent_id!r} works in project {agent.project_id!r}",
        )


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
    the thread's conversation (or an ask of the agent a threadId
    `agent:<id>` names, on its shared thread), streamed as AG-UI events; or,
    with `resume`, the user's answers to a run's interrupts (its proposals)
    recorded."""
    if len(body.thread_id) > params.ID_MAX or len(body.run_id) > params.ID_MAX:
        raise ApiError(400, "INVALID_ARGUMENT", f"threadId and runId are at most {params.ID_MAX} characters")
    if body.resume:
        decided = [await _settle(request, user, entry) for entry in body.resume]
        return sse_response(_resumed(body, decided), request, sep="\n")
    text = _message_text(body)
    check_message(request, text)
    model = _forwarded(body, "model", r"[A-Za-z0-9._:/-]{1,200}")
    project_id = _forwarded(body, "project_id", PROJECT_ID_PATTERN)
    engine = deps.engine(request)
    method: Callable[..., Any]
    run: engine_service_pb2.AskAgentRequest | engine_service_pb2.StartRunRequest
    if body.thread_id.startswith(AGENT_THREAD):
        agent_id = body.thread_id.removeprefix(AGENT_THREAD)
        thread, headers = Thread(agent_id=agent_id), {}
        method, run = engine.AskAgent, await _ask(request, user, body, agent_id, text, model, project_id)
    else:
        conversation_id = await _conversation(request, user, body.thread_id)
        thread, headers = (
            Thread(conversation_id=conversation_id),
            {"X-Switchboard-Conversation": conversation_id},
        )
        method, run = (
            engine.StartRun,
            engine_service_pb2.StartRunRequest(
                request_id=RUN_KEY + body.run_id,
                conversation_id=conversation_id,
                message=text,
                requested_model=model,
                surface=engine_pb2.SURFACE_CHAT,
                client_instructions=_instructions(body),
                project_id=project_id,
            ),
        )
    start = functools.partial(
        method,
        run,
        timeout=deps.settings(request).run_stream_timeout,
        metadata=deps.identity(request, user),
    )
    stream, first = await open_run(start)
    if first is None:
        return Response(status_code=204)
    encoder = AguiEncoder(body.thread_id, body.run_id, parse_cursor(last_event_id))
    relay = Relay(request, user, stream, first, AguiStream(encoder))
    events = _filled(relay, Records(request, user, thread))
    # Lines end with LF: AG-UI's client splits events on a blank line of LFs.
    return sse_response(events, request, headers, sep="\n")


async def _ask(
    request: Request, user: str, body: RunAgentInput, agent_id: str, text: str, model: str, project_id: str
) -> engine_service_pb2.AskAgentRequest:
    """The ask of the agent on its shared thread: the agent's own model and
    project (a model, or another project, named is a 400)."""
    if not re.fullmatch(params.ID_PATTERN, agent_id):
        raise ApiError(400, "INVALID_ARGUMENT", "threadId agent:<id> names an agent by its id")
    if model:
        raise ApiError(
            400, "INVALID_ARGUMENT", "forwardedProps.model: an agent's thread runs on the agent's own model"
        )
    if project_id:
        await _check_agent_project(request, user, agent_id, project_id)
    return engine_service_pb2.AskAgentRequest(
        request_id=RUN_KEY + body.run_id,
        requester=REQUESTER,
        target_agent_id=agent_id,
        message=text,
        client_instructions=_instructions(body),
    )
