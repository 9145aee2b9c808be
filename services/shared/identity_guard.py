"""Every call of every service method carries a valid identity token, or it
is refused UNAUTHENTICATED before the servicer runs, whether or not the
method itself asks who calls. Health checks and reflection stay open: probes
and operators' tools carry no identity."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import grpc

from services.shared.handlers import around_calls
from services.shared.identity import caller

# Full method-name prefixes that need no identity.
OPEN_SERVICES = (
    "/grpc.health.v1.Health/",
    "/grpc.reflection.v1alpha.ServerReflection/",
    "/grpc.reflection.v1.ServerReflection/",
)


@asynccontextmanager
async def _identified(_request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[None]:
    caller(context)  # raises Unauthenticated, mapped by the error interceptor outside this one
    yield


class IdentityInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Refuses a call without a valid identity token (see module doc)."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method.startswith(OPEN_SERVICES):
            return handler
        return around_calls(handler, lambda _kind: _identified)
