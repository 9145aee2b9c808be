"""Malformed requests are the caller's mistake: INVALID_ARGUMENT, not INTERNAL.

grpc.aio parses a request with the method's ``request_deserializer`` before
any interceptor's behavior runs, and an exception raised there ends the call
with a generic error status (UNKNOWN, "Unexpected <class DecodeError>") and a
logged traceback, whatever the bytes were: truncated, not protobuf at all, or
a ``string`` field that is not valid UTF-8 (proto3 requires it).
``RequestGuard`` wraps each method's deserializer so that a parse
failure yields a ``Malformed`` marker instead of raising, and the method's
behavior, seeing the marker, refuses the call with INVALID_ARGUMENT and an
``ErrorInfo`` (``ERROR_REASON_INVALID_ARGUMENT``, metadata ``method``) before
the servicer is reached.

The same marker refuses a ``string`` field holding U+0000 (metadata
``field``, its path): valid UTF-8, but PostgreSQL's text cannot store it,
so it would fail deep in a write as INTERNAL on one backend and pass on the
other. Only requests whose bytes hold a zero byte are walked.

Requests over the server's ``grpc.max_receive_message_length`` never get
here: gRPC itself answers RESOURCE_EXHAUSTED."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from services.shared.errors import InvalidArgument
from services.shared.handlers import Around, CallLayer

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


def _refusal(method: str, request: Malformed) -> InvalidArgument:
    log.info("malformed request to %s: %s", method, request.message)
    metadata = {"method": method, **({"field": request.field} if request.field else {})}
    return InvalidArgument(request.message, **metadata)


class RequestGuard(CallLayer):
    """Turns a request that does not parse, or holds NUL in a string, into
    INVALID_ARGUMENT (raised inside the error layer, which maps it)."""

    def bind(self, method: str, kind: str, handler: grpc.RpcMethodHandler) -> Around | None:
        if handler.request_deserializer is None:
            return None

        def checked_first(request: Any, _context: grpc.aio.ServicerContext) -> None:
            if isinstance(request, Malformed):
                raise _refusal(method, request)

        def checked_each(requests: AsyncIterator[Any], _context: grpc.aio.ServicerContext) -> Any:
            """Checks each request of a client stream as the behavior reads it."""

            async def iterate() -> AsyncIterator[Any]:
                async for request in requests:
                    if isinstance(request, Malformed):
                        raise _refusal(method, request)
                    yield request

            return iterate()

        if kind.startswith("unary_"):
            return Around(check=checked_first, deserializer=_guarded)
        return Around(requests=checked_each, deserializer=_guarded)
