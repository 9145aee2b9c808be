"""The server's method-static interceptors run once per method: later calls
get the same handler; a method the server does not have is never cached."""

from __future__ import annotations

from typing import Any

import grpc

from services.shared.bootstrap import MethodHandlerCache


class Counting(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    def __init__(self) -> None:
        self.calls = 0

    async def intercept_service(self, continuation: Any, details: Any) -> Any:
        self.calls += 1
        return await continuation(details)


class Details:
    def __init__(self, method: str) -> None:
        self.method = method
        self.invocation_metadata = ()


async def echo(request: Any, context: Any) -> Any:
    return request


HANDLER = grpc.unary_unary_rpc_method_handler(echo)


async def test_a_method_runs_the_chain_once() -> None:
    counting = Counting()
    cache = MethodHandlerCache([counting])

    async def lookup(details: Any) -> Any:
        return HANDLER if details.method == "/svc/Known" else None

    first = await cache.intercept_service(lookup, Details("/svc/Known"))
    again = await cache.intercept_service(lookup, Details("/svc/Known"))
    assert first is again is HANDLER and counting.calls == 1
    for _ in range(3):
        assert await cache.intercept_service(lookup, Details("/svc/Unknown")) is None
    assert counting.calls == 4  # the unknown method went through the chain each time
