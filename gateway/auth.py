"""Bearer tokens -> user and role. Tokens come from the env map
(SWITCHBOARD_GATEWAY_TOKENS) and from the hashed tokens file
(SWITCHBOARD_GATEWAY_TOKENS_FILE); with neither, every request acts as the
dev user with the dev role. The user and role travel to every service in
gRPC metadata, and each service checks ownership and role itself."""

from __future__ import annotations

import hmac

from fastapi import Request

from gateway.errors import ApiError
from gateway.tokens import TokenFile

# The web page's token, set by GET /?token=... (SameSite=Strict, HttpOnly:
# other sites' pages cannot send it and scripts cannot read it).
COOKIE = "switchboard_token"


class Authenticator:
    def __init__(
        self,
        tokens: dict[str, tuple[str, str]],
        token_file: TokenFile | None,
        dev_user: str,
        dev_role: str = "admin",
    ) -> None:
        self._tokens = tokens
        self._file = token_file
        self.dev_user = dev_user
        self.dev_role = dev_role
        self.enabled = bool(tokens) or token_file is not None

    def identity_for(self, token: str) -> tuple[str, str] | None:
        """(user, role) of a token; None for an unknown one."""
        if not token:
            return None
        for known, identity in self._tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                return identity
        return self._file.identity_for(token) if self._file is not None else None

    def user_for(self, token: str) -> str | None:
        identity = self.identity_for(token)
        return identity[0] if identity else None


def bearer_token(request: Request) -> str:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme:
        return token.strip() if scheme.lower() == "bearer" else ""
    return request.cookies.get(COOKIE, "")


async def current_user(request: Request) -> str:
    """The caller. A coroutine, so FastAPI runs it on the event loop: a plain
    function dependency costs a hand-off to its thread pool on every request.
    The tokens file's check is one stat(), and a read only when it changed.
    The caller's role is kept on ``request.state.role`` for :func:`caller_role`."""
    auth: Authenticator = request.app.state.auth
    if not auth.enabled:
        request.state.role = auth.dev_role
        return auth.dev_user
    identity = auth.identity_for(bearer_token(request))
    if identity is None:
        raise ApiError(401, "UNAUTHENTICATED", "a valid bearer token is required")
    request.state.role = identity[1]
    return identity[0]


def caller_role(request: Request) -> str:
    """The role :func:`current_user` found ("user" if it did not run)."""
    return str(getattr(request.state, "role", "user"))
