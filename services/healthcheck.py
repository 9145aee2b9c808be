"""``python -m services.healthcheck HOST:PORT [SERVICE]``: exits 0 when the
gRPC server there reports SERVING (grpc.health.v1), 1 otherwise. For container
health checks and operators; Kubernetes uses its native gRPC probe instead."""

from __future__ import annotations

import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def check(address: str, service: str = "", timeout: float = 2.0) -> str:
    """The status name the server reports for ``service`` ("" = the whole server)."""
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        response = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        return str(health_pb2.HealthCheckResponse.ServingStatus.Name(response.status))


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print("usage: python -m services.healthcheck HOST:PORT [SERVICE]", file=sys.stderr)
        return 2
    try:
        status = check(argv[0], argv[1] if len(argv) == 2 else "")
    except grpc.RpcError as error:
        print(f"{argv[0]}: {error.code().name}", file=sys.stderr)
        return 1
    print(f"{argv[0]}: {status}")
    return 0 if status == "SERVING" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
