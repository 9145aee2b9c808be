"""Channels to other services: one per downstream service, opened at start-up,
traced, every call with a deadline and its caller's identity, idempotent
calls retried with tenacity when (and only when) the service is UNAVAILABLE. Inside a handler, a call's
deadline is never later than the incoming call's (services.shared.deadlines)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import grpc
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from services.shared.deadlines import bounded
from services.shared.identity import user_metadata
from services.shared.identity_tokens import DEFAULT_ROLE
from services.shared.telemetry import client_interceptors

Response = TypeVar("Response")
Metadata = Sequence[tuple[str, str]]

_CHANNEL_OPTIONS = [
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.max_receive_message_length", 16 * 1024 * 1024),
    # A restarted service (the local launcher's restart, a rolled pod) is
    # called again within two seconds of serving: gRPC's default reconnect
    # backoff grows to two minutes, refusing calls all that time.
    ("grpc.initial_reconnect_backoff_ms", 250),
    ("grpc.max_reconnect_backoff_ms", 2_000),
    # Spread calls over every address the name resolves to: with a
    # "dns:///router-grpc:50052" target on a headless Kubernetes Service, each
    # replica gets its share (one HTTP/2 connection to a ClusterIP would pin a
    # caller to one replica). A plain host:port behaves as before.
    ("grpc.service_config", json.dumps({"loadBalancingConfig": [{"round_robin": {}}]})),
]


def open_channel(address: str, credentials: grpc.ChannelCredentials | None = None) -> grpc.aio.Channel:
    """A channel to ``address``: TLS when ``credentials`` are given
    (SecuritySettings.channel_credentials), else plaintext."""
    if credentials is not None:
        return grpc.aio.secure_channel(
            address, credentials, options=_CHANNEL_OPTIONS, interceptors=client_interceptors()
        )
    return grpc.aio.insecure_channel(address, options=_CHANNEL_OPTIONS, interceptors=client_interceptors())


def _is_unavailable(exc: BaseException) -> bool:
    return isinstance(exc, grpc.aio.AioRpcError) and exc.code() == grpc.StatusCode.UNAVAILABLE


async def call(
    method: Callable[..., Awaitable[Response]],
    request: object,
    *,
    timeout: float,
    user: str | None = None,
    role: str = DEFAULT_ROLE,
    metadata: Metadata = (),
    idempotent: bool = True,
    attempts: int = 3,
) -> Response:
    """Calls a unary method, as ``user`` (with ``role``) when given: their
    identity token in its metadata, before ``metadata``. Retries UNAVAILABLE
    with jittered backoff only if ``idempotent``; any other error is raised
    at once. Each attempt's deadline is ``timeout``, cut to what is left of
    the call being served, if any."""
    if user is not None:
        metadata = (*user_metadata(user, role), *metadata)
    # The first attempt bare: a call that succeeds (nearly all) builds no retry loop.
    try:
        return await method(request, timeout=bounded(timeout), metadata=metadata)
    except grpc.aio.AioRpcError as error:
        if not (idempotent and _is_unavailable(error)):
            raise
        first = error
    return await _retrying(
        first, lambda: method(request, timeout=bounded(timeout), metadata=metadata), attempts
    )


async def retried(attempt: Callable[[], Awaitable[Response]], attempts: int = 3) -> Response:
    """``attempt()``, made again by ``retry_unavailable(attempts)`` when it
    finds the service UNAVAILABLE; the first attempt runs without the loop."""
    try:
        return await attempt()
    except grpc.aio.AioRpcError as error:
        if not _is_unavailable(error):
            raise
        first = error
    return await _retrying(first, attempt, attempts)


async def _retrying(
    first: grpc.aio.AioRpcError, attempt: Callable[[], Awaitable[Response]], attempts: int
) -> Response:
    """The retry loop of a call whose first attempt failed with ``first``:
    handed to the loop as its first attempt's failure, so the stop, the
    backoff and the error finally raised are the loop's own."""
    pending: grpc.aio.AioRpcError | None = first
    async for retry in retry_unavailable(attempts):
        with retry:
            if pending is not None:
                failed, pending = pending, None
                raise failed
            return await attempt()
    raise AssertionError("unreachable: tenacity reraises the last error")


def retry_unavailable(attempts: int = 3) -> AsyncRetrying:
    """Tenacity's loop for a call that is safe to repeat: retried with
    jittered backoff while the service is UNAVAILABLE, every other error (and
    the last UNAVAILABLE) raised as is. With a round-robin channel a retry
    goes to another replica when the first is gone."""
    return AsyncRetrying(
        retry=retry_if_exception(_is_unavailable),
        stop=stop_after_attempt(attempts),
        wait=wait_exponential_jitter(multiplier=0.05, max=1.0, jitter=0.05),
        reraise=True,
    )
