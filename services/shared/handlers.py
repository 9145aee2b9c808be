"""One piece the server interceptors share: a method handler rebuilt around a
new behavior, keeping its kind and its (de)serializers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

_FACTORIES = (
    ("unary_unary", grpc.unary_unary_rpc_method_handler),
    ("unary_stream", grpc.unary_stream_rpc_method_handler),
    ("stream_unary", grpc.stream_unary_rpc_method_handler),
    ("stream_stream", grpc.stream_stream_rpc_method_handler),
)


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
