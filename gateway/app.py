"""create_app(settings): the gateway's ASGI application."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated

import grpc
from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from prometheus_fastapi_instrumentator import Instrumentator
from starlette.exceptions import HTTPException as StarletteHTTPException

from gateway import (
    agents,
    api,
    audit,
    catalog,
    errors,
    mcp_server,
    metrics,
    note_proposals,
    notes,
    pages,
    personal,
    project,
    projects,
    schedules,
    trace_redaction,
    webhooks,
)
from gateway.a2a import grpc_binding as a2a_grpc
from gateway.a2a import routes as a2a_routes
from gateway.agui import routes as agui_routes
from gateway.auth import COOKIE, Authenticator
from gateway.limits import BodySizeLimit
from gateway.openai_compat import conversations_api, responses_api
from gateway.openai_compat import routes as openai_routes
from gateway.settings import LAUNCH_ID_HEADER, GatewaySettings
from gateway.tokens import TokenFile
from services.shared.clients import open_channel
from services.shared.identity_tokens import configure as configure_identity
from services.shared.telemetry import flush_telemetry, tracing_enabled
from switchboard.engine.v1 import engine_service_pb2_grpc, schedules_service_pb2_grpc
from switchboard.memory.v1 import memory_service_pb2_grpc, pages_service_pb2_grpc, projects_service_pb2_grpc
from switchboard.router.v1 import router_service_pb2_grpc
from switchboard.threads.v1 import threads_service_pb2_grpc

STATIC = Path(__file__).parent / "static"


def create_app(settings: GatewaySettings) -> FastAPI:
    # The identity tokens its calls to the services carry (IdentityKeyError without a key).
    configure_identity(settings.identity_tokens())
    credentials = settings.channel_credentials()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # One channel per service for the process's life.
        channels = {
            name: open_channel(address, credentials)
            for name, address in (
                ("engine", settings.engine_address),
                ("threads", settings.threads_address),
                ("memory", settings.memory_address),
                ("router", settings.router_address),
            )
        }
        app.state.engine = engine_service_pb2_grpc.EngineServiceStub(channels["engine"])
        app.state.schedules = schedules_service_pb2_grpc.ScheduleServiceStub(channels["engine"])
        app.state.threads = threads_service_pb2_grpc.ThreadsServiceStub(channels["threads"])
        app.state.memory = memory_service_pb2_grpc.MemoryServiceStub(channels["memory"])
        app.state.pages = pages_service_pb2_grpc.PagesServiceStub(channels["memory"])
        app.state.projects = projects_service_pb2_grpc.ProjectsServiceStub(channels["memory"])
        app.state.router = router_service_pb2_grpc.RouterServiceStub(channels["router"])
        if settings.metrics_enabled:
            metrics.watch_event_loop(asyncio.get_running_loop())
        a2a_server = await a2a_grpc.start(app.state, settings, app.state.auth)
        try:
            async with app.state.mcp.running():
                yield
        finally:
            if a2a_server is not None:
                await a2a_server.stop(grace=5)
            for channel in channels.values():
                await channel.close()
            # Now, not at exit: uvicorn ends the process by raising the
            # SIGTERM it caught again, so no exit handler runs after this.
            await asyncio.to_thread(flush_telemetry)

    app = FastAPI(
        title="Switchboard gateway",
        version="0.1.0",
        summary="HTTP + Server-Sent Events API of Switchboard's agent runs",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.auth = Authenticator(
        settings.token_map(),
        TokenFile(settings.tokens_file) if settings.tokens_file is not None else None,
        settings.dev_user,
        settings.dev_role,
    )
    app.state.sources = catalog.EngineSources()
    # Tasks that must outlive their request (CancelRun after a client left).
    app.state.background = set()
    for module in (
        api,
        personal,
        pages,
        catalog,
        agents,
        project,
        projects,
        notes,
        note_proposals,
        schedules,
        webhooks,
        responses_api,  # before openai_routes, whose last route refuses every other /v1 URL
        conversations_api,
        openai_routes,
        agui_routes,
        a2a_routes,
        audit,
    ):
        app.include_router(module.router)
    app.add_exception_handler(errors.ApiError, errors.api_error_handler)
    app.add_exception_handler(grpc.aio.AioRpcError, errors.rpc_error_handler)
    app.add_exception_handler(RequestValidationError, errors.validation_error_handler)
    app.add_exception_handler(StarletteHTTPException, errors.http_error_handler)
    app.add_exception_handler(Exception, errors.unexpected_error_handler)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    # MCP over Streamable HTTP; its tools call the API above in-process.
    app.state.mcp = mcp_server.McpEndpoint(app, app.state.auth, settings.run_stream_timeout)
    app.router.add_route("/mcp", app.state.mcp, include_in_schema=False)

    @app.get("/healthz", include_in_schema=False)
    async def healthz(response: Response) -> dict[str, str]:
        if settings.launch_id:
            response.headers[LAUNCH_ID_HEADER] = settings.launch_id
        return {"status": "ok"}

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> Response:
        return Response(status_code=204)  # no icon; spares the browser a 404

    @app.get("/", include_in_schema=False, response_model=None)
    async def index(
        request: Request, token: Annotated[str, Query(max_length=512)] = ""
    ) -> FileResponse | RedirectResponse:
        """`/?token=...` (the link the local launcher prints) keeps a valid
        token in a SameSite=Strict, HttpOnly cookie and drops it from the
        address bar; the page's own requests then carry it."""
        if not token:
            return FileResponse(STATIC / "index.html")
        auth: Authenticator = request.app.state.auth
        if auth.enabled and auth.user_for(token) is None:
            raise errors.ApiError(401, "UNAUTHENTICATED", "this token is not valid")
        redirect = RedirectResponse("/", status_code=303)
        redirect.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
        return redirect

    # The page's scripts and styles (plain files, no build step); nothing
    # secret, so no token is needed for them.
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    if settings.metrics_enabled:
        # http_requests_total, http_request_duration_seconds... by route
        # template (never by raw path: ids would explode the series).
        instrumentator = Instrumentator(excluded_handlers=["/healthz", "/metrics"])
        instrumentator.instrument(app).expose(app, include_in_schema=False)
    if tracing_enabled():
        # No span per ASGI receive and send: an SSE stream would make one per
        # event written, which costs more than the rest of the request's trace.
        FastAPIInstrumentor.instrument_app(
            app,
            excluded_urls="healthz,metrics",
            exclude_spans=["receive", "send"],
            server_request_hook=trace_redaction.redact_request_span,
        )
    return app
