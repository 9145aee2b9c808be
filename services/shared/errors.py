"""Domain errors, each carrying its gRPC status code and ErrorInfo reason, and
the one server layer that maps them onto statuses with
``google.rpc.ErrorInfo`` details. Anything unexpected becomes INTERNAL, logged,
with no stack trace sent to the client."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from services.shared.db_retry import is_transient
from services.shared.handlers import Around, CallLayer
from switchboard.common.v1 import common_pb2

log = logging.getLogger(__name__)

ERROR_DOMAIN = "switchboard.dev"


class DomainError(Exception):
    code: grpc.StatusCode = grpc.StatusCode.INTERNAL
    reason: common_pb2.ErrorReason.ValueType = common_pb2.ERROR_REASON_UNSPECIFIED

    # Seconds after which a retry may succeed, sent as google.rpc.RetryInfo
    # (None: no RetryInfo, retrying the same call will not help by waiting).
    retry_after: float | None = None

    def __init__(self, message: str, **metadata: str) -> None:
        super().__init__(message)
        self.message = message
        self.metadata = metadata


class InvalidArgument(DomainError):
    code = grpc.StatusCode.INVALID_ARGUMENT
    reason = common_pb2.ERROR_REASON_INVALID_ARGUMENT


class NotFound(DomainError):
    """Also for objects of another user: the two are never distinguished."""

    code = grpc.StatusCode.NOT_FOUND
    reason = common_pb2.ERROR_REASON_NOT_FOUND


class TooLarge(DomainError):
    code = grpc.StatusCode.INVALID_ARGUMENT
    reason = common_pb2.ERROR_REASON_TOO_LARGE


class FailedPrecondition(DomainError):
    code = grpc.StatusCode.FAILED_PRECONDITION
    reason = common_pb2.ERROR_REASON_FAILED_PRECONDITION


class AlreadyExists(DomainError):
    """The object to create exists already (a project id is taken)."""

    code = grpc.StatusCode.ALREADY_EXISTS
    reason = common_pb2.ERROR_REASON_ALREADY_EXISTS


class PermissionDenied(DomainError):
    """The caller's role or membership does not allow a call on an object it
    may know exists (the catalog, the agent registry). Another user's
    private object is NotFound instead."""

    code = grpc.StatusCode.PERMISSION_DENIED
    reason = common_pb2.ERROR_REASON_PERMISSION_DENIED


class Unauthenticated(DomainError):
    code = grpc.StatusCode.UNAUTHENTICATED
    reason = common_pb2.ERROR_REASON_UNAUTHENTICATED


class DependencyUnavailable(DomainError):
    code = grpc.StatusCode.UNAVAILABLE
    reason = common_pb2.ERROR_REASON_DEPENDENCY_UNAVAILABLE


class Exhausted(DomainError):
    """A quota refused the call: RESOURCE_EXHAUSTED with its reason, and with
    RetryInfo when waiting ``retry_after`` seconds lets it through."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED

    def __init__(self, message: str, retry_after: float | None = None, **metadata: str) -> None:
        super().__init__(message, **metadata)
        self.retry_after = retry_after


class RateLimited(Exhausted):
    """Too many runs started within the rate window."""

    reason = common_pb2.ERROR_REASON_RATE_LIMITED


class TooManyRuns(Exhausted):
    """Too many runs executing at once."""

    reason = common_pb2.ERROR_REASON_TOO_MANY_RUNS


class QuotaExceeded(Exhausted):
    """A storage quota is full: waiting does not help, freeing room does."""

    reason = common_pb2.ERROR_REASON_QUOTA_EXCEEDED


# A refusal may quote what the client sent (an id, a name). The message goes
# out twice in the trailers (grpc-message and the status details), which gRPC
# caps at 8 KiB: a long quote would turn the refusal into RESOURCE_EXHAUSTED
# "Stream removed" at the caller. So quotes are cut to these sizes.
MAX_MESSAGE_CHARS = 1000
MAX_METADATA_CHARS = 200


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def to_status(error: DomainError) -> grpc.Status:
    metadata = {key: _cut(value, MAX_METADATA_CHARS) for key, value in error.metadata.items()}
    info = error_details_pb2.ErrorInfo(
        reason=common_pb2.ErrorReason.Name(error.reason), domain=ERROR_DOMAIN, metadata=metadata
    )
    detail = any_pb2.Any()
    detail.Pack(info)
    details = [detail]
    if error.retry_after is not None:
        retry = any_pb2.Any()
        delay = duration_pb2.Duration()
        delay.FromTimedelta(timedelta(seconds=max(error.retry_after, 0.0)))
        retry.Pack(error_details_pb2.RetryInfo(retry_delay=delay))
        details.append(retry)
    message = _cut(error.message, MAX_MESSAGE_CHARS)
    status = status_pb2.Status(code=error.code.value[0], message=message, details=details)
    return rpc_status.to_status(status)


def _internal_status() -> grpc.Status:
    return rpc_status.to_status(status_pb2.Status(code=code_pb2.INTERNAL, message="internal error"))


async def _abort(context: grpc.aio.ServicerContext, exc: Exception, method: str) -> None:
    if isinstance(exc, DomainError):
        await context.abort_with_status(to_status(exc))
    if is_transient(exc):
        # The database connection dropped and its retries ran out: UNAVAILABLE,
        # which callers retry for idempotent calls (services.shared.clients).
        log.warning("database unavailable in %s: %s: %s", method, type(exc).__name__, exc)
        await context.abort_with_status(to_status(DependencyUnavailable("database unavailable; retry later")))
    log.exception("unexpected error in %s", method)
    await context.abort_with_status(_internal_status())


class ErrorMapping(CallLayer):
    """Maps DomainError to its status, anything else to a logged INTERNAL."""

    def bind(self, method: str, kind: str, handler: grpc.RpcMethodHandler) -> Around:
        async def fail(exc: Exception, context: grpc.aio.ServicerContext) -> None:
            await _abort(context, exc, method)

        return Around(fail=fail)


# Every domain error by its ErrorInfo reason: the one table a client rebuilds
# a service's refusal from (``rebuilt``).
KINDS: dict[str, type[DomainError]] = {
    common_pb2.ErrorReason.Name(kind.reason): kind
    for kind in (
        InvalidArgument,
        NotFound,
        TooLarge,
        FailedPrecondition,
        AlreadyExists,
        PermissionDenied,
        Unauthenticated,
        DependencyUnavailable,
        RateLimited,
        TooManyRuns,
        QuotaExceeded,
    )
}


def rebuilt(
    error: grpc.aio.AioRpcError, by_code: Mapping[grpc.StatusCode, type[DomainError]] | None = None
) -> DomainError | None:
    """The domain error a service refused the call with, rebuilt from the
    ErrorInfo it sent: the same kind (so the same status and reason when it
    is raised again), message, metadata and retry delay. Without one of our
    ErrorInfos (gRPC's own failures: a message over the size limit, an
    unreachable service, a deadline), the kind ``by_code`` gives, else None."""
    info = error_info(error)
    if info is not None and info.domain == ERROR_DOMAIN and info.reason in KINDS:
        kind, metadata = KINDS[info.reason], dict(info.metadata)
    elif by_code is not None and error.code() in by_code:
        kind, metadata = by_code[error.code()], {}
    else:
        return None
    domain = kind(error.details() or error.code().name.lower().replace("_", " "), **metadata)
    if issubclass(kind, Exhausted):
        domain.retry_after = retry_delay(error)
    return domain


def error_info(error: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo | None:
    """The ErrorInfo detail of a failed call, if the service sent one."""
    info = error_details_pb2.ErrorInfo()
    return info if _unpack(error, info) else None


def retry_delay(error: grpc.aio.AioRpcError) -> float | None:
    """The RetryInfo delay of a failed call in seconds, if the service sent one."""
    info = error_details_pb2.RetryInfo()
    return info.retry_delay.ToTimedelta().total_seconds() if _unpack(error, info) else None


def _unpack(error: grpc.aio.AioRpcError, into: Message) -> bool:
    status = rpc_status.from_call(error)
    if status is None:
        return False
    for detail in status.details:
        if detail.Is(into.DESCRIPTOR):
            detail.Unpack(into)
            return True
    return False
