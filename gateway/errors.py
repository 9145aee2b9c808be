"""One JSON error shape, and the one table from gRPC status to HTTP status.

Every error body is {"error": {"code", "message", "reason", ...}}: `code` the
gRPC status name (or an HTTP-level one: PAYLOAD_TOO_LARGE, METHOD_NOT_ALLOWED),
`reason` the service's ErrorInfo reason when there is one."""

from __future__ import annotations

import logging
import math

import grpc
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from services.shared.errors import error_info, retry_delay

log = logging.getLogger(__name__)

HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.ABORTED: 409,
    # 409, not 412: every FAILED_PRECONDITION of the services is a conflict
    # with the resource's current state (a proposal decided already, a page
    # changed since its base version, a conversation busy with a run), which
    # the client resolves by re-reading it. 412 belongs to the HTTP
    # conditional headers (If-Match...), which this API does not use.
    grpc.StatusCode.FAILED_PRECONDITION: 409,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}
# Reasons that refine the status: an oversize field is 413, not 400; every
# quota's refusal (runs at once, runs per minute, memory) is 429.
REASON_STATUS = {
    "ERROR_REASON_TOO_LARGE": 413,
    "ERROR_REASON_RATE_LIMITED": 429,
    "ERROR_REASON_TOO_MANY_RUNS": 429,
    "ERROR_REASON_QUOTA_EXCEEDED": 429,
}


class ApiError(Exception):
    def __init__(
        self, status: int, code: str, message: str, reason: str = "", retry_after: int | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.reason = status, code, message, reason
        # Whole seconds to wait before retrying (Retry-After), when the service said.
        self.retry_after = retry_after

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)} if self.retry_after is not None else {}


def error_body(code: str, message: str, reason: str = "", **extra: object) -> dict[str, object]:
    return {"error": {"code": code, "message": message, "reason": reason, **extra}}


def from_rpc_error(error: grpc.aio.AioRpcError) -> ApiError:
    info = error_info(error)
    reason = info.reason if info is not None else ""
    if error.code() == grpc.StatusCode.UNAUTHENTICATED:
        # The gateway signs every identity it sends: a service refusing one is
        # the deployment's fault (the processes' identity keys differ, or their
        # clocks drift beyond the leeway), never the HTTP client's. 500; the
        # service's reason is in the gateway's log.
        return ApiError(500, "INTERNAL", "internal error", reason)
    status = REASON_STATUS.get(reason) or HTTP_STATUS.get(error.code(), 500)
    message = (
        error.details() or error.code().name.lower()
        if status < 500 or status in (503, 504)
        else "internal error"
    )
    delay = retry_delay(error)
    retry_after = max(1, math.ceil(delay)) if delay is not None else None
    return ApiError(status, error.code().name, message, reason, retry_after)


async def api_error_handler(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    extra = {"retry_after_seconds": exc.retry_after} if exc.retry_after is not None else {}
    return JSONResponse(
        error_body(exc.code, exc.message, exc.reason, **extra), status_code=exc.status, headers=exc.headers()
    )


async def rpc_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, grpc.aio.AioRpcError)
    api = from_rpc_error(exc)
    if api.status >= 500:
        log.warning("%s %s: %s %s", request.method, request.url.path, exc.code().name, exc.details())
    return await api_error_handler(request, api)


async def validation_error_handler(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = [
        {"field": ".".join(str(p) for p in e.get("loc", ()) if p != "body"), "problem": e.get("msg", "")}
        for e in exc.errors()
    ]
    first = problems[0] if problems else {"field": "", "problem": "invalid request"}
    message = f"{first['field'] or 'body'}: {first['problem']}"
    return JSONResponse(error_body("INVALID_ARGUMENT", message, "", details=problems), status_code=400)


async def http_error_handler(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    # 400: a body FastAPI could not parse at all (not UTF-8, nested too deep).
    code = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 401: "UNAUTHENTICATED"}.get(
        exc.status_code, "HTTP_ERROR"
    )
    return JSONResponse(error_body(code, str(exc.detail)), status_code=exc.status_code, headers=exc.headers)


async def unexpected_error_handler(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    return JSONResponse(error_body("INTERNAL", "internal error"), status_code=500)
