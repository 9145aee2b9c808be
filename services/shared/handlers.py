"""The one way the server interceptors wrap a method handler.

``rewrap`` rebuilds a handler around a new behavior, keeping its kind and its
(de)serializers. ``around_calls`` is what most interceptors want on top of it:
each call runs inside a scope (an async context manager opened with the
call's request and context), whatever the handler's kind. The wrapped
behavior keeps the kind of the one it wraps (async generator, coroutine
function), which is how grpc.aio tells how to run it, and closes an
abandoned response stream in the call's own task (``aclosing``), not later
from the garbage collector in another task's context."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, aclosing, nullcontext
from typing import Any

import grpc

_FACTORIES = (
    ("unary_unary", grpc.unary_unary_rpc_method_handler),
    ("unary_stream", grpc.unary_stream_rpc_method_handler),
    ("stream_unary", grpc.stream_unary_rpc_method_handler),
    ("stream_stream", grpc.stream_stream_rpc_method_handler),
)

# scope(request, context): entered before the behavior runs, exited when its
# call ends (the last response sent, or an error). ``request`` is the request
# iterator for client-streaming kinds.
Scope = Callable[[Any, grpc.aio.ServicerContext], AbstractAsyncContextManager[Any]]
# requests(request, context): what the behavior receives instead of ``request``.
Requests = Callable[[Any, grpc.aio.ServicerContext], Any]


def rewrap(
    handler: grpc.RpcMethodHandler,
    wrap: Callable[[str, Callable[..., Any]], Callable[..., Any]],
    request_deserializer: Callable[[bytes], Any] | None = None,
) -> grpc.RpcMethodHandler:
    """``handler`` with its behavior replaced by ``wrap(kind, behavior)``
    (kind: "unary_unary", "unary_stream", "stream_unary" or "stream_stream"),
    and optionally another request deserializer."""
    for kind, factory in _FACTORIES:
        if behavior := getattr(handler, kind):
            return factory(
                wrap(kind, behavior),
                request_deserializer or handler.request_deserializer,
                handler.response_serializer,
            )
    return handler


def scoped(
    behavior: Callable[..., Any], scope: Scope | None = None, requests: Requests | None = None
) -> Callable[..., Any]:
    """``behavior`` run inside ``scope(request, context)`` when set, given
    ``requests(request, context)`` instead of its request when set. A
    synchronous behavior (it runs in a thread, where a scope entered here
    would not reach it) is returned unchanged."""

    def entered(request: Any, context: grpc.aio.ServicerContext) -> AbstractAsyncContextManager[Any]:
        return nullcontext() if scope is None else scope(request, context)

    def argument(request: Any, context: grpc.aio.ServicerContext) -> Any:
        return request if requests is None else requests(request, context)

    if inspect.isasyncgenfunction(behavior):

        async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            async with entered(request, context):
                async with aclosing(behavior(argument(request, context), context)) as responses:
                    async for response in responses:
                        yield response

        return stream
    if not inspect.iscoroutinefunction(behavior):
        return behavior

    # A coroutine: a unary response, or a response stream written with
    # context.write() (health's Watch).
    async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        async with entered(request, context):
            return await behavior(argument(request, context), context)

    return unary


def around_calls(handler: grpc.RpcMethodHandler, scope: Callable[[str], Scope]) -> grpc.RpcMethodHandler:
    """``handler`` with every call run inside ``scope(kind)(request, context)``."""
    return rewrap(handler, lambda kind, behavior: scoped(behavior, scope(kind)))
