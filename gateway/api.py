"""The HTTP API under /api/agent: conversations, messages (a run, streamed as
SSE), runs, their event streams, cancellation and skill feedback. The other
routes live in gateway.personal, gateway.catalog and gateway.agents."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Query, Request, Response
from fastapi.responses import JSONResponse
from sse_starlette import EventSourceResponse

from gateway import deps, params, responses
from gateway.deps import User, rpc
from gateway.enums import BUSY_POLICIES, DELIVERY_STATES
from gateway.errors import ApiError
from gateway.params import Id, LastEventId, PageSize, PageToken
from gateway.schemas import (
    CreateConversationBody,
    FeedbackBody,
    MessageBody,
    RunContextBody,
    SourcesUpdateBody,
    UpdateConversationBody,
)
from gateway.streams import open_run, stream_run
from services.shared.language import from_accept_language, supported
from switchboard.engine.v1 import engine_pb2, engine_service_pb2
from switchboard.router.v1 import router_service_pb2
from switchboard.threads.v1 import threads_pb2, threads_service_pb2

router = responses.ApiRouter(prefix="/api/agent")


def check_message(request: Request, message: str) -> None:
    limit = deps.settings(request).max_message_chars
    if len(message) > limit:
        raise ApiError(
            413, "PAYLOAD_TOO_LARGE", f"message exceeds {limit} characters", "ERROR_REASON_TOO_LARGE"
        )
    if not message.strip():
        raise ApiError(400, "INVALID_ARGUMENT", "message must not be blank")


@router.post("/conversations", status_code=201, tags=["conversations"])
async def create_conversation(
    body: CreateConversationBody, request: Request, user: User
) -> responses.Conversation:
    message = threads_service_pb2.CreateConversationRequest(request_id=body.request_id, title=body.title)
    if body.allowed_sources is not None:
        message.allowed_sources.CopyFrom(threads_pb2.AllowedSources(**body.allowed_sources.model_dump()))
    # Retried only with an idempotency key (a retry must not create twice).
    response = await rpc(
        request, deps.threads(request).CreateConversation, message, user, idempotent=bool(body.request_id)
    )
    return responses.Conversation.from_proto(response.conversation)


@router.get("/conversations", tags=["conversations"])
async def list_conversations(
    request: Request,
    user: User,
    page_size: PageSize = 50,
    page_token: PageToken = "",
    q: Annotated[str, params.text(200, description="only titles containing this text")] = "",
    include_archived: bool = False,
) -> responses.ConversationList:
    """The caller's conversations: pinned first, then the most recently active."""
    response = await rpc(
        request,
        deps.threads(request).ListConversations,
        threads_service_pb2.ListConversationsRequest(
            page_size=page_size, page_token=page_token, title_query=q, include_archived=include_archived
        ),
        user,
    )
    return responses.ConversationList(
        conversations=[responses.Conversation.from_proto(c) for c in response.conversations],
        next_page_token=response.next_page_token,
    )


async def _conversation(request: Request, user: str, conversation_id: str) -> threads_pb2.Conversation:
    response: threads_service_pb2.GetConversationResponse = await rpc(
        request,
        deps.threads(request).GetConversation,
        threads_service_pb2.GetConversationRequest(conversation_id=conversation_id),
        user,
    )
    return response.conversation


@router.get("/conversations/{conversation_id}", tags=["conversations"])
async def get_conversation(conversation_id: Id, request: Request, user: User) -> responses.Conversation:
    return responses.Conversation.from_proto(await _conversation(request, user, conversation_id))


@router.patch("/conversations/{conversation_id}", tags=["conversations"])
async def update_conversation(
    conversation_id: Id, body: UpdateConversationBody, request: Request, user: User
) -> responses.Conversation:
    """Renames and/or pins the conversation; a rename makes the title manual
    (title_auto false) for good."""
    fields = body.model_dump(exclude_none=True)
    if not fields:
        raise ApiError(400, "INVALID_ARGUMENT", "nothing to update: give title and/or pinned")
    message = threads_service_pb2.UpdateConversationRequest(
        conversation=threads_pb2.Conversation(id=conversation_id, **fields)
    )
    message.update_mask.paths.extend(sorted(fields))
    response = await rpc(request, deps.threads(request).UpdateConversation, message, user)
    return responses.Conversation.from_proto(response.conversation)


@router.put("/conversations/{conversation_id}/sources", tags=["conversations"])
async def set_conversation_sources(
    conversation_id: Id, body: SourcesUpdateBody, request: Request, user: User
) -> responses.Conversation:
    """Sets what the conversation's runs may read: the workspace, the
    connectors and MCP servers checked, memory recall. Only the fields the
    body holds change; the others keep their value."""
    fields = body.model_dump(exclude_none=True)
    if not fields:
        nothing = "nothing to update: give workspace, connectors, mcp_servers and/or memory"
        raise ApiError(400, "INVALID_ARGUMENT", nothing)
    message = threads_service_pb2.UpdateConversationRequest(
        conversation=threads_pb2.Conversation(
            id=conversation_id, allowed_sources=threads_pb2.AllowedSources(**fields)
        )
    )
    # One path per field, so the threads service keeps the fields not given.
    message.update_mask.paths.extend(f"allowed_sources.{name}" for name in sorted(fields))
    response = await rpc(request, deps.threads(request).UpdateConversation, message, user)
    return responses.Conversation.from_proto(response.conversation)


@router.post("/conversations/{conversation_id}/archive", tags=["conversations"])
async def archive_conversation(conversation_id: Id, request: Request, user: User) -> responses.Conversation:
    """Archived conversations leave the default list and stay readable."""
    response = await rpc(
        request,
        deps.threads(request).ArchiveConversation,
        threads_service_pb2.ArchiveConversationRequest(conversation_id=conversation_id),
        user,
    )
    return responses.Conversation.from_proto(response.conversation)


@router.get("/conversations/{conversation_id}/entries", tags=["conversations"])
async def list_entries(
    conversation_id: Id,
    request: Request,
    user: User,
    page_size: PageSize = 100,
    page_token: PageToken = "",
    descending: bool = False,
) -> responses.EntryPage:
    """The conversation's messages in order (user and assistant turns); with
    `descending`, newest first, each `next_page_token` reaching further back."""
    response = await deps.conversation_entries(
        request, user, conversation_id, descending=descending, page_size=page_size, page_token=page_token
    )
    return responses.EntryPage(
        entries=[responses.Entry.from_proto(e) for e in response.entries],
        next_page_token=response.next_page_token,
        previous_page_token=response.previous_page_token,
    )


@router.post(
    "/conversations/{conversation_id}/messages",
    **responses.event_stream(
        responses.RUN_EVENTS,
        {
            202: {
                "model": responses.BackgroundRun,
                "description": 'With `"background": true`: the run started and goes on without a stream',
            }
        },
    ),
    tags=["runs"],
)
async def post_message(
    conversation_id: Id, body: MessageBody, request: Request, user: User
) -> EventSourceResponse | Response:
    """Starts a run on the message and streams its events (see Server-Sent
    Events); with `"background": true`, answers 202 with the run's id at once."""
    check_message(request, body.message)
    start = functools.partial(
        deps.engine(request).StartRun,
        engine_service_pb2.StartRunRequest(
            request_id=body.request_id or str(uuid.uuid4()),
            conversation_id=conversation_id,
            message=body.message,
            requested_model=body.model,
            surface=engine_pb2.SURFACE_CHAT,
            forced_skills=body.forced_skills,
            busy_policy=BUSY_POLICIES.number(body.busy_policy),
            webhook_url=body.webhook_url,
            background=body.background,
            project_id=body.project_id,
            context=run_context(body.context),
            language=run_language(body.language, request),
        ),
        timeout=deps.settings(request).run_stream_timeout,
        metadata=deps.identity(request, user),
    )
    if body.background:
        return await _background(start)
    return await stream_run(start, request, user)


def run_context(body: RunContextBody | None) -> engine_pb2.RunContext | None:
    """The body's context as the engine takes it (None: the run has none)."""
    if body is None:
        return None
    context = engine_pb2.RunContext(
        selections=[engine_pb2.SelectedBlock(**block.model_dump()) for block in body.selections]
    )
    if body.page is not None:
        context.page.CopyFrom(engine_pb2.CurrentPage(**body.page.model_dump()))
    return context


def run_language(asked: str, request: Request) -> str:
    """The language a run's texts follow: the body's when the product has
    texts in it, else the browser's Accept-Language; "" lets the engine read
    the message's."""
    return asked if supported(asked) else from_accept_language(request.headers.get("accept-language", ""))


async def _background(start: Callable[[], Any]) -> Response:
    """202 with the run's id: the engine's stream carries only the run's first
    event, and the run does not depend on anyone listening."""
    stream, first = await open_run(start)
    stream.cancel()
    if first is None:  # the engine always sends run_started; never seen
        raise ApiError(502, "BAD_GATEWAY", "the engine started no run", "ERROR_REASON_DEPENDENCY_UNAVAILABLE")
    location = f"/api/agent/runs/{first.event.run_id}"
    return JSONResponse(
        {"run_id": first.event.run_id, "status": "running", "events": f"{location}/events"},
        status_code=202,
        headers={"Location": location},
    )


@router.get("/conversations/{conversation_id}/runs", tags=["runs"])
async def list_runs(
    conversation_id: Id,
    request: Request,
    user: User,
    page_size: Annotated[int, Query(ge=0, le=100)] = 20,
    page_token: PageToken = "",
) -> responses.RunList:
    """The conversation's runs, newest first."""
    # The conversation first: another user's (or a missing) one is 404, not an empty list.
    await _conversation(request, user, conversation_id)
    response = await rpc(
        request,
        deps.engine(request).ListRuns,
        engine_service_pb2.ListRunsRequest(
            conversation_id=conversation_id, page_size=page_size, page_token=page_token
        ),
        user,
    )
    return responses.RunList(
        runs=[responses.Run.from_proto(r) for r in response.runs], next_page_token=response.next_page_token
    )


async def _run(request: Request, user: str, run_id: str) -> engine_pb2.Run:
    response: engine_service_pb2.GetRunResponse = await rpc(
        request, deps.engine(request).GetRun, engine_service_pb2.GetRunRequest(run_id=run_id), user
    )
    return response.run


@router.get("/runs/{run_id}", tags=["runs"])
async def get_run(run_id: Id, request: Request, user: User) -> responses.Run:
    """One run: status, model used, skills, sources read, router decision, usage."""
    return responses.Run.from_proto(await _run(request, user, run_id))


@router.get(
    "/runs/{run_id}/events",
    **responses.event_stream(
        responses.RUN_EVENTS, {204: {"description": "The run has ended and the client has every event"}}
    ),
    tags=["runs"],
)
async def run_events(
    run_id: Id,
    request: Request,
    user: User,
    last_event_id: LastEventId = "",
) -> EventSourceResponse | Response:
    """The run's events after Last-Event-ID (0 = all), then live until it ends."""
    after = int(last_event_id or 0)
    start = functools.partial(
        deps.engine(request).WatchRun,
        engine_service_pb2.WatchRunRequest(run_id=run_id, after_sequence=after),
        timeout=deps.settings(request).run_stream_timeout,
        metadata=deps.identity(request, user),
    )
    return await stream_run(start, request, user)


@router.get("/runs/{run_id}/deliveries", tags=["runs"])
async def webhook_deliveries(run_id: Id, request: Request, user: User) -> responses.WebhookDeliveries:
    """The run's webhook: where its delivery stands and every attempt
    (status code or error, time), oldest first."""
    response = await rpc(
        request,
        deps.engine(request).ListWebhookDeliveries,
        engine_service_pb2.ListWebhookDeliveriesRequest(run_id=run_id),
        user,
    )
    return responses.WebhookDeliveries(
        webhook_url=response.webhook_url,
        webhook_id=response.webhook_id,
        state=DELIVERY_STATES.name(response.state),
        deliveries=[responses.WebhookDelivery.from_proto(d) for d in response.deliveries],
    )


@router.post("/runs/{run_id}/cancel", tags=["runs"])
async def cancel_run(run_id: Id, request: Request, user: User) -> responses.Run:
    """Stops a running run (it ends `cancelled`); an ended run is returned unchanged."""
    response = await rpc(
        request, deps.engine(request).CancelRun, engine_service_pb2.CancelRunRequest(run_id=run_id), user
    )
    return responses.Run.from_proto(response.run)


async def _request_text(request: Request, user: str, run: engine_pb2.Run) -> str:
    """The user's message that started the run, from its conversation."""
    token = ""
    for _ in range(20):  # newest first: a run's message is near the end
        response: threads_service_pb2.ListEntriesResponse = await rpc(
            request,
            deps.threads(request).ListEntries,
            threads_service_pb2.ListEntriesRequest(
                for_conversation=threads_service_pb2.ListEntriesRequest.ForConversation(
                    conversation_id=run.conversation_id
                ),
                descending=True,
                page_size=100,
                page_token=token,
            ),
            user,
        )
        for entry in response.entries:
            if entry.run_id == run.id and entry.role == threads_pb2.ROLE_USER:
                return entry.content
        token = response.next_page_token
        if not token:
            break
    raise ApiError(409, "FAILED_PRECONDITION", f"the message of run {run.id!r} is not in a conversation")


@router.post("/runs/{run_id}/feedback", status_code=201, tags=["runs"])
async def skill_feedback(
    run_id: Id, body: FeedbackBody, request: Request, user: User
) -> responses.SkillFeedbackResult:
    """ "This skill was not relevant": records the run's
    request and the skill as a counter-example. `offer_disable_auto_use`
    says whether the skill is still used automatically for the caller; the
    page then offers `disable_auto_use` (PUT /skills/{id}/enablement)."""
    run = await _run(request, user, run_id)  # another user's run: 404
    if body.skill_id not in {s.skill_id for s in run.skills}:
        raise ApiError(400, "INVALID_ARGUMENT", f"skill {body.skill_id!r} was not applied to run {run_id!r}")
    text = await _request_text(request, user, run) if run.conversation_id else ""
    if not text:
        raise ApiError(409, "FAILED_PRECONDITION", f"run {run_id!r} has no chat message to record")
    response = await rpc(
        request,
        deps.router_stub(request).CreateSkillFeedback,
        router_service_pb2.CreateSkillFeedbackRequest(
            request_id=body.request_id or f"{run_id}:{body.skill_id}",
            skill_id=body.skill_id,
            request_text=text,
            run_id=run_id,
        ),
        user,
    )
    result = responses.SkillFeedbackResult(
        feedback=responses.SkillFeedback.from_proto(response.feedback),
        offer_disable_auto_use=response.offer_disable_auto_use,
    )
    if response.offer_disable_auto_use:
        result.disable_auto_use = responses.DisableAutoUseAction(
            method="PUT",
            path=f"/api/agent/skills/{body.skill_id}/enablement",
            body={"enabled": True, "auto_use": "off"},
        )
    return result
