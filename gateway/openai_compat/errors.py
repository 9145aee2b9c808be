"""Errors in OpenAI's shape, ``{"error": {"message", "type", "param",
"code"}}``, with the HTTP API's status codes: every refusal of the /v1
routes, the services' and request validation's included."""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import grpc
from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

from gateway.errors import ApiError, from_rpc_error

log = logging.getLogger(__name__)

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
}
# The quotas' refusals, which OpenAI's clients know as rate_limit_exceeded
# (memory's storage quota is not among them: it is not a run's).
RATE_LIMIT_REASONS = frozenset({"ERROR_REASON_RATE_LIMITED", "ERROR_REASON_TOO_MANY_RUNS"})


def openai_error(status: int, message: str, code: str = "", param: str | None = None) -> dict[str, Any]:
    kind = ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code or None}}


class OpenAIError(Exception):
    """A refusal in OpenAI's shape. ``headers`` name what was already
    created (the conversation, the run), so a client can look at it."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.param = status, code, message, param
        self.headers = headers or {}


# Where pydantic's location names the member of a union a value failed
# (``content.str``), the field is named without it.
_UNION_TAGS = frozenset({"str", "int", "bool", "float", "list", "dict", "none"})


def _param(location: Sequence[int | str]) -> str:
    """A pydantic location as OpenAI names a field: ``messages[0].content``."""
    name = ""
    for part in location:
        if part == "body":
            continue
        if isinstance(part, str) and (part in _UNION_TAGS or "[" in part):
            break
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name


def translate(exc: Exception) -> OpenAIError | None:
    if isinstance(exc, OpenAIError):
        return exc
    if isinstance(exc, grpc.aio.AioRpcError):
        exc = from_rpc_error(exc)
    if isinstance(exc, ApiError):
        if exc.reason in RATE_LIMIT_REASONS:
            return OpenAIError(429, "rate_limit_exceeded", exc.message, headers=exc.headers())
        return OpenAIError(exc.status, exc.code.lower(), exc.message, headers=exc.headers())
    if isinstance(exc, RequestValidationError):
        problems = exc.errors()
        first = problems[0] if problems else {}
        if first.get("type") == "json_invalid":  # its location is a character offset
            return OpenAIError(400, "invalid_json", f"the body is not JSON: {first.get('msg', '')}")
        param = _param(first.get("loc", ()))
        message = f"{param or 'body'}: {first.get('msg', 'invalid request')}"
        return OpenAIError(400, "invalid_request", message, param or None)
    if isinstance(exc, StarletteHTTPException):
        return OpenAIError(exc.status_code, "http_error", str(exc.detail))
    return None


def refusal(exc: ApiError | grpc.aio.AioRpcError, param: str | None, headers: dict[str, str]) -> OpenAIError:
    """A service's refusal, naming the field and what was already created."""
    error = translate(exc)
    assert error is not None
    error.param, error.headers = param, {**error.headers, **headers}
    return error


def error_response(error: OpenAIError) -> JSONResponse:
    headers = dict(error.headers)
    created = {name for name in headers if name != "Retry-After"}
    waits = error.status == 429 and "Retry-After" in headers
    if (error.status != 503 and not waits) or created:
        # The SDKs retry 409, 429 and 5xx: only a 503, or a rate limit's 429
        # with its Retry-After, before anything was written is safe (and
        # worth) repeating.
        headers["x-should-retry"] = "false"
    body = openai_error(error.status, error.message, error.code, error.param)
    return JSONResponse(body, status_code=error.status, headers=headers)


class OpenAIRoute(APIRoute):
    """Every failure of these routes in OpenAI's shape: body validation,
    authentication and the services' errors included."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as exc:
                error = translate(exc)
                if error is None:
                    log.exception("unexpected error on %s %s", request.method, request.url.path)
                    error = OpenAIError(500, "internal", "internal error")
                elif error.status >= 500:
                    log.warning("%s %s: %s %s", request.method, request.url.path, error.code, error.message)
                return error_response(error)

        return route
