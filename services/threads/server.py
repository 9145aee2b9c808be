"""build_server(settings): the threads service, started and serving."""

from __future__ import annotations

from pathlib import Path

import grpc

from services.shared.bootstrap import RunningService, start_service
from services.shared.db import create_engine, session_factory
from services.shared.migrations import upgrade_to_head
from services.threads.domain import ThreadsDomain
from services.threads.repository import ThreadsRepository
from services.threads.servicer import ThreadsServicer
from services.threads.settings import ThreadsSettings
from switchboard.threads.v1 import threads_service_pb2, threads_service_pb2_grpc

MIGRATIONS = Path(__file__).parent / "migrations"
SERVICE_NAME = threads_service_pb2.DESCRIPTOR.services_by_name["ThreadsService"].full_name


async def build_server(settings: ThreadsSettings) -> RunningService:
    engine = create_engine(settings.effective_database_url)
    if settings.migrate_on_start:
        await upgrade_to_head(engine, MIGRATIONS, settings.service_name)
    domain = ThreadsDomain(ThreadsRepository(session_factory(engine)), settings.max_entry_chars)

    def register(server: grpc.aio.Server) -> list[str]:
        threads_service_pb2_grpc.add_ThreadsServiceServicer_to_server(ThreadsServicer(domain), server)
        return [SERVICE_NAME]

    return await start_service(settings, register, closers=[engine.dispose])
