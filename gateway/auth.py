"""Bearer tokens -> user. Tokens come from the env map
(SWITCHBOARD_GATEWAY_TOKENS) and from the hashed tokens file
(SWITCHBOARD_GATEWAY_TOKENS_FILE); with neither, every request acts as the
dev user. The user travels to every service in gRPC metadata, and each
service checks ownership itself."""

from __future__ import annotations

import hmac

from fastapi import Request

from gateway.errors import ApiError
from gateway.tokens import TokenFile

# The web page's token, set by GET /?token=... (SameSite=Strict, HttpOnly:
# other sites' pages cannot send it and scripts cannot read it).
COOKIE = "switchboard_token"


class Authenticator:
    def __init__(self, tokens: dict[str, str], token_file: TokenFile | None, dev_user: str) -> None:
        self._tokens = tokens
        self._file = token_file
        self.dev_user = dev_user
        self.enabled = bool(tokens) or token_file is not None

    def user_for(self, token: str) -> str | None:
        if not token:
            return None
        for known, user in self._tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                return user
        return self._file.user_for(token) if self._file is not None else None


def bearer_token(request: Request) -> str:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme:
        return token.strip() if scheme.lower() == "bearer" else ""
    return request.cookies.get(COOKIE, "")


async def current_user(request: Request) -> str:
    """The caller. A coroutine, so FastAPI runs it on the event loop: a plain
    function dependency costs a hand-off to its thread pool on every request.
    The tokens file's check is one stat(), and a read only when it changed."""
    auth: Authenticator = request.app.state.auth
    if not auth.enabled:
        return auth.dev_user
    user = auth.user_for(bearer_token(request))
    if user is None:
        raise ApiError(401, "UNAUTHENTICATED", "a valid bearer token is required")
    return user
