"""OpenTelemetry set-up, the same in every process: a tracer provider named
after the service exporting over OTLP, and the maintained gRPC interceptors
(W3C trace context in gRPC metadata). Without an OTLP endpoint tracing stays
off entirely: spans nobody receives would only cost CPU on every call."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import Any

import grpc
from opentelemetry import trace
from opentelemetry.instrumentation.grpc import aio_client_interceptors, aio_server_interceptor, filters
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from services.shared.handlers import rewrap

_provider: TracerProvider | None = None


def setup_telemetry(service_name: str, otlp_endpoint: str) -> bool:
    """Installs the global tracer provider once per process, if an endpoint
    is configured. Returns whether tracing is on."""
    global _provider
    if _provider is None and otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider = TracerProvider(resource=Resource.create({"service.name": f"switchboard-{service_name}"}))
        exporter = OTLPSpanExporter(endpoint=otlp_endpoint, insecure=True)
        provider.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        _provider = provider
    return tracing_enabled()


def tracing_enabled() -> bool:
    return _provider is not None


def flush_telemetry() -> None:
    """Exports the spans still pending (blocking, a few seconds at most)."""
    if _provider is not None:
        _provider.force_flush(timeout_millis=5000)


def shutdown_telemetry() -> None:
    """Flushes pending spans; called last on shutdown."""
    if _provider is not None:
        _provider.shutdown()


def setup_logging(level: str, service_name: str) -> None:
    logging.basicConfig(
        level=level.upper(),
        format=f"%(asctime)s %(levelname)s {service_name} %(name)s: %(message)s",
    )


# Health checks are polled constantly and would drown the runs' traces.
_NOT_HEALTH = filters.negate(filters.health_check())


def server_interceptors() -> list[Any]:
    if not tracing_enabled():
        return []
    return [aio_server_interceptor(filter_=_NOT_HEALTH)]  # type: ignore[no-untyped-call]


class StreamClosingInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Outermost, before the tracing interceptor: runs a streaming handler's
    response generator from a coroutine that writes each response with
    ``context.write()``.

    grpc.aio drives a response generator itself, and when the call ends
    while a response is being sent (the client cancels, or reads too slowly
    and then leaves) it drops the generator suspended at its ``yield``; the
    garbage collector closes it later, from another task's context, where
    the tracing interceptor cannot detach the span context it attached
    ("Failed to detach context", with a traceback, for each such call), and
    the handlers' ``finally`` blocks run late. Here the cancellation reaches
    this coroutine, which closes the generators in the call's own task."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        return rewrap(handler, _writing)


def _writing(kind: str, behavior: Callable[..., Any]) -> Callable[..., Any]:
    """A response generator turned into a coroutine that writes each response."""
    if not (kind.endswith("_stream") and inspect.isasyncgenfunction(behavior)):
        return behavior

    async def write_all(request: Any, context: grpc.aio.ServicerContext) -> None:
        async with aclosing(behavior(request, context)) as responses:
            async for response in responses:
                await context.write(response)

    return write_all


def client_interceptors() -> list[Any]:
    if not tracing_enabled():
        return []
    return list(aio_client_interceptors(filter_=_NOT_HEALTH))  # type: ignore[no-untyped-call]
