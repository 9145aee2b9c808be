"""Metrics and error mapping through the one composition: a call is counted
with the status its client sees (a mapped DomainError's code, OK, or
CANCELLED when the client left), and timed."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from prometheus_client import REGISTRY

from services.shared.errors import ErrorMapping, NotFound
from services.shared.handlers import compose
from services.shared.metrics import Metrics

METHOD = "/test.Metrics/Get"
LABELS = {"grpc_type": "unary", "grpc_service": "test.Metrics", "grpc_method": "Get"}


class Context:
    """What the layers use of a servicer context: abort sets the code."""

    def __init__(self) -> None:
        self._code: grpc.StatusCode | None = None

    def code(self) -> grpc.StatusCode | None:
        return self._code

    async def abort_with_status(self, status: grpc.Status) -> None:
        self._code = status.code
        raise grpc.aio.AbortError()


def handled(code: str) -> float:
    return REGISTRY.get_sample_value("grpc_server_handled_total", {**LABELS, "grpc_code": code}) or 0.0


def timed() -> float:
    return REGISTRY.get_sample_value("grpc_server_handling_seconds_count", LABELS) or 0.0


async def test_each_call_is_counted_with_the_status_its_client_sees() -> None:
    outcomes: list[Any] = ["found", NotFound("no such thing"), asyncio.CancelledError()]

    async def behavior(_request: bytes, _context: Any) -> str:
        outcome = outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return str(outcome)

    handler = compose(grpc.unary_unary_rpc_method_handler(behavior), METHOD, [Metrics(), ErrorMapping()])
    before = {code: handled(code) for code in ("OK", "NOT_FOUND", "CANCELLED")}
    calls_before = timed()

    assert await handler.unary_unary(b"", Context()) == "found"
    with pytest.raises(grpc.aio.AbortError):
        await handler.unary_unary(b"", Context())
    with pytest.raises(asyncio.CancelledError):
        await handler.unary_unary(b"", Context())

    assert {code: handled(code) - before[code] for code in before} == {
        "OK": 1,
        "NOT_FOUND": 1,
        "CANCELLED": 1,
    }
    assert timed() - calls_before == 3
