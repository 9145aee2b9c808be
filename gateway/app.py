"""create_app(settings): the gateway's ASGI application."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, Response
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from prometheus_fastapi_instrumentator import Instrumentator
from starlette.exceptions import HTTPException as StarletteHTTPException

from gateway import errors
from gateway.api import router
from gateway.limits import BodySizeLimit
from gateway.settings import GatewaySettings
from services.shared.clients import open_channel
from services.shared.telemetry import tracing_enabled
from switchboard.engine.v1 import engine_service_pb2_grpc
from switchboard.threads.v1 import threads_service_pb2_grpc

STATIC = Path(__file__).parent / "static"


def create_app(settings: GatewaySettings) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # One channel per service for the process's life.
        engine_channel = open_channel(settings.engine_address)
        threads_channel = open_channel(settings.threads_address)
        app.state.engine = engine_service_pb2_grpc.EngineServiceStub(engine_channel)
        app.state.threads = threads_service_pb2_grpc.ThreadsServiceStub(threads_channel)
        try:
            yield
        finally:
            await engine_channel.close()
            await threads_channel.close()

    app = FastAPI(
        title="Switchboard gateway",
        version="0.1.0",
        summary="HTTP + Server-Sent Events API of Switchboard's agent runs",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.tokens = settings.token_map()
    app.state.dev_user = settings.dev_user
    app.include_router(router)
    app.add_exception_handler(errors.ApiError, errors.api_error_handler)
    app.add_exception_handler(grpc.aio.AioRpcError, errors.rpc_error_handler)
    app.add_exception_handler(RequestValidationError, errors.validation_error_handler)
    app.add_exception_handler(StarletteHTTPException, errors.http_error_handler)
    app.add_exception_handler(Exception, errors.unexpected_error_handler)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> Response:
        return Response(status_code=204)  # no icon; spares the browser a 404

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    if settings.metrics_enabled:
        # http_requests_total, http_request_duration_seconds... by route
        # template (never by raw path: ids would explode the series).
        instrumentator = Instrumentator(excluded_handlers=["/healthz", "/metrics"])
        instrumentator.instrument(app).expose(app, include_in_schema=False)
    if tracing_enabled():
        FastAPIInstrumentor.instrument_app(app, excluded_urls="healthz,metrics")
    return app
