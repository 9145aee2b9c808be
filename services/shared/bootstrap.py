"""Server bootstrap shared by every service: a grpc.aio server with tracing,
metrics, error mapping, malformed-request refusal and deadline propagation,
grpc.health.v1 health, reflection; graceful shutdown on
SIGTERM (health NOT_SERVING, drain, then close databases and channels); and the
``serve`` / ``migrate`` command line of each ``python -m services.<name>``."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from sqlalchemy.ext.asyncio import AsyncEngine

from services.shared import db_retry, exit_codes
from services.shared.db import create_engine
from services.shared.deadlines import Deadlines
from services.shared.driver import Driver
from services.shared.errors import ErrorMapping
from services.shared.event_loop import run, running_loop_name
from services.shared.handlers import CallLayer, compose, written
from services.shared.identity_guard import Identity
from services.shared.identity_tokens import IdentityKeyError, configure
from services.shared.metrics import EVENT_LOOP, Metrics, serve_metrics
from services.shared.migrations import upgrade_to_head
from services.shared.request_guard import RequestGuard
from services.shared.settings import ServiceSettings
from services.shared.telemetry import server_interceptors, setup_logging, setup_telemetry, shutdown_telemetry
from services.shared.wakeups import Wakeups

log = logging.getLogger(__name__)

Closer = Callable[[], Awaitable[None]]
# Given the grace period, finishes in-flight work (runs) within it.
Drainer = Callable[[float | None], Awaitable[None]]
S = TypeVar("S", bound=ServiceSettings)
# Largest request message a service accepts (gRPC's default, stated here):
# beyond it gRPC answers RESOURCE_EXHAUSTED before any handler runs.
MAX_REQUEST_BYTES = 4 * 1024 * 1024


@dataclass
class RunningService:
    server: grpc.aio.Server
    port: int
    health: health.aio.HealthServicer
    closers: list[Closer] = field(default_factory=list)
    drainers: list[Drainer] = field(default_factory=list)
    # The plaintext health-only server, when health_port is set.
    probe_server: grpc.aio.Server | None = None

    async def stop(self, grace: float | None) -> None:
        """Health NOT_SERVING first so load balancers stop sending, then let
        in-flight calls and work finish within one ``grace`` (concurrently, so
        shutdown never takes longer), then release resources."""
        await self.health.enter_graceful_shutdown()
        probes = [] if self.probe_server is None else [self.probe_server.stop(grace)]
        await asyncio.gather(self.server.stop(grace), *probes, *(drain(grace) for drain in self.drainers))
        for close in reversed(self.closers):
            await close()


class MethodHandlerCache(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """The server's one interceptor: a method's handler is built once, on its
    first call, and every later call of that method gets it, instead of new
    closures and handler objects per call. What it builds: the ``layers``
    (services.shared.handlers.compose: metrics, error mapping, identity, the
    request guard, deadlines: each reads the call's metadata inside the
    handler, from its context) folded into one behavior, inside the
    ``interceptors`` (tracing: its span covers the whole call; its wrapping
    depends on the method alone, so it too is built once), with a
    response stream written from a coroutine in the call's own task.

    That last part matters with tracing on: grpc.aio drives a response
    generator itself, and when the call ends while a response is being sent
    (the client cancels, or reads too slowly and then leaves) it drops the
    generator suspended at its ``yield``; the garbage collector closes it
    later, from another task's context, where the tracing interceptor cannot
    detach the span context it attached ("Failed to detach context", with a
    traceback, for each such call), and the handlers' ``finally`` blocks run
    late. Written from a coroutine, the cancellation reaches that coroutine,
    which closes the generators in the call's own task.

    Methods that do not exist are not cached (a client could name any
    number of them)."""

    def __init__(
        self, interceptors: Sequence[grpc.aio.ServerInterceptor] = (), layers: Sequence[CallLayer] = ()
    ) -> None:
        self._interceptors = list(interceptors)
        self._layers = list(layers)
        self._handlers: dict[str, grpc.RpcMethodHandler] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        method = handler_call_details.method
        handler = self._handlers.get(method)
        if handler is None:
            handler = await self._build(continuation, handler_call_details)
            if handler is not None:
                self._handlers[method] = handler
        return handler

    async def _build(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        # Without an interceptor between them, the layers' behavior writes the stream itself.
        writes = not self._interceptors

        async def composed(inner: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
            handler = await continuation(inner)
            return None if handler is None else compose(handler, inner.method, self._layers, writes)

        handler = await self._chain(0, composed, details)
        return None if handler is None else written(handler)

    async def _chain(
        self,
        index: int,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        if index == len(self._interceptors):
            return await continuation(details)
        return await self._interceptors[index].intercept_service(
            lambda inner: self._chain(index + 1, continuation, inner), details
        )


def server_layers() -> list[CallLayer]:
    """Every service's per-call concerns, outermost first. The request guard
    inside metrics, so a refused request is counted INVALID_ARGUMENT; the
    identity check before it, so an unknown caller learns nothing about its
    request."""
    return [Metrics(), ErrorMapping(), Identity(), RequestGuard(), Deadlines()]


class CannotListen(RuntimeError):
    """An address the service must listen on cannot be bound."""


@contextmanager
def _listening(address: str, what: str = "") -> Iterator[None]:
    """A failure to bind ``address`` (gRPC's RuntimeError "Failed to bind to
    address", the metrics server's OSError) as CannotListen, naming it."""
    try:
        yield
    except (RuntimeError, OSError) as error:
        purpose = f" ({what})" if what else ""
        raise CannotListen(f"cannot listen on {address}{purpose}: {error}") from error


async def start_service(
    settings: ServiceSettings,
    register: Callable[[grpc.aio.Server], Sequence[str]],
    closers: Sequence[Closer] = (),
    drainers: Sequence[Drainer] = (),
) -> RunningService:
    """Builds and starts the server; ``register`` adds the servicers and returns
    their full service names (for health and reflection). The process's
    identity tokens come from ``settings``: IdentityKeyError without a key."""
    configure(settings.identity_tokens())
    credentials = settings.server_credentials()
    server = grpc.aio.server(
        interceptors=[MethodHandlerCache(server_interceptors(), server_layers())],
        options=[("grpc.so_reuseport", 0), ("grpc.max_receive_message_length", MAX_REQUEST_BYTES)],
    )
    names = list(register(server))
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        [*names, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME], server
    )
    with _listening(settings.address):
        if credentials is None:
            port = server.add_insecure_port(settings.address)
        else:
            port = server.add_secure_port(settings.address, credentials)
    await server.start()
    probe_server = await _start_probe_server(settings, health_servicer)
    for name in ["", *names]:
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    loop_name = running_loop_name()
    EVENT_LOOP.labels(loop_name).set(1)
    log.info(
        "%s serving on %s:%d (%s, %s event loop)",
        settings.service_name,
        settings.host,
        port,
        "plaintext" if credentials is None else "TLS",
        loop_name,
    )
    return RunningService(server, port, health_servicer, list(closers), list(drainers), probe_server)


async def _start_probe_server(
    settings: ServiceSettings, health_servicer: health.aio.HealthServicer
) -> grpc.aio.Server | None:
    """The same health statuses on a plaintext port of their own: nothing
    else is served there, so it needs neither TLS nor an identity."""
    if not settings.health_port:
        return None
    probe_server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, probe_server)
    address = f"{settings.host}:{settings.health_port}"
    with _listening(address, "health probes"):
        probe_server.add_insecure_port(address)
    await probe_server.start()
    return probe_server


async def open_database(settings: ServiceSettings, migrations_dir: Path) -> AsyncEngine:
    """The service's engine, migrated to the newest revision unless a separate
    migration job owns that (``migrate_on_start=false``)."""
    db_retry.configure(settings.database_retry_seconds)
    engine = service_engine(settings)
    if settings.migrate_on_start:
        await upgrade_to_head(engine, migrations_dir, settings.service_name)
    return engine


def open_wakeups(settings: ServiceSettings, engine: AsyncEngine) -> Wakeups:
    """The process's wake-ups over the service's database: its listener (on
    PostgreSQL) connects on the first subscription, to ``database_listen_url``
    or else the database URL."""
    return Wakeups(
        settings.safety_poll_seconds,
        Driver(engine),
        settings.database_listen_url or settings.effective_database_url,
        push=settings.push_wakeups,
        name=settings.service_name,
    )


def registrar(
    add: Callable[[Any, grpc.aio.Server], None], servicer: object, service_name: str
) -> Callable[[grpc.aio.Server], Sequence[str]]:
    """The ``register`` argument of start_service for one generated servicer."""

    def register(server: grpc.aio.Server) -> Sequence[str]:
        add(servicer, server)
        return [service_name]

    return register


def service_engine(settings: ServiceSettings) -> AsyncEngine:
    """The engine of the service's database, as its settings describe it."""
    return create_engine(
        settings.effective_database_url, prepared_statements=settings.database_prepared_statements
    )


async def migrate(settings: ServiceSettings, migrations_dir: Path) -> None:
    engine = service_engine(settings)
    try:
        await upgrade_to_head(engine, migrations_dir, settings.service_name)
    finally:
        await engine.dispose()


async def _serve(settings: S, build: Callable[[S], Awaitable[RunningService]]) -> None:
    service = await build(settings)
    # What start-up built (modules, servicers, caches, an embedder) lives until
    # exit: collected once, then moved out of the collector's generations, so
    # the collections that runs' garbage triggers stop traversing it.
    gc.collect()
    gc.freeze()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("%s shutting down (grace %.1fs)", settings.service_name, settings.shutdown_grace)
    await service.stop(settings.shutdown_grace)
    shutdown_telemetry()


def main(
    settings_type: type[S], build: Callable[[S], Awaitable[RunningService]], migrations_dir: Path
) -> None:
    """``python -m services.<name> [serve|migrate]``."""
    settings = settings_type()
    parser = argparse.ArgumentParser(prog=f"python -m services.{settings.service_name}")
    parser.add_argument("command", nargs="?", default="serve", choices=["serve", "migrate"])
    args = parser.parse_args()
    setup_logging(settings.log_level, settings.service_name)
    if args.command == "serve":
        try:
            settings.identity_tokens()  # fail fast, before opening anything
        except IdentityKeyError as error:
            print(f"{settings.service_name} cannot start: {error}", file=sys.stderr)
            sys.exit(exit_codes.BAD_IDENTITY_KEY)
    if args.command == "migrate":
        run(migrate(settings, migrations_dir), settings.event_loop)
        log.info("%s database at the newest revision", settings.service_name)
        return
    setup_telemetry(settings.service_name, settings.otlp_endpoint)
    try:
        with _listening(f"{settings.host}:{settings.metrics_port}", "metrics"):
            serve_metrics(settings.host, settings.metrics_port)
        run(_serve(settings, build), settings.event_loop)
    except CannotListen as error:
        print(f"{settings.service_name} cannot start: {error}", file=sys.stderr)
        sys.exit(exit_codes.CANNOT_LISTEN)
