"""build_server(settings): the router service, started and serving."""

from __future__ import annotations

from pathlib import Path

import grpc

from services.router.domain import RouterDomain, Thresholds
from services.router.repository import RouterRepository
from services.router.servicer import RouterServicer
from services.router.settings import RouterSettings
from services.shared.bootstrap import RunningService, start_service
from services.shared.db import create_engine, session_factory
from services.shared.migrations import upgrade_to_head
from switchboard.router.v1 import router_service_pb2, router_service_pb2_grpc

MIGRATIONS = Path(__file__).parent / "migrations"
SERVICE_NAME = router_service_pb2.DESCRIPTOR.services_by_name["RouterService"].full_name


async def build_server(settings: RouterSettings) -> RunningService:
    engine = create_engine(settings.effective_database_url)
    if settings.migrate_on_start:
        await upgrade_to_head(engine, MIGRATIONS, settings.service_name)
    domain = RouterDomain(
        RouterRepository(session_factory(engine)),
        Thresholds(settings.high_threshold, settings.low_threshold, settings.max_auto_skills),
        settings.models,
    )

    def register(server: grpc.aio.Server) -> list[str]:
        router_service_pb2_grpc.add_RouterServiceServicer_to_server(RouterServicer(domain), server)
        return [SERVICE_NAME]

    return await start_service(settings, register, closers=[engine.dispose])
