"""``python -m services.healthcheck HOST:PORT [SERVICE]``: exits 0 when the
gRPC server there reports SERVING (grpc.health.v1), 1 otherwise. For container
health checks and operators; Kubernetes uses its native gRPC probe instead.
With SWITCHBOARD_TLS_CA_FILE set it speaks TLS, as the other callers do
(the address's host must then be a name the certificate holds); health
checks need no identity."""

from __future__ import annotations

import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.shared.settings import SecuritySettings


def check(
    address: str, service: str = "", timeout: float = 2.0, credentials: grpc.ChannelCredentials | None = None
) -> str:
    """The status name the server reports for ``service`` ("" = the whole
    server); over TLS when ``credentials`` are given."""
    channel = (
        grpc.insecure_channel(address) if credentials is None else grpc.secure_channel(address, credentials)
    )
    with channel:
        stub = health_pb2_grpc.HealthStub(channel)
        response = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        return str(health_pb2.HealthCheckResponse.ServingStatus.Name(response.status))


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print("usage: python -m services.healthcheck HOST:PORT [SERVICE]", file=sys.stderr)
        return 2
    try:
        credentials = SecuritySettings().channel_credentials()
        status = check(argv[0], argv[1] if len(argv) == 2 else "", credentials=credentials)
    except grpc.RpcError as error:
        print(f"{argv[0]}: {error.code().name}", file=sys.stderr)
        return 1
    print(f"{argv[0]}: {status}")
    return 0 if status == "SERVING" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
