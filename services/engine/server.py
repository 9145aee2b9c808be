"""The engine: its run service over its database and collaborators, and the server."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

import grpc
from sqlalchemy.ext.asyncio import AsyncEngine

from services.engine.automation import start_automation
from services.engine.budget import RunBudget
from services.engine.collaborators import Collaborators, GrpcTransport
from services.engine.providers.base import LLMProvider
from services.engine.providers.registry import build_providers
from services.engine.quotas import RunQuota
from services.engine.repository import RunsRepository
from services.engine.runs import RunLimits, RunService
from services.engine.runs.remote import RemoteAgents
from services.engine.servicer import EngineServicer
from services.engine.sessions import ThreadsSessionStore
from services.engine.settings import CONNECTORS, EngineSettings
from services.engine.tools import ToolRegistry
from services.engine.tools.configured_sources import SourceCatalogue
from services.engine.tools.connectors import Connector
from services.engine.tools.engine_backend import AskRuns, EngineToolBackend
from services.engine.tools.mcp_client import McpHub, McpServerConfig, parse_mcp_servers
from services.engine.webhooks.outbox import DefaultsRepository, OutboxRepository
from services.engine.webhooks.service import Webhooks
from services.engine.webhooks.signing import load_secret
from services.engine.webhooks.worker import WebhookLimits, WebhookWorker
from services.shared.bootstrap import (
    Closer,
    Drainer,
    RunningService,
    open_database,
    open_wakeups,
    start_service,
)
from services.shared.outbound_urls import UrlPolicy
from switchboard.engine.v1 import (
    engine_service_pb2,
    engine_service_pb2_grpc,
    schedules_service_pb2,
    schedules_service_pb2_grpc,
)

MIGRATIONS = Path(__file__).parent / "migrations"
SERVICE_NAME = engine_service_pb2.DESCRIPTOR.services_by_name["EngineService"].full_name
SCHEDULE_SERVICE_NAME = schedules_service_pb2.DESCRIPTOR.services_by_name["ScheduleService"].full_name


def providers(settings: EngineSettings, collaborators: Collaborators) -> dict[str, LLMProvider]:
    """The offline model and every configured endpoint (API keys are read
    from the environment variables the configuration names); CLI providers
    keep their native sessions in the threads service."""
    return build_providers(
        settings.provider_configs,
        os.environ,
        settings.offline_token_delay,
        sessions=ThreadsSessionStore(collaborators),
    )


def run_limits(settings: EngineSettings) -> RunLimits:
    return RunLimits(
        max_message_chars=settings.max_message_chars,
        delta_flush_seconds=settings.delta_flush_seconds,
        delta_flush_chars=settings.delta_flush_chars,
        lease_seconds=settings.lease_seconds,
        capture_message_content=settings.capture_message_content,
        provider_attempts=settings.provider_attempts,
        instruction_page_budget_chars=settings.instruction_page_budget_chars,
        history_cache_bytes=settings.history_cache_mb * 1024 * 1024,
        default_budget=RunBudget(settings.max_run_tokens, settings.max_run_steps, settings.max_run_seconds),
        fallback_model=settings.fallback_model,
        title_model=settings.title_model,
        quota=RunQuota(settings.max_concurrent_runs_per_user, settings.runs_per_minute_per_user),
    )


def webhook_policy(settings: EngineSettings) -> UrlPolicy:
    return UrlPolicy(
        allow_loopback=settings.webhook_allow_loopback,
        allow_private=settings.webhook_allow_private_addresses,
    )


def webhook_limits(settings: EngineSettings) -> WebhookLimits:
    return WebhookLimits(
        timeout=settings.webhook_timeout,
        retry_seconds=settings.webhook_retry_seconds,
        backoff_initial=settings.webhook_backoff_initial,
        backoff_max=settings.webhook_backoff_max,
        concurrency=settings.webhook_concurrency,
    )


def configured_tools(settings: EngineSettings) -> tuple[list[Connector], list[McpServerConfig]]:
    """The connectors and MCP servers runs may be allowed: both the tool
    registry and ListSources take them from here, so they cannot differ."""
    return [CONNECTORS[name]() for name in settings.connector_names], parse_mcp_servers(
        settings.mcp_servers_json
    )


async def open_run_service(
    settings: EngineSettings, collaborators: Collaborators
) -> tuple[RunService, Webhooks, list[Closer], Drainer]:
    """The run service with its lease taken and orphans settled, before any
    request is served, and its webhooks (their worker delivers what a
    previous engine left undelivered); the closers, and the drainer that
    gives in-flight runs the shutdown grace (then settles them "interrupted")."""
    engine = await open_database(settings, MIGRATIONS)
    return await _open_runs(settings, collaborators, engine)


async def _open_runs(
    settings: EngineSettings, collaborators: Collaborators, engine: AsyncEngine
) -> tuple[RunService, Webhooks, list[Closer], Drainer]:
    # One listener for the process: runs, cancellations, webhooks and schedules share it.
    wakeups = open_wakeups(settings, engine)
    repository = RunsRepository(engine, wakeups)
    connectors, servers = configured_tools(settings)
    mcp = McpHub(servers)

    def tools(runs: AskRuns) -> ToolRegistry:
        return ToolRegistry(EngineToolBackend(collaborators, runs), connectors, mcp)

    models = providers(settings, collaborators)
    runs = RunService(
        repository,
        collaborators,
        models,
        run_limits(settings),
        settings.instance_id,
        tools,
        RemoteAgents(settings.remote_agent_policy(), settings.remote_agent_timeout),
    )
    secret = settings.webhook_secret.get_secret_value()
    outbox = OutboxRepository(engine, wakeups)
    policy = webhook_policy(settings)
    worker = WebhookWorker(
        outbox,
        repository,
        load_secret(secret) if secret else None,
        policy,
        webhook_limits(settings),
        settings.instance_id,
    )
    webhooks = Webhooks(outbox, DefaultsRepository(engine), collaborators, policy, bool(secret))
    runs.use_webhook_defaults(webhooks.default_for)
    await runs.heartbeat()
    await runs.settle_orphans(at_start=True)
    background = [
        asyncio.create_task(runs.maintain()),
        asyncio.create_task(runs.watch_cancellations()),
        asyncio.create_task(worker.run()),
    ]

    async def stop_maintenance() -> None:
        for task in background:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await worker.close()

    # Closed in reverse order: lease maintenance first, then the database.
    async def drain(grace: float | None) -> None:
        # Runs get most of the grace, so that what they emit on the way out
        # (a last step, INTERRUPTED) reaches clients before their streams close.
        await runs.close(None if grace is None else grace * 0.8)

    async def close_providers() -> None:
        for provider in models.values():
            await provider.close()

    return (
        runs,
        webhooks,
        [engine.dispose, wakeups.close, mcp.close, close_providers, stop_maintenance],
        drain,
    )


async def build_server(settings: EngineSettings) -> RunningService:
    transport = GrpcTransport(
        settings.threads_address,
        settings.memory_address,
        settings.router_address,
        settings.call_timeout,
        timeouts={"router": settings.router_timeout},
        credentials=settings.channel_credentials(),
    )
    collaborators = Collaborators(transport)
    database = await open_database(settings, MIGRATIONS)
    runs, webhooks, closers, drain = await _open_runs(settings, collaborators, database)
    automation = start_automation(settings, database, collaborators, runs)

    async def stop_then_drain(grace: float | None) -> None:
        await automation.stop()  # no scheduled run starts during the drain
        await drain(grace)

    def register(server: grpc.aio.Server) -> Sequence[str]:
        sources = SourceCatalogue(*configured_tools(settings))
        engine_service_pb2_grpc.add_EngineServiceServicer_to_server(
            EngineServicer(runs, webhooks, sources), server
        )
        schedules_service_pb2_grpc.add_ScheduleServiceServicer_to_server(automation.servicer, server)
        return [SERVICE_NAME, SCHEDULE_SERVICE_NAME]

    return await start_service(
        settings, register, [transport.close, *closers, automation.stop], drainers=[stop_then_drain]
    )
