"""What the engine's API offers about webhooks: checking the URL a run
names, and reading back how its delivery went."""

from __future__ import annotations

from services.engine.collaborators import Collaborators
from services.engine.webhooks.models import DELIVERED, FAILED, PENDING
from services.engine.webhooks.outbox import DefaultsRepository, OutboxRepository
from services.engine.webhooks.urls import UrlPolicy, check_url
from services.shared.errors import FailedPrecondition, InvalidArgument
from services.shared.time import to_timestamp
from switchboard.engine.v1 import engine_service_pb2

CONVERSATION, AGENT = "conversation", "agent"
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

    async def _target(self, user: str, target: engine_service_pb2.WebhookDefaultTarget) -> tuple[str, str]:
        """(kind, id) of a conversation or agent the caller can read."""
        conversation, agent = target.conversation_id.strip(), target.agent_id.strip()
        if bool(conversation) == bool(agent):
            raise InvalidArgument("target needs exactly one of conversation_id and agent_id", field="target")
        if conversation:
            await self._collab.get_conversation(user, conversation)
            return CONVERSATION, conversation
        await self._collab.get_agent(user, agent)
        return AGENT, agent

    async def set_default(self, user: str, target: engine_service_pb2.WebhookDefaultTarget, url: str) -> str:
        kind, target_id = await self._target(user, target)
        await self._defaults.put(user, kind, target_id, self.check(url))
        return url

    async def get_default(self, user: str, target: engine_service_pb2.WebhookDefaultTarget) -> str:
        kind, target_id = await self._target(user, target)
        return await self._defaults.get(user, kind, target_id)

    async def default_for(self, user: str, kind: str, target_id: str) -> str:
        """The default of a run that names no webhook ("" when none). Not
        checked again here: the delivery checks its addresses anyway."""
        return await self._defaults.get(user, kind, target_id) if target_id else ""
