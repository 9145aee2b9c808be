"""Prometheus metrics, the same in every gRPC service, with the conventional
names of go-grpc-prometheus (what existing Grafana dashboards expect):

* ``grpc_server_started_total``, ``grpc_server_handled_total`` (by code) and
  ``grpc_server_handling_seconds`` for every method, labelled by type,
  service and method;
* the engine adds ``switchboard_runs_total`` / ``switchboard_run_duration_seconds``
  by status, ``switchboard_run_refusals_total`` by quota reason and
  ``switchboard_llm_tokens_total`` by provider, model and type;
* database retries (services/shared/db_retry.py): ``switchboard_db_retries_total``,
  each attempt made again after a connection failure, and
  ``switchboard_db_retry_outcomes_total`` by outcome, how each unit of work
  that met one ended;
* ``switchboard_event_loop_info{loop}``, 1 for the event loop the process
  serves on (``uvloop`` or ``asyncio``, services/shared/event_loop.py).

Labels never hold a user, run or conversation id: their number would grow
without bound. A trace id rides along instead as an exemplar (the
``trace_id`` of the call or run observed, when it is traced), which
Prometheus keeps when it scrapes the OpenMetrics format and Grafana links to
the trace in Jaeger. Each process serves its own /metrics on ``metrics_port``
(0, the default, serves none)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc
from opentelemetry import trace
from prometheus_client import Counter, Gauge, Histogram, start_http_server

from services.shared.handlers import Around, CallLayer
from services.shared.telemetry import tracing_enabled

GRPC_STARTED = Counter(
    "grpc_server_started_total",
    "RPCs started on the server.",
    ["grpc_type", "grpc_service", "grpc_method"],
)
GRPC_HANDLED = Counter(
    "grpc_server_handled_total",
    "RPCs completed on the server, by status code.",
    ["grpc_type", "grpc_service", "grpc_method", "grpc_code"],
)
GRPC_SECONDS = Histogram(
    "grpc_server_handling_seconds",
    "Time from the start of an RPC to its completion (a whole stream for streaming RPCs).",
    ["grpc_type", "grpc_service", "grpc_method"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)

RUNS = Counter("switchboard_runs_total", "Runs finished, by final status.", ["status"])
RUN_SECONDS = Histogram(
    "switchboard_run_duration_seconds",
    "Run duration from record to settlement, by final status.",
    ["status"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900),
)
SCHEDULE_TICKS = Counter(
    "switchboard_schedule_ticks_total",
    "Schedule ticks claimed by this engine, by outcome: started (its run began), "
    "missed (no engine ran it within the grace), failed (its run could not start).",
    ["outcome"],
)
RETENTION_PRUNED = Counter(
    "switchboard_retention_pruned_total",
    "Records deleted by retention: runs, run_events, conversations.",
    ["kind"],
)
RUN_REFUSALS = Counter(
    "switchboard_run_refusals_total",
    "Runs refused by the per-user run quotas, by ErrorInfo reason.",
    ["reason"],
)
LLM_TOKENS = Counter(
    "switchboard_llm_tokens_total",
    "Tokens sent to (input) and received from (output) LLM providers.",
    ["provider", "model", "type"],
)

DB_RETRIES = Counter(
    "switchboard_db_retries_total",
    "Database units of work run again after their connection failed.",
)
DB_RETRY_OUTCOMES = Counter(
    "switchboard_db_retry_outcomes_total",
    "Database units of work whose connection failed, by how they ended: recovered "
    "(a later attempt succeeded), gave_up (the retry time or the call's deadline ran out) "
    "or failed (a later attempt failed otherwise).",
    ["outcome"],
)
# Every outcome is exported from the start, at 0: a dashboard's rate() then
# has a series before the first failure instead of "no data".
for _outcome in ("recovered", "gave_up", "failed"):
    DB_RETRY_OUTCOMES.labels(_outcome)

WAKEUP_LISTENER_UP = Gauge(
    "switchboard_wakeup_listener_up",
    "1 while the process's PostgreSQL wake-up listener is connected, 0 while it reconnects "
    "(waiters then rely on the safety poll).",
    ["service"],
)
WAKEUP_LISTENER_CONNECTS = Counter(
    "switchboard_wakeup_listener_connects_total",
    "Connections the wake-up listener made: the first, then one per reconnection.",
    ["service"],
)

EVENT_LOOP = Gauge(
    "switchboard_event_loop_info",
    "1 for the event loop this process serves on: uvloop or asyncio.",
    ["loop"],
)


def trace_exemplar() -> dict[str, str] | None:
    """The exemplar of an observation made inside a sampled span: its trace
    id, as Grafana's Prometheus data source expects it (``trace_id``)."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid or not context.trace_flags.sampled:
        return None
    return {"trace_id": trace.format_trace_id(context.trace_id)}


def serve_metrics(host: str, port: int) -> None:
    """Serves /metrics over HTTP on a thread of its own (prometheus_client)."""
    if port:
        start_http_server(port, addr=host)


# go-grpc-prometheus's grpc_type label of each handler kind.
_TYPES = {
    "unary_unary": "unary",
    "unary_stream": "server_stream",
    "stream_unary": "client_stream",
    "stream_stream": "bidi_stream",
}


def _split(method: str) -> tuple[str, str]:
    """ "/pkg.Service/Method" -> ("pkg.Service", "Method")."""
    service, _, name = method.lstrip("/").partition("/")
    return service, name


class Metrics(CallLayer):
    """Counts and times every RPC. Outside the error mapping (accounting
    hooks always are), so the status it records is the one the client sees."""

    def bind(self, method: str, kind: str, handler: grpc.RpcMethodHandler) -> Around:
        return _MethodMetrics(_TYPES[kind], *_split(method)).around()


class _MethodMetrics:
    """One method's series, looked up once rather than on every call."""

    def __init__(self, label: str, service: str, method: str) -> None:
        self._labels = (label, service, method)
        self._started = GRPC_STARTED.labels(*self._labels)
        self._seconds = GRPC_SECONDS.labels(*self._labels)
        self._handled: dict[str, Any] = {}

    def around(self) -> Around:
        return Around(start=self.start, finish=self.finish)

    def start(self) -> float:
        self._started.inc()
        return time.perf_counter()

    def finish(self, started: float, context: grpc.aio.ServicerContext, error: BaseException | None) -> None:
        # The code an abort set; else OK, CANCELLED (the client went away) or UNKNOWN.
        code = context.code()
        if code is None:
            if error is None:
                code = grpc.StatusCode.OK
            elif isinstance(error, asyncio.CancelledError):
                code = grpc.StatusCode.CANCELLED
            else:
                code = grpc.StatusCode.UNKNOWN
        name = code.name if isinstance(code, grpc.StatusCode) else str(code)
        handled = self._handled.get(name)
        if handled is None:
            handled = self._handled[name] = GRPC_HANDLED.labels(*self._labels, name)
        handled.inc()
        # Without tracing no span is ever sampled: no exemplar to look up.
        exemplar = trace_exemplar() if tracing_enabled() else None
        self._seconds.observe(time.perf_counter() - started, exemplar=exemplar)
