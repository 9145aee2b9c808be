"""OpenTelemetry set-up, the same in every process: a tracer provider named
after the service, OTLP export when an endpoint is configured, and the
maintained gRPC interceptors (W3C trace context in gRPC metadata)."""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry import trace
from opentelemetry.instrumentation.grpc import aio_client_interceptors, aio_server_interceptor, filters
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

_provider: TracerProvider | None = None


def setup_telemetry(service_name: str, otlp_endpoint: str) -> TracerProvider:
    """Installs the global tracer provider once per process."""
    global _provider
    if _provider is not None:
        return _provider
    provider = TracerProvider(resource=Resource.create({"service.name": f"switchboard-{service_name}"}))
    if otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp_endpoint, insecure=True))
        )
    trace.set_tracer_provider(provider)
    _provider = provider
    return provider


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
    return [aio_server_interceptor(filter_=_NOT_HEALTH)]  # type: ignore[no-untyped-call]


def client_interceptors() -> list[Any]:
    return list(aio_client_interceptors(filter_=_NOT_HEALTH))  # type: ignore[no-untyped-call]
