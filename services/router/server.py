"""The router service: its servicer over its database and skill index, and
the server."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from services.router.arbiter import ModelArbiter
from services.router.domain import RouterDomain
from services.router.repository import RouterRepository
from services.router.servicer import RouterServicer
from services.router.settings import RouterSettings
from services.router.skill_router import Arbiter, SkillIndex, Thresholds
from services.shared.bootstrap import Closer, RunningService, open_database, registrar, start_service
from services.shared.completion import ModelCompleter
from services.shared.db import session_factory
from services.shared.embeddings import load_embedder
from switchboard.router.v1 import router_service_pb2, router_service_pb2_grpc

MIGRATIONS = Path(__file__).parent / "migrations"
SERVICE_NAME = router_service_pb2.DESCRIPTOR.services_by_name["RouterService"].full_name


def configured_arbiter(settings: RouterSettings) -> ModelArbiter | None:
    model = settings.arbiter_model
    return ModelArbiter(ModelCompleter(model, os.environ), settings.arbiter_timeout) if model else None


async def open_domain(
    settings: RouterSettings, arbiter: Arbiter | None = None
) -> tuple[RouterDomain, list[Closer]]:
    """The domain, with the catalog indexed before the first call: from the
    stored vectors of the configured embedder, embedding the few missing on
    the spot, or lexical only until the (background) reindex when many are."""
    # Before the database: a missing or corrupt model file stops the start-up here.
    embedder = await asyncio.to_thread(load_embedder, settings.embedder.value, settings.embedder_model_dir)
    engine = await open_database(settings, MIGRATIONS)
    model_arbiter = configured_arbiter(settings)
    domain = RouterDomain(
        RouterRepository(session_factory(engine)),
        SkillIndex(embedder),
        Thresholds(settings.high_threshold, settings.low_threshold, settings.max_auto_skills),
        settings.models,
        arbiter=arbiter or model_arbiter,
        arbitration_enabled=settings.arbitration_enabled,
        reindex_in_background=settings.reindex_in_background,
    )
    closers: list[Closer] = [engine.dispose, domain.close]
    if model_arbiter is not None:
        closers.append(model_arbiter.close)
    await domain.current_index()
    return domain, closers


async def open_servicer(
    settings: RouterSettings, arbiter: Arbiter | None = None
) -> tuple[RouterServicer, list[Closer]]:
    """The servicer. ``arbiter`` decides the grey zone (by default the
    configured arbiter model; without one, the midpoint decides)."""
    domain, closers = await open_domain(settings, arbiter)
    return RouterServicer(domain), closers


async def build_server(settings: RouterSettings, arbiter: Arbiter | None = None) -> RunningService:
    servicer, closers = await open_servicer(settings, arbiter)
    add = router_service_pb2_grpc.add_RouterServiceServicer_to_server
    return await start_service(settings, registrar(add, servicer, SERVICE_NAME), closers)
