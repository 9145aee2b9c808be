"""The one table from gRPC status (and ErrorInfo reason) to HTTP status."""

from __future__ import annotations

import grpc
import pytest
from grpc.aio import Metadata

from gateway.errors import from_rpc_error
from services.shared.errors import NotFound, TooLarge, to_status


def rpc_error(status: grpc.Status) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(status.code, Metadata(), Metadata(*status.trailing_metadata), status.details)


@pytest.mark.parametrize(
    ("code", "http"),
    [
        (grpc.StatusCode.INVALID_ARGUMENT, 400),
        (grpc.StatusCode.NOT_FOUND, 404),
        (grpc.StatusCode.FAILED_PRECONDITION, 409),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, 429),
        (grpc.StatusCode.UNAVAILABLE, 503),
        (grpc.StatusCode.DEADLINE_EXCEEDED, 504),
        (grpc.StatusCode.INTERNAL, 500),
        (grpc.StatusCode.UNKNOWN, 500),
    ],
)
def test_status_table(code: grpc.StatusCode, http: int) -> None:
    error = from_rpc_error(grpc.aio.AioRpcError(code, Metadata(), Metadata(), "details"))
    assert (error.status, error.code) == (http, code.name)


def test_a_service_refusing_the_gateways_identity_is_a_server_fault_not_the_clients() -> None:
    refused = from_rpc_error(
        grpc.aio.AioRpcError(
            grpc.StatusCode.UNAUTHENTICATED,
            Metadata(),
            Metadata(),
            "the identity token is not signed with this system's key",
        )
    )
    assert (refused.status, refused.code, refused.message) == (500, "INTERNAL", "internal error")


def test_domain_errors_keep_their_reason_and_message() -> None:
    missing = from_rpc_error(rpc_error(to_status(NotFound("conversation 'x' not found"))))
    assert (missing.status, missing.reason, missing.message) == (
        404,
        "ERROR_REASON_NOT_FOUND",
        "conversation 'x' not found",
    )
    # An oversize field is INVALID_ARGUMENT on the wire, 413 over HTTP.
    too_large = from_rpc_error(rpc_error(to_status(TooLarge("message exceeds 32000 characters"))))
    assert (too_large.status, too_large.reason) == (413, "ERROR_REASON_TOO_LARGE")


def test_internal_errors_do_not_leak_details() -> None:
    error = from_rpc_error(
        grpc.aio.AioRpcError(grpc.StatusCode.INTERNAL, Metadata(), Metadata(), "Traceback: secret path")
    )
    assert error.message == "internal error"
