"""A service's refusal rebuilt by its caller through one table (its ErrorInfo
reason): the engine raises it again with the same kind, so the gateway sees
what the service said (an oversize field is 413, not 400); what is not the
caller's to fix says which service failed."""

from __future__ import annotations

import grpc
from grpc.aio import Metadata

from gateway.errors import from_rpc_error
from services.engine.collaborators import _translate
from services.shared.errors import (
    DependencyUnavailable,
    DomainError,
    FailedPrecondition,
    InvalidArgument,
    RateLimited,
    TooLarge,
    Unauthenticated,
    rebuilt,
    to_status,
)


def rpc_error(status: grpc.Status) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(status.code, Metadata(), Metadata(*status.trailing_metadata), status.details)


def through_the_engine(refusal: DomainError) -> grpc.aio.AioRpcError:
    """``refusal`` raised by threads, translated by the engine, sent to the gateway."""
    return rpc_error(to_status(_translate("threads", rpc_error(to_status(refusal)))))


def test_an_oversize_field_refused_downstream_is_413_at_the_gateway() -> None:
    refused = through_the_engine(TooLarge("text exceeds 32000 characters", field="entries.text"))
    api = from_rpc_error(refused)
    assert (api.status, api.reason, api.message) == (
        413,
        "ERROR_REASON_TOO_LARGE",
        "text exceeds 32000 characters",
    )


def test_a_refusal_keeps_its_kind_message_metadata_and_retry_delay() -> None:
    again = rebuilt(rpc_error(to_status(RateLimited("3 runs a minute", retry_after=12.0, window="60s"))))
    assert isinstance(again, RateLimited)
    assert (again.message, again.metadata, again.retry_after) == ("3 runs a minute", {"window": "60s"}, 12.0)
    field = rebuilt(rpc_error(to_status(InvalidArgument("bad id", field="project_id"))))
    assert type(field) is InvalidArgument and field.metadata == {"field": "project_id"}


def test_what_is_not_the_callers_to_fix_says_which_service_failed() -> None:
    for refusal in (Unauthenticated("no token"), DependencyUnavailable("database unavailable")):
        translated = _translate("threads", rpc_error(to_status(refusal)))
        assert type(translated) is DependencyUnavailable and translated.message.startswith(
            "threads service failed"
        )
    conflict = _translate("threads", rpc_error(to_status(FailedPrecondition("busy"))))
    assert type(conflict) is FailedPrecondition and conflict.message == "threads: busy"
    # gRPC's own refusal of an oversize message carries no ErrorInfo: the service failed.
    oversize = grpc.aio.AioRpcError(grpc.StatusCode.RESOURCE_EXHAUSTED, Metadata(), Metadata(), "too big")
    assert rebuilt(oversize) is None
    assert type(_translate("threads", oversize)) is DependencyUnavailable
    # A refusal without ErrorInfo keeps the kind its code names.
    missing = grpc.aio.AioRpcError(grpc.StatusCode.NOT_FOUND, Metadata(), Metadata(), "")
    assert _translate("threads", missing).message == "not found"
