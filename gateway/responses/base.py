"""What every response body shares: the strict model config, the hand-written
`Body`, the error bodies, the router every module's routes hang on, and
the Server-Sent Events answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import EventSourceResponse

STRICT = ConfigDict(strict=True, extra="forbid")


class Body(BaseModel):
    """A response body written here by hand (not derived from a proto)."""

    model_config = STRICT


class ErrorProblem(Body):
    """One problem of a request that failed validation."""

    field: str = Field(description="the query, path or body field, dotted; empty for the whole body")
    problem: str = Field(description="what is wrong with it, in English")


class ErrorDetail(Body):
    """What went wrong."""

    code: str = Field(
        description="the gRPC status name (NOT_FOUND, INVALID_ARGUMENT, FAILED_PRECONDITION...) "
        "or an HTTP-level one (PAYLOAD_TOO_LARGE, METHOD_NOT_ALLOWED)"
    )
    message: str = Field(description="for a person; a 5xx says no more than internal error")
    reason: str = Field(description='the service\'s ErrorInfo reason (ERROR_REASON_...), or ""')
    details: list[ErrorProblem] | None = Field(
        default=None, description="a request that failed validation (400): every problem"
    )
    retry_after_seconds: int | None = Field(
        default=None,
        description="a quota's refusal (429) that waiting lifts: "
        "whole seconds to wait, as the Retry-After header",
    )


class ErrorResponse(Body):
    """Every error body (gateway.errors)."""

    error: ErrorDetail = Field(description="the error")


def error_responses(model: type[BaseModel], shape: str) -> dict[int | str, dict[str, Any]]:
    """The 4XX and 5XX answers of a route whose errors are `model`."""
    return {
        "4XX": {"model": model, "description": f"The request cannot be served ({shape})"},
        "5XX": {"model": model, "description": f"A service or the run failed ({shape})"},
    }


ERROR_RESPONSES = error_responses(ErrorResponse, "docs/api.md, Errors")


class ApiRouter(APIRouter):
    """The router every module's routes hang on: a body keeps exactly the
    fields its route set (see gateway.responses), and every route
    documents the error body (instead of FastAPI's 422, which this API
    never sends: a request that fails validation is a 400)."""

    def add_api_route(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        kwargs["response_model_exclude_unset"] = True
        kwargs["responses"] = {**ERROR_RESPONSES, **(kwargs.get("responses") or {})}
        super().add_api_route(path, endpoint, **kwargs)


RUN_EVENTS = (
    "The run's events as Server-Sent Events (`id:` the event's sequence, `event:` its kind, "
    "`data:` one JSON object): run_started, step, skill_used, reasoning, action, delta, notice, "
    "proposal, final, error"
)


def event_stream(description: str, others: dict[int | str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The arguments of a route that answers Server-Sent Events: a 200
    `text/event-stream`, and the `others` statuses."""
    stream = {"schema": {"type": "string", "format": "event-stream"}}
    answers: dict[int | str, dict[str, Any]] = {
        200: {"content": {"text/event-stream": stream}, "description": description},
        **(others or {}),
    }
    return {"responses": answers, "response_model": None, "response_class": EventSourceResponse}


NEXT_PAGE = "opaque; pass it as page_token for the next page, empty on the last page"
NUMBER = "a JSON number (an int64 the gateway converts)"
