"""A2A's gRPC binding, served by the gateway process on a port of its own
(``a2a_grpc_port``): the SDK's ``GrpcHandler`` over the same request
handler as JSON-RPC. The agent is the request's ``tenant`` (each card's gRPC
interface names it), else the default agent; the caller is the bearer token
in the ``authorization`` metadata (UNAUTHENTICATED without a valid one)."""

from __future__ import annotations

import grpc
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import GrpcHandler, GrpcServerCallContextBuilder
from a2a.types import a2a_pb2_grpc
from starlette.datastructures import State

from gateway.a2a.handler import CURSOR, GRPC_CONTEXT, IDENTITY, SwitchboardRequestHandler
from gateway.a2a.tasks import CURSOR_PARAMETER
from gateway.auth import Authenticator
from gateway.settings import GatewaySettings
from services.shared.bootstrap import MethodHandlerCache
from services.shared.errors import ErrorMapping
from services.shared.request_guard import RequestGuard

EXTENSIONS_KEY = "a2a-extensions"


class _GrpcContext(GrpcServerCallContextBuilder):
    def __init__(self, auth: Authenticator) -> None:
        self._auth = auth

    def build(self, context: grpc.aio.ServicerContext) -> ServerCallContext:
        metadata: dict[str, list[str]] = {}
        for key, value in context.invocation_metadata() or ():
            text = value if isinstance(value, str) else value.decode(errors="replace")
            metadata.setdefault(key.lower(), []).append(text)
        scheme, _, token = (metadata.get("authorization") or [""])[0].partition(" ")
        if not self._auth.enabled:
            identity: tuple[str, str] | None = (self._auth.dev_user, self._auth.dev_role)
        else:
            identity = self._auth.identity_for(token.strip() if scheme.lower() == "bearer" else "")
        requested = {uri.strip() for value in metadata.get(EXTENSIONS_KEY, []) for uri in value.split(",")}
        return ServerCallContext(
            state={
                GRPC_CONTEXT: context,
                IDENTITY: identity,
                CURSOR: (metadata.get(CURSOR_PARAMETER.lower()) or [""])[0],
            },
            requested_extensions={uri for uri in requested if uri},
        )


async def start(state: State, settings: GatewaySettings, auth: Authenticator) -> grpc.aio.Server | None:
    """The A2A gRPC server, listening; None when no port is set."""
    if settings.a2a_grpc_port is None:
        return None
    # A request that does not parse (or holds NUL in a string) is the
    # caller's mistake: INVALID_ARGUMENT with an ErrorInfo, as on every
    # service, never the UNKNOWN grpc.aio gives a deserializer's exception.
    guard = MethodHandlerCache(layers=[ErrorMapping(), RequestGuard()])
    # No port sharing: a port another program holds is a failed start, not a split one.
    server = grpc.aio.server(interceptors=[guard], options=[("grpc.so_reuseport", 0)])
    handler = GrpcHandler(SwitchboardRequestHandler(state, settings), _GrpcContext(auth))
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(handler, server)  # type: ignore[no-untyped-call]
    server.add_insecure_port(f"{settings.host}:{settings.a2a_grpc_port}")
    await server.start()
    return server
