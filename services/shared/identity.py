"""The caller's identity, carried in gRPC metadata from the gateway to every
service; each service checks ownership itself with it. The role ("admin" or
"user") travels beside the user: function-level permissions (admin-only
catalog and registry writes) read it with :func:`caller_role`."""

from __future__ import annotations

from typing import Literal

import grpc

from services.shared.errors import Unauthenticated

USER_METADATA_KEY = "x-switchboard-user"
ROLE_METADATA_KEY = "x-switchboard-role"

Role = Literal["admin", "user"]
ROLES: tuple[Role, ...] = ("admin", "user")


def user_metadata(user_id: str, role: str = "user") -> tuple[tuple[str, str], ...]:
    return ((USER_METADATA_KEY, user_id), (ROLE_METADATA_KEY, role))


def caller_user(context: grpc.aio.ServicerContext) -> str:
    """The user the call acts for; UNAUTHENTICATED when the metadata lacks one."""
    for key, value in context.invocation_metadata() or ():
        if key == USER_METADATA_KEY and value:
            return str(value)
    raise Unauthenticated("the call carries no user (metadata x-switchboard-user)")


def caller_role(context: grpc.aio.ServicerContext) -> str:
    """The caller's role: "admin" only when the metadata says so exactly;
    anything else (missing, unknown) is "user", the role with fewer rights."""
    for key, value in context.invocation_metadata() or ():
        if key == ROLE_METADATA_KEY:
            return "admin" if value == "admin" else "user"
    return "user"
