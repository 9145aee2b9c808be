"""Every call of every service method carries a valid identity token, or it
is refused UNAUTHENTICATED before the servicer runs, whether or not the
method itself asks who calls. Health checks and reflection stay open: probes
and operators' tools carry no identity."""

from __future__ import annotations

from typing import Any

import grpc

from services.shared.handlers import Around, CallLayer
from services.shared.identity import caller

# Full method-name prefixes that need no identity.
OPEN_SERVICES = (
    "/grpc.health.v1.Health/",
    "/grpc.reflection.v1alpha.ServerReflection/",
    "/grpc.reflection.v1.ServerReflection/",
)


class Identity(CallLayer):
    """Refuses a call without a valid identity token (see module doc)."""

    def bind(self, method: str, kind: str, handler: grpc.RpcMethodHandler) -> Around | None:
        return None if method.startswith(OPEN_SERVICES) else _IDENTIFIED


def _identified(_request: Any, context: grpc.aio.ServicerContext) -> None:
    caller(context)  # raises Unauthenticated, mapped by the error layer outside this one


_IDENTIFIED = Around(check=_identified)
