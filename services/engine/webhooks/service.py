"""What the engine's API offers about webhooks: checking the URL a run
names, reading back how its delivery went, and default webhooks. A
conversation's default is its user's (conversations are personal). An
agent's default is its project's when the agent belongs to a shared project:
stored once for the agent (user_id ``PROJECT``), read by the project's
members, set or cleared by its editors and owners, and used by every
member's asks of the agent that name no webhook. An agent of a personal
project (the registry every user sees) keeps one default per user."""

from __future__ import annotations

from services.engine.agent_projects import EDITOR, VIEWER, AgentProjects, require
from services.engine.collaborators import Collaborators
from services.engine.webhooks.models import DELIVERED, FAILED, PENDING
from services.engine.webhooks.outbox import DefaultsRepository, OutboxRepository
from services.shared.errors import FailedPrecondition, InvalidArgument
from services.shared.outbound_urls import UrlPolicy, check_url
from services.shared.time import to_timestamp
from switchboard.engine.v1 import engine_service_pb2

CONVERSATION, AGENT = "conversation", "agent"
# The user_id of an agent's default that belongs to its shared project.
PROJECT = ""
STATES = {
    PENDING: engine_service_pb2.WEBHOOK_DELIVERY_STATE_PENDING,
    DELIVERED: engine_service_pb2.WEBHOOK_DELIVERY_STATE_DELIVERED,
    FAILED: engine_service_pb2.WEBHOOK_DELIVERY_STATE_FAILED,
}


class Webhooks:
    def __init__(
        self,
        outbox: OutboxRepository,
        defaults: DefaultsRepository,
        collaborators: Collaborators,
        policy: UrlPolicy,
        configured: bool,
    ) -> None:
        self._outbox = outbox
        self._defaults = defaults
        self._collab = collaborators
        self._agents = AgentProjects(collaborators)
        self._policy = policy
        self._configured = configured

    def check(self, url: str) -> str:
        """The URL a run may name ("" for none): INVALID_ARGUMENT for a bad or
        refused one, FAILED_PRECONDITION when this engine has no secret to
        sign with."""
        if not url:
            return ""
        check_url(url, self._policy)
        if not self._configured:
            raise FailedPrecondition(
                "webhooks are not configured on this engine (no signing secret)", field="webhook_url"
            )
        return url

    async def deliveries(
        self, run_id: str, webhook_url: str
    ) -> engine_service_pb2.ListWebhookDeliveriesResponse:
        """The delivery record of a run the caller may read."""
        row, attempts = await self._outbox.of_run(run_id)
        response = engine_service_pb2.ListWebhookDeliveriesResponse(webhook_url=webhook_url)
        if row is not None:
            response.webhook_id = row.webhook_id
            response.state = STATES.get(row.state, engine_service_pb2.WEBHOOK_DELIVERY_STATE_UNSPECIFIED)
        for attempt in attempts:
            response.deliveries.add(
                attempt=attempt.attempt,
                status_code=attempt.status_code,
                error=attempt.error,
                create_time=to_timestamp(attempt.create_time),
                duration_ms=attempt.duration_ms,
            )
        return response

    async def _target(
        self, user: str, target: engine_service_pb2.WebhookDefaultTarget, write: bool
    ) -> tuple[str, str, str]:
        """(owner, kind, id) of the default of a conversation or agent the
        caller can read: owner is the caller, or ``PROJECT`` for an agent of
        a shared project, whose role is checked (viewer reads, editor writes)."""
        conversation, agent = target.conversation_id.strip(), target.agent_id.strip()
        if bool(conversation) == bool(agent):
            raise InvalidArgument("target needs exactly one of conversation_id and agent_id", field="target")
        if conversation:
            await self._collab.get_conversation(user, conversation)
            return user, CONVERSATION, conversation
        access = await self._agents.of(user, agent)
        if not access.shared:
            return user, AGENT, agent
        if write:
            require(user, access, EDITOR, "setting the agent's default webhook")
        else:
            require(user, access, VIEWER, "reading the agent's default webhook")
        return PROJECT, AGENT, agent

    async def set_default(self, user: str, target: engine_service_pb2.WebhookDefaultTarget, url: str) -> str:
        owner, kind, target_id = await self._target(user, target, write=True)
        await self._defaults.put(owner, kind, target_id, self.check(url))
        return url

    async def get_default(self, user: str, target: engine_service_pb2.WebhookDefaultTarget) -> str:
        owner, kind, target_id = await self._target(user, target, write=False)
        return await self._defaults.get(owner, kind, target_id)

    async def default_for(self, user: str, kind: str, target_id: str) -> str:
        """The default of a run that names no webhook ("" when none). Not
        checked again here: the delivery checks its addresses anyway. For an
        agent with any default stored, the agent is read (as ``user``, who is
        asking it) to tell its project's default from the user's own."""
        if not target_id:
            return ""
        if kind != AGENT:
            return await self._defaults.get(user, kind, target_id)
        shared = await self._defaults.get(PROJECT, kind, target_id)
        personal = await self._defaults.get(user, kind, target_id)
        if not shared and not personal:
            return ""
        return shared if await self._agents.project_of(user, target_id) else personal
