"""The one composition of the server's per-call layers: each call runs the
layers' hooks in their fixed nesting (accounting outside error mapping
outside the checks), a response stream is written from one coroutine, and
the wrapped behavior keeps its kind and serializers."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from services.shared.bootstrap import MethodHandlerCache
from services.shared.handlers import Around, CallLayer, compose


class Recording(CallLayer):
    """A layer with every hook, writing down what it saw."""

    def __init__(self, seen: list[str], name: str, refuse: bool = False) -> None:
        self.seen, self.name, self.refuse = seen, name, refuse

    def bind(self, method: str, kind: str, handler: grpc.RpcMethodHandler) -> Around:
        def check(request: Any, _context: Any) -> None:
            self.seen.append(f"{self.name} check {request}")
            if self.refuse:
                raise ValueError(f"{self.name} refuses")

        async def fail(error: Exception, _context: Any) -> None:
            self.seen.append(f"{self.name} fail {error}")

        def finish(started: str, _context: Any, error: BaseException | None) -> None:
            self.seen.append(f"{self.name} finish {started} {error}")

        return Around(
            check=check,
            start=lambda: f"{self.name}-{kind}",
            finish=finish,
            fail=fail,
            deserializer=lambda inner: lambda raw: inner(raw) + f"+{self.name}".encode(),
        )


class Context:
    """What the composed behaviors use of a servicer context."""

    def __init__(self) -> None:
        self.written: list[bytes] = []

    async def write(self, response: bytes) -> None:
        self.written.append(response)


async def test_a_unary_call_runs_its_layers_nested_outermost_first() -> None:
    seen: list[str] = []

    async def behavior(request: bytes, _context: Any) -> bytes:
        seen.append("run")
        return request.upper()

    handler = grpc.unary_unary_rpc_method_handler(behavior, bytes.strip, bytes.lower)
    wrapped = compose(handler, "/svc/M", [Recording(seen, "outer"), Recording(seen, "inner")])
    assert inspect.iscoroutinefunction(wrapped.unary_unary) and wrapped.response_serializer is bytes.lower
    assert wrapped.request_deserializer(b" x ") == b"x+outer+inner"
    assert await wrapped.unary_unary(b"a", Context()) == b"A"
    assert seen == [
        "outer check b'a'",
        "inner check b'a'",
        "run",
        "inner finish inner-unary_unary None",
        "outer finish outer-unary_unary None",
    ]


async def test_an_error_goes_to_the_innermost_mapping_first_then_to_the_accounting() -> None:
    seen: list[str] = []

    async def behavior(_request: bytes, _context: Any) -> bytes:
        raise AssertionError("never reached: the check refused")

    handler = grpc.unary_unary_rpc_method_handler(behavior)
    wrapped = compose(handler, "/svc/M", [Recording(seen, "outer"), Recording(seen, "inner", refuse=True)])
    with pytest.raises(ValueError, match="inner refuses"):
        await wrapped.unary_unary(b"a", Context())
    assert seen == [
        "outer check b'a'",
        "inner check b'a'",
        "inner fail inner refuses",
        "outer fail inner refuses",
        "inner finish inner-unary_unary inner refuses",
        "outer finish outer-unary_unary inner refuses",
    ]


async def test_a_response_stream_is_written_from_one_coroutine_or_stays_a_generator() -> None:
    seen: list[str] = []

    async def behavior(request: bytes, _context: Any) -> AsyncIterator[bytes]:
        for letter in request:
            seen.append(f"send {letter}")
            yield bytes([letter])

    handler = grpc.unary_stream_rpc_method_handler(behavior)
    writing = compose(handler, "/svc/S", [Recording(seen, "one")])
    assert writing.unary_unary is None and inspect.iscoroutinefunction(writing.unary_stream)
    context = Context()
    assert await writing.unary_stream(b"ab", context) is None
    assert context.written == [b"a", b"b"]
    assert seen == ["one check b'ab'", "send 97", "send 98", "one finish one-unary_stream None"]

    yielding = compose(handler, "/svc/S", [Recording(seen, "one")], writes=False)
    assert inspect.isasyncgenfunction(yielding.unary_stream)
    assert [item async for item in yielding.unary_stream(b"c", Context())] == [b"c"]


async def test_client_stream_requests_are_replaced_and_what_no_layer_binds_is_left_alone() -> None:
    async def total(requests: AsyncIterator[int], _context: Any) -> int:
        return sum([item async for item in requests])

    async def numbers() -> AsyncIterator[int]:
        for number in (1, 2):
            yield number

    class Doubling(CallLayer):
        def bind(self, method: str, kind: str, handler: grpc.RpcMethodHandler) -> Around:
            async def twice(requests: AsyncIterator[int]) -> AsyncIterator[int]:
                async for number in requests:
                    yield 2 * number

            return Around(requests=lambda requests, _context: twice(requests))

    handler = grpc.stream_unary_rpc_method_handler(total)
    assert await compose(handler, "/svc/C", [Doubling()]).stream_unary(numbers(), Context()) == 6

    class Absent(CallLayer):
        def bind(self, method: str, kind: str, handler: grpc.RpcMethodHandler) -> None:
            return None

    assert compose(handler, "/svc/C", [Absent()]) is handler

    def synchronous(request: bytes, _context: Any) -> bytes:
        return request

    sync = grpc.unary_unary_rpc_method_handler(synchronous)
    assert compose(sync, "/svc/Sync", [Recording([], "one")]) is sync


async def test_a_stream_is_written_outside_an_interceptor_that_iterates_it() -> None:
    """Tracing wraps the layers' behavior in a generator of its own: the
    cache writes that one from a coroutine, once per method."""
    seen: list[str] = []

    class Iterating(grpc.aio.ServerInterceptor):  # type: ignore[misc]
        async def intercept_service(self, continuation: Any, details: Any) -> Any:
            inner = (await continuation(details)).unary_stream
            assert inspect.isasyncgenfunction(inner), "the layers gave a generator to iterate"

            async def traced(request: bytes, context: Any) -> AsyncIterator[bytes]:
                seen.append("span")
                async for response in inner(request, context):
                    yield response

            return grpc.unary_stream_rpc_method_handler(traced)

    async def behavior(request: bytes, _context: Any) -> AsyncIterator[bytes]:
        yield request

    class Details:
        method = "/svc/S"

    async def lookup(_details: Any) -> Any:
        return grpc.unary_stream_rpc_method_handler(behavior)

    cache = MethodHandlerCache([Iterating()], [Recording(seen, "one")])
    handler = await cache.intercept_service(lookup, Details())
    assert inspect.iscoroutinefunction(handler.unary_stream)
    assert await cache.intercept_service(lookup, Details()) is handler
    context = Context()
    await handler.unary_stream(b"x", context)
    assert context.written == [b"x"]
    assert seen == ["span", "one check b'x'", "one finish one-unary_stream None"]
