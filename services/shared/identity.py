"""The caller's identity, carried in gRPC metadata from the gateway to every
service; each service checks ownership itself with it."""

from __future__ import annotations

import grpc

from services.shared.errors import Unauthenticated

USER_METADATA_KEY = "x-switchboard-user"


def user_metadata(user_id: str) -> tuple[tuple[str, str], ...]:
    return ((USER_METADATA_KEY, user_id),)


def caller_user(context: grpc.aio.ServicerContext) -> str:
    """The user the call acts for; UNAUTHENTICATED when the metadata lacks one."""
    for key, value in context.invocation_metadata() or ():
        if key == USER_METADATA_KEY and value:
            return str(value)
    raise Unauthenticated("the call carries no user (metadata x-switchboard-user)")
