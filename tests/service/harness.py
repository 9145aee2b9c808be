"""Runs one service in-process on port 0 and hands out a real stub to it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import grpc

from services.shared.bootstrap import RunningService
from services.shared.errors import error_info
from services.shared.identity import user_metadata
from services.shared.settings import ServiceSettings

S = TypeVar("S", bound=ServiceSettings)


@asynccontextmanager
async def running(
    build: Callable[[S], Awaitable[RunningService]], settings: S
) -> AsyncIterator[tuple[RunningService, grpc.aio.Channel]]:
    service = await build(settings)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{service.port}")
    try:
        yield service, channel
    finally:
        await channel.close()
        await service.stop(None)


class AsUser(Mapping[str, Any]):
    """A call's keyword arguments for ``user`` (``stub.M(request, **as_user("alice"))``):
    its identity token is minted when the call is made, not when the module
    was imported, since a token lives a minute and a run of the suite longer."""

    def __init__(self, user: str, timeout: float) -> None:
        self._user, self._timeout = user, timeout

    def __getitem__(self, key: str) -> Any:
        if key == "metadata":
            return user_metadata(self._user)
        if key == "timeout":
            return self._timeout
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(("metadata", "timeout"))

    def __len__(self) -> int:
        return 2


def as_user(user: str, timeout: float = 10) -> AsUser:
    return AsUser(user, timeout)


async def expect_error(call: Awaitable[Any], code: grpc.StatusCode, reason: str) -> grpc.aio.AioRpcError:
    """Awaits a call that must fail with ``code`` and ErrorInfo ``reason``."""
    try:
        await call
    except grpc.aio.AioRpcError as error:
        assert error.code() == code, (error.code(), error.details())
        info = error_info(error)
        assert info is not None and info.reason == reason and info.domain == "switchboard.dev", info
        return error
    raise AssertionError(f"expected {code.name}/{reason}, the call succeeded")
