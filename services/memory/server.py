"""build_server(settings): the memory service, started and serving."""

from __future__ import annotations

from pathlib import Path

import grpc

from services.memory.domain import MemoryDomain
from services.memory.repository import MemoryRepository
from services.memory.servicer import MemoryServicer
from services.memory.settings import MemorySettings
from services.shared.bootstrap import RunningService, start_service
from services.shared.db import create_engine, session_factory
from services.shared.migrations import upgrade_to_head
from switchboard.memory.v1 import memory_service_pb2, memory_service_pb2_grpc

MIGRATIONS = Path(__file__).parent / "migrations"
SERVICE_NAME = memory_service_pb2.DESCRIPTOR.services_by_name["MemoryService"].full_name


async def build_server(settings: MemorySettings) -> RunningService:
    engine = create_engine(settings.effective_database_url)
    if settings.migrate_on_start:
        await upgrade_to_head(engine, MIGRATIONS, settings.service_name)
    domain = MemoryDomain(MemoryRepository(session_factory(engine)), settings.max_note_chars)

    def register(server: grpc.aio.Server) -> list[str]:
        memory_service_pb2_grpc.add_MemoryServiceServicer_to_server(MemoryServicer(domain), server)
        return [SERVICE_NAME]

    return await start_service(settings, register, closers=[engine.dispose])
