"""The memory service: its servicer over its database, and the server."""

from __future__ import annotations

from pathlib import Path

from services.memory.domain import MemoryDomain
from services.memory.repository import MemoryRepository
from services.memory.servicer import MemoryServicer
from services.memory.settings import MemorySettings
from services.shared.bootstrap import Closer, RunningService, open_database, registrar, start_service
from services.shared.db import session_factory
from switchboard.memory.v1 import memory_service_pb2, memory_service_pb2_grpc

MIGRATIONS = Path(__file__).parent / "migrations"
SERVICE_NAME = memory_service_pb2.DESCRIPTOR.services_by_name["MemoryService"].full_name


async def open_servicer(settings: MemorySettings) -> tuple[MemoryServicer, list[Closer]]:
    engine = await open_database(settings, MIGRATIONS)
    domain = MemoryDomain(MemoryRepository(session_factory(engine)), settings.max_note_chars)
    return MemoryServicer(domain), [engine.dispose]


async def build_server(settings: MemorySettings) -> RunningService:
    servicer, closers = await open_servicer(settings)
    add = memory_service_pb2_grpc.add_MemoryServiceServicer_to_server
    return await start_service(settings, registrar(add, servicer, SERVICE_NAME), closers)
