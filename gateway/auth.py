"""Bearer tokens -> user. The user travels to every service in gRPC metadata."""

from __future__ import annotations

from fastapi import Request

from gateway.errors import ApiError


def current_user(request: Request) -> str:
    tokens: dict[str, str] = request.app.state.tokens
    if not tokens:
        return str(request.app.state.dev_user)
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    user = tokens.get(token.strip()) if scheme.lower() == "bearer" else None
    if user is None:
        raise ApiError(401, "UNAUTHENTICATED", "a valid bearer token is required")
    return user
