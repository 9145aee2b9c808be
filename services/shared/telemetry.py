"""OpenTelemetry set-up, the same in every process: a tracer provider named
after the service exporting over OTLP, and the maintained gRPC interceptors
(W3C trace context in gRPC metadata). Without an OTLP endpoint tracing stays
off entirely: spans nobody receives would only cost CPU on every call."""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry import trace
from opentelemetry.instrumentation.grpc import aio_client_interceptors, aio_server_interceptor, filters
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

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


def client_interceptors() -> list[Any]:
    if not tracing_enabled():
        return []
    return list(aio_client_interceptors(filter_=_NOT_HEALTH))  # type: ignore[no-untyped-call]
