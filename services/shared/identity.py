"""The caller's identity, carried in gRPC metadata from the gateway to every
service as a short-lived signed token (services.shared.identity_tokens);
each service checks ownership itself with it."""

from __future__ import annotations

import grpc

from services.shared.errors import Unauthenticated
from services.shared.identity_tokens import DEFAULT_ROLE, Caller, current

IDENTITY_METADATA_KEY = "x-switchboard-identity"


def user_metadata(user_id: str, role: str = DEFAULT_ROLE) -> tuple[tuple[str, str], ...]:
    """The metadata of a call made for ``user_id``: a token this process signs."""
    return ((IDENTITY_METADATA_KEY, current().mint(user_id, role)),)


def caller(context: grpc.aio.ServicerContext) -> Caller:
    """The verified caller; UNAUTHENTICATED when the call carries no valid
    token (none, a bare user name, another key's, expired)."""
    for key, value in context.invocation_metadata() or ():
        if key == IDENTITY_METADATA_KEY and value:
            return current().verify(str(value))
    raise Unauthenticated(f"the call carries no identity token (metadata {IDENTITY_METADATA_KEY})")


def caller_user(context: grpc.aio.ServicerContext) -> str:
    """The user the call acts for."""
    return caller(context).user


def caller_role(context: grpc.aio.ServicerContext) -> str:
    """The caller's verified role: "admin" only when the token says so
    exactly; anything else is "user", the role with fewer rights.
    Function-level permissions (admin-only catalog and registry writes) read it."""
    return "admin" if caller(context).role == "admin" else "user"
