"""The threads service: its servicer over its database, and the server."""

from __future__ import annotations

from pathlib import Path

from services.shared.bootstrap import Closer, RunningService, open_database, registrar, start_service
from services.shared.db import session_factory
from services.threads.domain import ThreadsDomain
from services.threads.repository import ThreadsRepository
from services.threads.servicer import ThreadsServicer
from services.threads.sessions import ProviderSessions
from services.threads.settings import ThreadsSettings
from switchboard.threads.v1 import threads_service_pb2, threads_service_pb2_grpc

MIGRATIONS = Path(__file__).parent / "migrations"
SERVICE_NAME = threads_service_pb2.DESCRIPTOR.services_by_name["ThreadsService"].full_name


async def open_servicer(settings: ThreadsSettings) -> tuple[ThreadsServicer, list[Closer]]:
    engine = await open_database(settings, MIGRATIONS)
    repository = ThreadsRepository(session_factory(engine))
    domain = ThreadsDomain(repository, settings.max_entry_chars)
    return ThreadsServicer(domain, ProviderSessions(repository)), [engine.dispose]


async def build_server(settings: ThreadsSettings) -> RunningService:
    servicer, closers = await open_servicer(settings)
    add = threads_service_pb2_grpc.add_ThreadsServiceServicer_to_server
    return await start_service(settings, registrar(add, servicer, SERVICE_NAME), closers)
