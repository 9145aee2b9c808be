"""The threads service: its servicer over its database, and the server."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from datetime import timedelta
from pathlib import Path

from services.shared.agent_cards import summarize_card
from services.shared.bootstrap import Closer, RunningService, open_database, registrar, start_service
from services.shared.clients import open_channel
from services.shared.db import session_factory
from services.threads.access import AgentAccess
from services.threads.domain import ThreadsDomain
from services.threads.export import ThreadArchive
from services.threads.memory_handoff import MemoryHandoff
from services.threads.memory_live_state import MemoryLiveState
from services.threads.memory_projects import MemoryProjects
from services.threads.repository import ThreadsRepository
from services.threads.retention import ConversationRetention
from services.threads.rotation import HandoffSummarizer, PendingHandoff, Rotation, RotationPolicy
from services.threads.servicer import ThreadsServicer
from services.threads.sessions import ProviderSessions
from services.threads.settings import ThreadsSettings
from switchboard.threads.v1 import threads_service_pb2, threads_service_pb2_grpc

MIGRATIONS = Path(__file__).parent / "migrations"
SERVICE_NAME = threads_service_pb2.DESCRIPTOR.services_by_name["ThreadsService"].full_name


async def open_servicer(
    settings: ThreadsSettings, summarizer: HandoffSummarizer | None = None
) -> tuple[ThreadsServicer, list[Closer]]:
    """``summarizer``: the handoff seam. By default memory's HandoffService
    when ``memory_address`` is set, else none (closed segments' handoffs stay
    pending). With ``memory_address``, project membership (memory's
    ProjectsService) opens agents to their project's members too; without
    it, only an agent's own members use it. With it too, an agent's export
    carries its live state (memory's MemoryService)."""
    engine = await open_database(settings, MIGRATIONS)
    closers: list[Closer] = [engine.dispose]
    projects: MemoryProjects | None = None
    live_state: MemoryLiveState | None = None
    if settings.memory_address:
        # One channel to memory, for its HandoffService, ProjectsService and MemoryService.
        memory = open_channel(settings.memory_address, settings.channel_credentials())
        closers.insert(0, memory.close)
        projects = MemoryProjects(memory, settings.call_timeout)
        live_state = MemoryLiveState(memory, settings.call_timeout)
        if summarizer is None:
            summarizer = MemoryHandoff(memory, settings.call_timeout)
    repository = ThreadsRepository(session_factory(engine))
    # One access (and one cache of threads' owners) for every RPC's checks.
    access = AgentAccess(repository, projects=projects)
    policy = RotationPolicy(settings.rotate_after_entries, settings.rotate_after_chars)
    rotation = Rotation(repository, access, policy, summarizer or PendingHandoff())
    read_card = functools.partial(
        summarize_card, policy=settings.remote_agent_policy(), timeout=settings.remote_card_timeout
    )
    domain = ThreadsDomain(repository, access, settings.max_entry_chars, rotation, read_card)
    archive = ThreadArchive(
        repository, access, settings.max_entry_chars, settings.max_export_chars, live_state
    )
    if settings.retention_archived_conversations_days:
        keep = timedelta(days=settings.retention_archived_conversations_days)
        retention = ConversationRetention(
            engine, keep, settings.retention_interval_seconds, settings.instance_id
        )
        closers.append(cancelling(asyncio.create_task(retention.loop())))
    return ThreadsServicer(domain, ProviderSessions(repository, access), rotation, archive), closers


def cancelling(task: asyncio.Task[None]) -> Closer:
    """A closer that stops a background loop."""

    async def close() -> None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    return close


async def build_server(settings: ThreadsSettings) -> RunningService:
    servicer, closers = await open_servicer(settings)
    add = threads_service_pb2_grpc.add_ThreadsServiceServicer_to_server
    return await start_service(settings, registrar(add, servicer, SERVICE_NAME), closers)
