"""EngineService: proto <-> RunService, nothing else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TypeAlias

import grpc

from services.engine.budget import RunBudget
from services.engine.runs import (
    APPROVALS,
    AskSpec,
    BusyPolicy,
    RunRequest,
    RunService,
    run_context,
    run_to_proto,
)
from services.engine.tools.configured_sources import SourceCatalogue
from services.engine.webhooks.service import Webhooks
from services.shared import language
from services.shared.enums import EnumNames
from services.shared.errors import InvalidArgument
from services.shared.identity import caller_user
from switchboard.engine.v1 import engine_pb2, engine_service_pb2, engine_service_pb2_grpc

Context: TypeAlias = grpc.aio.ServicerContext


# A run's correlation_id column (models.AgentRun).
MAX_CORRELATION_CHARS = 128
_BUSY_POLICIES = EnumNames(engine_service_pb2.BusyPolicy)
_SOURCE_KINDS = {
    "connector": engine_pb2.SOURCE_KIND_CONNECTOR,
    "mcp_server": engine_pb2.SOURCE_KIND_MCP_SERVER,
}


def _busy_policy(value: int) -> BusyPolicy:
    if value not in _BUSY_POLICIES:
        raise InvalidArgument(f"unknown busy_policy {value}", field="busy_policy")
    return BusyPolicy(_BUSY_POLICIES.name(value, BusyPolicy.QUEUE))


def _budget(budget: engine_pb2.Budget) -> RunBudget:
    if budget.max_tokens < 0 or budget.max_steps < 0 or budget.max_seconds < 0:
        raise InvalidArgument("budget limits must not be negative", field="budget")
    return RunBudget(budget.max_tokens, budget.max_steps, budget.max_seconds)


def _language(tag: str) -> str:
    if not language.is_tag(tag):
        raise InvalidArgument(
            f"language {tag[:40]!r} is not a BCP 47 language tag (e.g. en, fr, fr-CA)", field="language"
        )
    return tag.strip()


class EngineServicer(engine_service_pb2_grpc.EngineServiceServicer):
    def __init__(self, runs: RunService, webhooks: Webhooks, sources: SourceCatalogue) -> None:
        self._runs = runs
        self._webhooks = webhooks
        self._sources = sources

    async def StartRun(
        self, request: engine_service_pb2.StartRunRequest, context: Context
    ) -> AsyncIterator[engine_service_pb2.StartRunResponse]:
        user = caller_user(context)
        if request.surface == engine_pb2.SURFACE_SCHEDULE:
            # Only the engine's scheduler starts scheduled runs.
            raise InvalidArgument("surface SCHEDULE is set by the engine's scheduler", field="surface")
        run_id = await self._runs.start(
            RunRequest(
                user=user,
                request_id=request.request_id,
                conversation_id=request.conversation_id,
                message=request.message,
                requested_model=request.requested_model,
                surface=request.surface,
                forced_skills=list(request.forced_skills),
                budget=_budget(request.budget),
                busy_policy=_busy_policy(request.busy_policy),
                client_instructions=request.client_instructions,
                webhook_url=self._webhooks.check(request.webhook_url),
                project_id=request.project_id,
                context=run_context.checked(request.context),
                language=_language(request.language),
            )
        )
        async for streamed in self._runs.stream(user, run_id, 0):
            yield engine_service_pb2.StartRunResponse(event=streamed.event, event_json=streamed.json)
            if request.background:
                # The run goes on in its own task; the caller only needed its id.
                return

    async def GetRun(
        self, request: engine_service_pb2.GetRunRequest, context: Context
    ) -> engine_service_pb2.GetRunResponse:
        run = await self._runs.get(caller_user(context), request.run_id)
        return engine_service_pb2.GetRunResponse(run=run_to_proto(run))

    async def WatchRun(
        self, request: engine_service_pb2.WatchRunRequest, context: Context
    ) -> AsyncIterator[engine_service_pb2.WatchRunResponse]:
        events = self._runs.stream(
            caller_user(context), request.run_id, request.after_sequence, request.stored_only
        )
        async for streamed in events:
            yield engine_service_pb2.WatchRunResponse(event=streamed.event, event_json=streamed.json)

    async def CancelRun(
        self, request: engine_service_pb2.CancelRunRequest, context: Context
    ) -> engine_service_pb2.CancelRunResponse:
        run = await self._runs.cancel(caller_user(context), request.run_id)
        return engine_service_pb2.CancelRunResponse(run=run_to_proto(run))

    async def SetRunWebhook(
        self, request: engine_service_pb2.SetRunWebhookRequest, context: Context
    ) -> engine_service_pb2.SetRunWebhookResponse:
        url = self._webhooks.check(request.webhook_url)
        run = await self._runs.set_webhook(caller_user(context), request.run_id, url)
        return engine_service_pb2.SetRunWebhookResponse(run=run_to_proto(run))

    async def RecordApprovalDecision(
        self, request: engine_service_pb2.RecordApprovalDecisionRequest, context: Context
    ) -> engine_service_pb2.RecordApprovalDecisionResponse:
        decision = APPROVALS.name(request.decision)
        run = await self._runs.record_approval(caller_user(context), request.run_id, decision)
        return engine_service_pb2.RecordApprovalDecisionResponse(run=run_to_proto(run))

    async def ListRuns(
        self, request: engine_service_pb2.ListRunsRequest, context: Context
    ) -> engine_service_pb2.ListRunsResponse:
        runs, token = await self._runs.list_runs(
            caller_user(context),
            request.conversation_id,
            request.page_size,
            request.page_token,
            request.correlation_id,
        )
        return engine_service_pb2.ListRunsResponse(
            runs=[run_to_proto(r) for r in runs], next_page_token=token
        )

    async def AskAgent(
        self, request: engine_service_pb2.AskAgentRequest, context: Context
    ) -> AsyncIterator[engine_service_pb2.AskAgentResponse]:
        user = caller_user(context)
        if not request.requester.strip():
            raise InvalidArgument("requester is required", field="requester")
        if not request.target_agent_id.strip():
            raise InvalidArgument("target_agent_id is required", field="target_agent_id")
        if len(request.correlation_id) > MAX_CORRELATION_CHARS:
            raise InvalidArgument(
                f"correlation_id is longer than {MAX_CORRELATION_CHARS} characters", field="correlation_id"
            )
        ask = AskSpec(request.requester.strip(), request.target_agent_id.strip(), request.correlation_id)
        events = self._runs.ask_and_follow(
            user,
            request.request_id,
            ask,
            request.message,
            _budget(request.budget),
            _busy_policy(request.busy_policy),
            request.client_instructions,
            self._webhooks.check(request.webhook_url),
        )
        async for streamed in events:
            yield engine_service_pb2.AskAgentResponse(event=streamed.event, event_json=streamed.json)

    async def ListWebhookDeliveries(
        self, request: engine_service_pb2.ListWebhookDeliveriesRequest, context: Context
    ) -> engine_service_pb2.ListWebhookDeliveriesResponse:
        run = await self._runs.get(caller_user(context), request.run_id)
        return await self._webhooks.deliveries(run.id, run.webhook_url or "")

    async def SetWebhookDefault(
        self, request: engine_service_pb2.SetWebhookDefaultRequest, context: Context
    ) -> engine_service_pb2.SetWebhookDefaultResponse:
        url = await self._webhooks.set_default(caller_user(context), request.target, request.webhook_url)
        return engine_service_pb2.SetWebhookDefaultResponse(webhook_url=url)

    async def GetWebhookDefault(
        self, request: engine_service_pb2.GetWebhookDefaultRequest, context: Context
    ) -> engine_service_pb2.GetWebhookDefaultResponse:
        url = await self._webhooks.get_default(caller_user(context), request.target)
        return engine_service_pb2.GetWebhookDefaultResponse(webhook_url=url)

    async def ListSources(
        self, request: engine_service_pb2.ListSourcesRequest, context: Context
    ) -> engine_service_pb2.ListSourcesResponse:
        sources, token = self._sources.page(request.page_size, request.page_token)
        return engine_service_pb2.ListSourcesResponse(
            sources=[
                engine_pb2.Source(kind=_SOURCE_KINDS[s.kind], name=s.name, title=s.title) for s in sources
            ],
            next_page_token=token,
        )
