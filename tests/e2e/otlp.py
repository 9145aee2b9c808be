"""A real OTLP/gRPC trace receiver for tests: the services export to it
exactly as they would to an OpenTelemetry Collector."""

from __future__ import annotations

import threading
from concurrent import futures
from dataclasses import dataclass, field

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    trace_id: str
    name: str
    run_id: str  # the switchboard.run_id attribute, when the span has one
    span_id: str = ""
    parent_span_id: str = ""
    attributes: dict[str, object] = field(default_factory=dict)


def _value(value: AnyValue) -> object:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        # Every export request as it came over the wire (secret scans read it all).
        self.raw: list[bytes] = []
        self._lock = threading.Lock()

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        received = []
        for resource_spans in request.resource_spans:
            attributes = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            service = attributes.get("service.name", "")
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    run_id = next(
                        (a.value.string_value for a in span.attributes if a.key == "switchboard.run_id"), ""
                    )
                    received.append(
                        ReceivedSpan(
                            service,
                            span.trace_id.hex(),
                            span.name,
                            run_id,
                            span.span_id.hex(),
                            span.parent_span_id.hex(),
                            {a.key: _value(a.value) for a in span.attributes},
                        )
                    )
        with self._lock:
            self.spans.extend(received)
            self.raw.append(request.SerializeToString())
        return trace_service_pb2.ExportTraceServiceResponse()

    def raw_exports(self) -> bytes:
        with self._lock:
            return b"".join(self.raw)

    def snapshot(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self.spans)


def start_receiver() -> tuple[grpc.Server, Receiver, int]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    receiver = Receiver()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(receiver, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, receiver, port
