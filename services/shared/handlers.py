"""The one base of the server's per-call concerns, and the one composition
that folds them into a single wrapper per method.

Each concern (metrics, error mapping, identity, the request guard,
deadlines) is a ``CallLayer`` in its own module; bound to a method once
(``bind``), it says what it does around each call of that method as
``Around`` hooks. ``compose`` then builds one behavior per method that runs
them all, in fixed nesting whatever the layers' number: every ``start`` /
``finish`` (accounting) outside every ``fail`` (error mapping) outside every
``check`` (refusals, then the behavior). A call thus costs one extra frame
and no context manager, instead of one wrapper per concern.

The wrapped behavior keeps its handler's kind and (de)serializers. A
response stream is written with ``context.write()`` from that one coroutine
(``writes``): grpc.aio would otherwise drop an abandoned response generator
unclosed for the garbage collector to close later, from another task's
context. When another interceptor sits outside the layers (tracing, which
iterates a generator), the wrapper stays a generator and ``written`` turns
the outermost behavior into the writing coroutine instead."""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import grpc

_FACTORIES = (
    ("unary_unary", grpc.unary_unary_rpc_method_handler),
    ("unary_stream", grpc.unary_stream_rpc_method_handler),
    ("stream_unary", grpc.stream_unary_rpc_method_handler),
    ("stream_stream", grpc.stream_stream_rpc_method_handler),
)

# check(request, context): before the behavior; raises to refuse the call.
Check = Callable[[Any, grpc.aio.ServicerContext], None]
# requests(request, context): what the behavior reads instead of its requests.
Requests = Callable[[Any, grpc.aio.ServicerContext], Any]
Deserializer = Callable[[bytes], Any]


@dataclass(frozen=True)
class Around:
    """What one concern does around every call of one method (None: nothing)."""

    check: Check | None = None
    requests: Requests | None = None
    # Wraps the method's request deserializer (it runs before any behavior).
    deserializer: Callable[[Deserializer], Deserializer] | None = None
    # start() when the call begins; finish(started, context, error) when it
    # has ended, with what start() returned and the error it ended with
    # (the two together, or neither).
    start: Callable[[], Any] | None = None
    finish: Callable[[Any, grpc.aio.ServicerContext, BaseException | None], None] | None = None
    # fail(error, context): maps an exception of the call onto its status
    # (aborts, raising grpc.aio.AbortError); returning leaves it as it is.
    fail: Callable[[Exception, grpc.aio.ServicerContext], Awaitable[None]] | None = None


class CallLayer:
    """One concern of every served call: ``bind`` is called once per method
    (``kind``: "unary_unary", "unary_stream", "stream_unary" or
    "stream_stream"); None when the concern has nothing to do there."""

    def bind(self, method: str, kind: str, handler: grpc.RpcMethodHandler) -> Around | None:
        raise NotImplementedError


def kind_of(handler: grpc.RpcMethodHandler) -> tuple[str, Callable[..., Any]] | None:
    for kind, _factory in _FACTORIES:
        if behavior := getattr(handler, kind):
            return kind, behavior
    return None


def _rebuilt(
    handler: grpc.RpcMethodHandler, kind: str, behavior: Callable[..., Any], deserializer: Deserializer | None
) -> grpc.RpcMethodHandler:
    factory = dict(_FACTORIES)[kind]
    return factory(behavior, deserializer, handler.response_serializer)


def _is_async(behavior: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(behavior) or inspect.isasyncgenfunction(behavior)


def compose(
    handler: grpc.RpcMethodHandler, method: str, layers: Sequence[CallLayer], writes: bool = True
) -> grpc.RpcMethodHandler:
    """``handler`` with every call run through ``layers`` (outermost first)
    by one behavior; unchanged when no layer binds to the method and there
    is no stream to write. A synchronous behavior (it runs in a thread,
    where nothing entered here would reach it) is left alone."""
    found = kind_of(handler)
    if found is None or not _is_async(found[1]):
        return handler
    kind, behavior = found
    bound = [around for layer in layers if (around := layer.bind(method, kind, handler)) is not None]
    streams = inspect.isasyncgenfunction(behavior)
    if not bound and not (writes and streams):
        return handler
    deserializer = handler.request_deserializer
    for around in bound:
        if around.deserializer is not None and deserializer is not None:
            deserializer = around.deserializer(deserializer)
    calls = _Calls(bound)
    wrapped: Callable[..., Any]
    if not streams:
        wrapped = calls.returning(behavior)
    elif writes:
        wrapped = calls.writing(behavior)
    else:
        wrapped = calls.yielding(behavior)
    return _rebuilt(handler, kind, wrapped, deserializer)


def written(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """``handler`` with a response generator turned into a coroutine that
    writes each response in the call's own task (see the module doc)."""
    found = kind_of(handler)
    if found is None or not inspect.isasyncgenfunction(found[1]):
        return handler
    return _rebuilt(handler, found[0], _Calls([]).writing(found[1]), handler.request_deserializer)


def _nothing(*_args: Any) -> None:
    return None


def _in_turn(hooks: Sequence[Callable[..., None]]) -> Callable[..., None]:
    """One callable for several hooks of the same arguments (none: a no-op)."""
    if not hooks:
        return _nothing
    if len(hooks) == 1:
        return hooks[0]

    def every(*args: Any) -> None:
        for hook in hooks:
            hook(*args)

    return every


Start = Callable[[], Any]
Finish = Callable[[Any, grpc.aio.ServicerContext, BaseException | None], None]


def _accounting(accounts: Sequence[tuple[Start, Finish]]) -> tuple[Start, Finish]:
    """One start and one finish for every layer's, nested: the first
    started is the last finished (one layer's own as they are)."""
    if len(accounts) == 1:
        return accounts[0]

    def start() -> list[Any]:
        return [begin() for begin, _end in accounts]

    def finish(started: list[Any], context: grpc.aio.ServicerContext, error: BaseException | None) -> None:
        for (_begin, end), mark in zip(reversed(accounts), reversed(started), strict=True):
            end(mark, context, error)

    return start, finish


class _Calls:
    """The hooks of one method's layers, and the behaviors that run them."""

    def __init__(self, bound: Sequence[Around]) -> None:
        self._check = _in_turn([a.check for a in bound if a.check is not None])
        self._start, self._finish = _accounting(
            [(a.start, a.finish) for a in bound if a.start is not None and a.finish is not None]
        )
        # Innermost first: the error mapping nearest the behavior sees it first.
        self._fails = [a.fail for a in reversed(bound) if a.fail is not None]
        self._requests = [a.requests for a in bound if a.requests is not None]

    async def _failed(self, error: BaseException, context: grpc.aio.ServicerContext, started: Any) -> None:
        """Maps ``error`` (aborting raises), then ends the accounting with the
        error the call ends with."""
        try:
            if isinstance(error, Exception) and not isinstance(error, grpc.aio.AbortError):
                for fail in self._fails:
                    await fail(error, context)
        except BaseException as mapped:
            self._finish(started, context, mapped)
            raise
        self._finish(started, context, error)

    def _argument(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        for requests in self._requests:
            request = requests(request, context)
        return request

    def returning(self, behavior: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        """A coroutine behavior: a unary response, or a stream written with
        context.write() (health's Watch)."""

        async def served(request: Any, context: grpc.aio.ServicerContext) -> Any:
            started = self._start()
            try:
                self._check(request, context)
                response = await behavior(self._argument(request, context), context)
            except BaseException as error:
                await self._failed(error, context, started)
                raise
            self._finish(started, context, None)
            return response

        return served

    def writing(self, behavior: Callable[..., AsyncGenerator[Any]]) -> Callable[..., Awaitable[None]]:
        """A response generator, each response written in the call's own task."""

        async def served(request: Any, context: grpc.aio.ServicerContext) -> None:
            started = self._start()
            try:
                self._check(request, context)
                async with aclosing(behavior(self._argument(request, context), context)) as responses:
                    async for response in responses:
                        await context.write(response)
            except BaseException as error:
                await self._failed(error, context, started)
                raise
            self._finish(started, context, None)

        return served

    def yielding(self, behavior: Callable[..., AsyncGenerator[Any]]) -> Callable[..., AsyncGenerator[Any]]:
        """A response generator still, for an interceptor outside that iterates it."""

        async def served(request: Any, context: grpc.aio.ServicerContext) -> AsyncGenerator[Any]:
            started = self._start()
            try:
                self._check(request, context)
                async with aclosing(behavior(self._argument(request, context), context)) as responses:
                    async for response in responses:
                        yield response
            except BaseException as error:
                await self._failed(error, context, started)
                raise
            self._finish(started, context, None)

        return served
