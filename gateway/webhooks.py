"""The HTTP routes of default webhooks: a conversation's (its chat runs) and
an agent's (the caller's asks to it), used by every run of it that names no
`webhook_url`. A run's own deliveries are read in gateway.api."""

from __future__ import annotations

from fastapi import Request

from gateway import deps, responses
from gateway.deps import User, rpc
from gateway.params import Id
from gateway.schemas import WebhookDefaultBody
from switchboard.engine.v1 import engine_service_pb2

router = responses.ApiRouter(prefix="/api/agent")


async def _get(
    request: Request, user: str, target: engine_service_pb2.WebhookDefaultTarget
) -> responses.WebhookDefault:
    message = engine_service_pb2.GetWebhookDefaultRequest(target=target)
    response = await rpc(request, deps.engine(request).GetWebhookDefault, message, user)
    return responses.WebhookDefault(webhook_url=response.webhook_url)


async def _put(
    request: Request, user: str, target: engine_service_pb2.WebhookDefaultTarget, url: str
) -> responses.WebhookDefault:
    message = engine_service_pb2.SetWebhookDefaultRequest(target=target, webhook_url=url)
    # Setting a value: safe to retry.
    response = await rpc(request, deps.engine(request).SetWebhookDefault, message, user)
    return responses.WebhookDefault(webhook_url=response.webhook_url)


@router.get(
    "/conversations/{conversation_id}/webhook",
    tags=["conversations"],
)
async def get_conversation_webhook(
    conversation_id: Id, request: Request, user: User
) -> responses.WebhookDefault:
    """The conversation's default webhook ("" when none)."""
    return await _get(request, user, engine_service_pb2.WebhookDefaultTarget(conversation_id=conversation_id))


@router.put(
    "/conversations/{conversation_id}/webhook",
    tags=["conversations"],
)
async def put_conversation_webhook(
    conversation_id: Id, body: WebhookDefaultBody, request: Request, user: User
) -> responses.WebhookDefault:
    """Sets the default webhook of the conversation's runs ("" removes it)."""
    target = engine_service_pb2.WebhookDefaultTarget(conversation_id=conversation_id)
    return await _put(request, user, target, body.webhook_url)


@router.get("/agents/{agent_id}/webhook", tags=["agents"])
async def get_agent_webhook(agent_id: Id, request: Request, user: User) -> responses.WebhookDefault:
    """The caller's default webhook of the agent's runs ("" when none)."""
    return await _get(request, user, engine_service_pb2.WebhookDefaultTarget(agent_id=agent_id))


@router.put("/agents/{agent_id}/webhook", tags=["agents"])
async def put_agent_webhook(
    agent_id: Id, body: WebhookDefaultBody, request: Request, user: User
) -> responses.WebhookDefault:
    """Sets the default webhook of the runs of the caller's asks to the agent ("" removes it)."""
    target = engine_service_pb2.WebhookDefaultTarget(agent_id=agent_id)
    return await _put(request, user, target, body.webhook_url)
