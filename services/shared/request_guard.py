"""Malformed requests are the caller's mistake: INVALID_ARGUMENT, not INTERNAL.

grpc.aio parses a request with the method's ``request_deserializer`` before
any interceptor's behavior runs, and an exception raised there ends the call
with a generic error status (UNKNOWN, "Unexpected <class DecodeError>") and a
logged traceback, whatever the bytes were: truncated, not protobuf at all, or
a ``string`` field that is not valid UTF-8 (proto3 requires it).
``RequestGuardInterceptor`` wraps each method's deserializer so that a parse
failure yields a ``Malformed`` marker instead of raising, and the method's
behavior, seeing the marker, aborts the call with INVALID_ARGUMENT and an
``ErrorInfo`` (``ERROR_REASON_INVALID_ARGUMENT``, metadata ``method``) before
the servicer is reached.

The same marker refuses a ``string`` field holding U+0000 (metadata
``field``, its path): valid UTF-8, but PostgreSQL's text cannot store it,
so it would fail deep in a write as INTERNAL on one backend and pass on the
other. Only requests whose bytes hold a zero byte are walked.

Requests over the server's ``grpc.max_receive_message_length`` never get
here: gRPC itself answers RESOURCE_EXHAUSTED."""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, NoReturn

import grpc
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from services.shared.errors import InvalidArgument, to_status
from services.shared.handlers import rewrap, scoped

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Malformed:
    """What the guarded deserializer returns for a request it refuses."""

    message: str
    field: str = ""


def _nul_field(message: Message) -> str | None:
    """The path of a string field holding U+0000, if any (maps included)."""
    for field, value in message.ListFields():
        if field.type == FieldDescriptor.TYPE_STRING:
            if any("\x00" in text for text in (value if field.is_repeated else (value,))):
                return str(field.name)
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            entry = field.message_type
            if entry is not None and entry.GetOptions().map_entry:
                items: Any = [v for pair in value.items() for v in pair]
            else:
                items = value if field.is_repeated else (value,)
            for item in items:
                if isinstance(item, str) and "\x00" in item:
                    return str(field.name)
                inner = _nul_field(item) if isinstance(item, Message) else None
                if inner is not None:
                    return f"{field.name}.{inner}"
    return None


def _guarded(deserializer: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    def deserialize(raw: bytes) -> Any:
        try:
            request = deserializer(raw)
        except Exception as exc:  # noqa: BLE001 - any parse failure is the caller's
            return Malformed(f"the request does not parse: {type(exc).__name__}: {exc}")
        if b"\x00" in raw and isinstance(request, Message):
            field = _nul_field(request)
            if field is not None:
                return Malformed(f"{field} contains U+0000 (NUL), which text fields do not accept", field)
        return request

    return deserialize


async def _refuse(context: grpc.aio.ServicerContext, method: str, request: Malformed) -> NoReturn:
    log.info("malformed request to %s: %s", method, request.message)
    metadata = {"method": method, **({"field": request.field} if request.field else {})}
    await context.abort_with_status(to_status(InvalidArgument(request.message, **metadata)))
    raise AssertionError("abort_with_status raises")  # pragma: no cover


class RequestGuardInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Turns a request that does not parse, or holds NUL in a string, into INVALID_ARGUMENT."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler
        method = handler_call_details.method
        behavior = (
            handler.unary_unary or handler.unary_stream or handler.stream_unary or handler.stream_stream
        )
        if not (inspect.iscoroutinefunction(behavior) or inspect.isasyncgenfunction(behavior)):
            return handler  # a synchronous handler (none here) keeps gRPC's own handling
        deserializer = _guarded(handler.request_deserializer)

        @asynccontextmanager
        async def checked_first(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[None]:
            if isinstance(request, Malformed):
                await _refuse(context, method, request)
            yield

        def checked_each(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
            """Checks each request of a client stream as the behavior reads it."""

            async def iterate() -> AsyncIterator[Any]:
                async for request in requests:
                    if isinstance(request, Malformed):
                        await _refuse(context, method, request)
                    yield request

            return iterate()

        def guarded(kind: str, behavior: Callable[..., Any]) -> Callable[..., Any]:
            if kind.startswith("unary_"):
                return scoped(behavior, checked_first)
            return scoped(behavior, requests=checked_each)

        return rewrap(handler, guarded, deserializer)
