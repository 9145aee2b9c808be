"""build_server(settings): the engine, started and serving."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import grpc

from services.engine.collaborators import GrpcCollaborators
from services.engine.providers import LLMProvider, OfflineProvider
from services.engine.repository import RunsRepository
from services.engine.runs import RunLimits, RunService
from services.engine.servicer import EngineServicer
from services.engine.settings import EngineSettings
from services.shared.bootstrap import RunningService, start_service
from services.shared.db import create_engine, session_factory
from services.shared.migrations import upgrade_to_head
from switchboard.engine.v1 import engine_service_pb2, engine_service_pb2_grpc

MIGRATIONS = Path(__file__).parent / "migrations"
SERVICE_NAME = engine_service_pb2.DESCRIPTOR.services_by_name["EngineService"].full_name


def providers(settings: EngineSettings) -> dict[str, LLMProvider]:
    return {"offline": OfflineProvider(settings.offline_token_delay)}


def run_limits(settings: EngineSettings) -> RunLimits:
    return RunLimits(
        max_message_chars=settings.max_message_chars,
        delta_flush_seconds=settings.delta_flush_seconds,
        delta_flush_chars=settings.delta_flush_chars,
        lease_seconds=settings.lease_seconds,
    )


async def build_server(settings: EngineSettings) -> RunningService:
    engine = create_engine(settings.effective_database_url)
    if settings.migrate_on_start:
        await upgrade_to_head(engine, MIGRATIONS, settings.service_name)
    collaborators = GrpcCollaborators(
        settings.threads_address, settings.memory_address, settings.router_address, settings.call_timeout
    )
    runs = RunService(
        RunsRepository(session_factory(engine)),
        collaborators,
        providers(settings),
        run_limits(settings),
        settings.instance_id,
    )
    # Take the lease and settle what a crashed instance left running before serving.
    await runs.heartbeat()
    await runs.settle_orphans()
    maintenance = asyncio.create_task(runs.maintain())

    async def stop_runs() -> None:
        maintenance.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await maintenance
        await runs.close(settings.shutdown_grace)

    def register(server: grpc.aio.Server) -> list[str]:
        engine_service_pb2_grpc.add_EngineServiceServicer_to_server(EngineServicer(runs), server)
        return [SERVICE_NAME]

    # Closed in reverse order: runs first, then channels, then the database.
    return await start_service(settings, register, closers=[engine.dispose, collaborators.close, stop_runs])
