"""The memory service: its four gRPC services over one database, and the
server. Each concept is a package of its own (servicer -> domain ->
repository): ``notes``, ``pages`` (and proposals), ``handoff``, ``context``
(project context and live state), ``personal`` (personal settings) and
``chat`` (a chat run's read of all of them in one call); this module wires
them together."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc

from services.memory.chat.domain import ChatContextDomain
from services.memory.context.domain import ContextDomain
from services.memory.context.live_state import LiveStateDomain
from services.memory.context.repository import ContextRepository
from services.memory.handoff.domain import HandoffDomain, RuleSummariser
from services.memory.handoff.repository import HandoffRepository
from services.memory.handoff.servicer import HandoffServicer
from services.memory.handoff.summariser import ModelSummariser
from services.memory.notes.domain import NotesDomain
from services.memory.notes.proposals import NoteProposalsDomain
from services.memory.notes.proposals_repository import NoteProposalsRepository
from services.memory.notes.recall import NoteIndexes
from services.memory.notes.reembed import reembed
from services.memory.notes.repository import NotesRepository
from services.memory.pages.domain import PagesDomain
from services.memory.pages.repository import PagesRepository
from services.memory.pages.servicer import PagesServicer
from services.memory.personal.domain import PersonalSettingsDomain
from services.memory.personal.repository import PersonalSettingsRepository
from services.memory.projects.domain import ProjectsDomain
from services.memory.projects.models import MemoryAuditEvent
from services.memory.projects.repository import ProjectsRepository
from services.memory.projects.servicer import ProjectsServicer
from services.memory.servicer import MemoryServicer
from services.memory.settings import MemorySettings
from services.shared.audit import AuditLog
from services.shared.bootstrap import Closer, RunningService, open_database, open_wakeups, start_service
from services.shared.completion import ModelCompleter
from services.shared.db import session_factory
from services.shared.embeddings import load_embedder
from services.shared.rebuild import Background
from switchboard.memory.v1 import (
    handoff_service_pb2,
    handoff_service_pb2_grpc,
    memory_service_pb2,
    memory_service_pb2_grpc,
    pages_service_pb2,
    pages_service_pb2_grpc,
    projects_service_pb2,
    projects_service_pb2_grpc,
)

MIGRATIONS = Path(__file__).parent / "migrations"
SERVICE_NAME = memory_service_pb2.DESCRIPTOR.services_by_name["MemoryService"].full_name
PAGES_SERVICE_NAME = pages_service_pb2.DESCRIPTOR.services_by_name["PagesService"].full_name
HANDOFF_SERVICE_NAME = handoff_service_pb2.DESCRIPTOR.services_by_name["HandoffService"].full_name
PROJECTS_SERVICE_NAME = projects_service_pb2.DESCRIPTOR.services_by_name["ProjectsService"].full_name


@dataclass(frozen=True)
class Servicers:
    """The memory service's gRPC services, over one database engine."""

    memory: MemoryServicer
    pages: PagesServicer
    handoff: HandoffServicer
    projects: ProjectsServicer


async def open_servicers(settings: MemorySettings) -> tuple[Servicers, list[Closer]]:
    # The model loads once per process, off the event loop, before the
    # database: a missing or corrupt model file stops the start-up here.
    embedder = await asyncio.to_thread(load_embedder, settings.embedder.value, settings.embedder_model_dir)
    engine = await open_database(settings, MIGRATIONS)
    sessions = session_factory(engine)
    notes_repository = NotesRepository(sessions)
    contexts = ContextRepository(sessions)
    personal = PersonalSettingsRepository(sessions)
    closers: list[Closer] = [engine.dispose]
    if settings.reembed_at_startup:
        background = Background(f"memory reembed ({embedder.name})")
        background.start(lambda progress: reembed(notes_repository, embedder, progress))
        closers.append(background.close)
    projects = ProjectsDomain(ProjectsRepository(sessions))
    notes = NotesDomain(
        notes_repository,
        NoteIndexes(
            notes_repository,
            embedder,
            settings.recall_min_cosine,
            cache_bytes=settings.recall_cache_mb * 2**20,
        ),
        settings.max_note_chars,
        projects,
        settings.duplicate_cosine,
        settings.max_project_note_chars,
    )
    personal_settings = PersonalSettingsDomain(personal)
    contexts_domain = ContextDomain(contexts, notes, settings.max_context_chars)
    wakeups = open_wakeups(settings, engine)
    closers.append(wakeups.close)
    live = LiveStateDomain(contexts, projects, settings.live_default_ttl, settings.live_max_ttl, wakeups)
    pages_domain = PagesDomain(
        PagesRepository(sessions),
        personal,
        settings.max_page_chars,
        settings.max_pending_proposals,
        projects,
    )
    summary_model = settings.summary_model
    summariser = ModelSummariser(ModelCompleter(summary_model, os.environ)) if summary_model else None
    if summariser is not None:
        closers.append(summariser.close)
    handoff_domain = HandoffDomain(
        HandoffRepository(sessions),
        RuleSummariser(),
        settings.handoff_checkpoint_every,
        model=summariser,
        model_timeout=settings.summary_model_timeout,
    )
    servicer = MemoryServicer(
        personal_settings,
        notes,
        contexts_domain,
        live,
        ChatContextDomain(
            notes, personal_settings, pages_domain.instructions, contexts_domain, live, handoff_domain
        ),
        NoteProposalsDomain(NoteProposalsRepository(sessions), notes, settings.max_pending_proposals),
    )
    pages = PagesServicer(pages_domain)
    handoff = HandoffServicer(handoff_domain)
    projects_servicer = ProjectsServicer(projects, AuditLog(MemoryAuditEvent, sessions))
    return Servicers(servicer, pages, handoff, projects_servicer), closers


async def open_servicer(settings: MemorySettings) -> tuple[MemoryServicer, list[Closer]]:
    """MemoryService alone (the engine's in-process collaborators use it)."""
    servicers, closers = await open_servicers(settings)
    return servicers.memory, closers


async def build_server(settings: MemorySettings) -> RunningService:
    servicers, closers = await open_servicers(settings)

    def register(server: grpc.aio.Server) -> Sequence[str]:
        memory_service_pb2_grpc.add_MemoryServiceServicer_to_server(servicers.memory, server)
        pages_service_pb2_grpc.add_PagesServiceServicer_to_server(servicers.pages, server)
        handoff_service_pb2_grpc.add_HandoffServiceServicer_to_server(servicers.handoff, server)
        projects_service_pb2_grpc.add_ProjectsServiceServicer_to_server(servicers.projects, server)
        return [SERVICE_NAME, PAGES_SERVICE_NAME, HANDOFF_SERVICE_NAME, PROJECTS_SERVICE_NAME]

    return await start_service(settings, register, closers)
