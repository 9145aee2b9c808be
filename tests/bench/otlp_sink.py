"""A local OTLP/gRPC trace receiver for the tracing-on benchmark, in a
process of its own (its CPU and its GIL stay out of the benchmark client's):
the receiver of tests/e2e/otlp.py (the one the e2e tests use), counting
spans by service instead of keeping them.

    python -m tests.bench.otlp_sink --ready /tmp/otlp.json

writes ``{"port": N}`` to the ready file once it listens; when its stdin
closes, prints ``{"spans": N, "by_service": {...}}`` as one JSON line and
exits."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections import Counter
from concurrent import futures
from pathlib import Path

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from tests.e2e.otlp import Receiver


class CountingReceiver(Receiver):
    def __init__(self) -> None:
        super().__init__()
        self.by_service: Counter[str] = Counter()
        self._counting = threading.Lock()

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        counts: Counter[str] = Counter()
        for resource_spans in request.resource_spans:
            service = next(
                (a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name"),
                "",
            )
            counts[service] += sum(len(scope.spans) for scope in resource_spans.scope_spans)
        with self._counting:
            self.by_service.update(counts)
        return trace_service_pb2.ExportTraceServiceResponse()

    def counts(self) -> dict[str, int]:
        with self._counting:
            return dict(self.by_service)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.otlp_sink", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--ready", type=Path, required=True)
    args = parser.parse_args(argv)
    receiver = CountingReceiver()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(receiver, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    args.ready.write_text(json.dumps({"port": port}))
    sys.stdin.buffer.read()  # until the benchmark closes our stdin
    server.stop(5).wait()
    print(
        json.dumps({"spans": sum(receiver.by_service.values()), "by_service": receiver.counts()}), flush=True
    )


if __name__ == "__main__":
    main()
