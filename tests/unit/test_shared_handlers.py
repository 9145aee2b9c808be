"""The one handler wrapper every server interceptor uses: a call runs inside
its scope whatever the handler's kind, and the wrapped behavior keeps that kind."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import grpc
import pytest

from services.shared.handlers import around_calls, scoped


def _recording() -> tuple[list[str], Any]:
    seen: list[str] = []

    @asynccontextmanager
    async def scope(request: Any, _context: Any) -> AsyncIterator[None]:
        seen.append(f"enter {request}")
        try:
            yield
        except Exception as exc:
            seen.append(f"error {exc}")
            raise
        finally:
            seen.append("exit")

    return seen, scope


async def test_a_unary_call_runs_inside_its_scope() -> None:
    seen, scope = _recording()

    async def behavior(request: str, _context: Any) -> str:
        seen.append("run")
        return request.upper()

    wrapped = scoped(behavior, scope)
    assert inspect.iscoroutinefunction(wrapped)
    assert await wrapped("a", None) == "A"
    assert seen == ["enter a", "run", "exit"]


async def test_a_response_stream_stays_a_generator_and_its_scope_ends_with_it() -> None:
    seen, scope = _recording()

    async def behavior(request: str, _context: Any) -> AsyncIterator[str]:
        for letter in request:
            seen.append(f"send {letter}")
            yield letter

    wrapped = scoped(behavior, scope)
    assert inspect.isasyncgenfunction(wrapped)
    assert [item async for item in wrapped("ab", None)] == ["a", "b"]
    assert seen == ["enter ab", "send a", "send b", "exit"]


async def test_the_scope_sees_the_behaviors_error() -> None:
    seen, scope = _recording()

    async def behavior(_request: str, _context: Any) -> str:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await scoped(behavior, scope)("a", None)
    assert seen == ["enter a", "error boom", "exit"]


async def test_client_stream_requests_are_replaced_and_a_sync_behavior_is_left_alone() -> None:
    async def doubled(requests: AsyncIterator[int], _context: Any) -> int:
        return sum([item async for item in requests])

    async def numbers() -> AsyncIterator[int]:
        for number in (1, 2):
            yield number

    async def twice(requests: AsyncIterator[int]) -> AsyncIterator[int]:
        async for number in requests:
            yield 2 * number

    wrapped = scoped(doubled, requests=lambda requests, _context: twice(requests))
    assert await wrapped(numbers(), None) == 6

    def synchronous(request: str, _context: Any) -> str:
        return request

    assert scoped(synchronous, _recording()[1]) is synchronous


async def test_around_calls_keeps_the_kind_and_the_serializers() -> None:
    seen, scope = _recording()

    async def behavior(request: bytes, _context: Any) -> AsyncIterator[bytes]:
        yield request

    handler = grpc.unary_stream_rpc_method_handler(behavior, bytes.upper, bytes.lower)
    kinds: list[str] = []

    def scope_of(kind: str) -> Any:
        kinds.append(kind)
        return scope

    wrapped = around_calls(handler, scope_of)
    assert kinds == ["unary_stream"] and wrapped.unary_unary is None
    assert wrapped.request_deserializer is bytes.upper and wrapped.response_serializer is bytes.lower
    assert [item async for item in wrapped.unary_stream(b"x", None)] == [b"x"]
    assert seen == ["enter b'x'", "exit"]
