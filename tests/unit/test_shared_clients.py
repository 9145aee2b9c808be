"""The one client path of a unary call: the first attempt runs without a
retry loop; a first UNAVAILABLE of an idempotent call goes to tenacity's loop
(which retries it with its own stop), any other error is raised at once; the
caller's identity token is put in the metadata by the call itself."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from services.shared import clients
from services.shared.identity import IDENTITY_METADATA_KEY
from services.shared.identity_tokens import current


def failure(code: grpc.StatusCode) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=code.name)


class Method:
    """A stub method answering from a script: an error to raise, or a response."""

    def __init__(self, *outcomes: Any) -> None:
        self.outcomes = list(outcomes)
        self.metadata: list[Any] = []

    async def __call__(self, request: str, *, timeout: float, metadata: Any) -> str:
        self.metadata.append(metadata)
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return f"{outcome} {request}"


@pytest.fixture
def loops_built(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    built: list[int] = []
    real = clients.retry_unavailable

    def counting(attempts: int = 3) -> Any:
        built.append(attempts)
        return real(attempts)

    monkeypatch.setattr(clients, "retry_unavailable", counting)
    return built


async def test_a_call_that_succeeds_first_builds_no_retry_loop(loops_built: list[int]) -> None:
    method = Method("ok")
    assert await clients.call(method, "r", timeout=5) == "ok r"
    assert loops_built == [] and method.outcomes == []


async def test_a_first_unavailable_goes_to_the_loop_which_retries_until_its_stop(
    loops_built: list[int],
) -> None:
    unavailable = failure(grpc.StatusCode.UNAVAILABLE)
    recovering = Method(unavailable, unavailable, "ok")
    assert await clients.call(recovering, "r", timeout=5) == "ok r"
    assert loops_built == [3] and recovering.outcomes == []

    down = Method(unavailable, unavailable, failure(grpc.StatusCode.UNAVAILABLE), "never")
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await clients.call(down, "r", timeout=5)
    assert raised.value.code() == grpc.StatusCode.UNAVAILABLE and down.outcomes == ["never"]


async def test_other_errors_and_calls_not_idempotent_are_not_retried(loops_built: list[int]) -> None:
    refused = Method(failure(grpc.StatusCode.NOT_FOUND), "never")
    with pytest.raises(grpc.aio.AioRpcError):
        await clients.call(refused, "r", timeout=5)
    once = Method(failure(grpc.StatusCode.UNAVAILABLE), "never")
    with pytest.raises(grpc.aio.AioRpcError):
        await clients.call(once, "r", timeout=5, idempotent=False)
    assert loops_built == [] and refused.outcomes == once.outcomes == ["never"]


async def test_the_callers_identity_goes_first_in_the_metadata() -> None:
    method = Method("ok", "ok")
    await clients.call(method, "r", timeout=5, user="alice", role="admin", metadata=(("x-extra", "1"),))
    await clients.call(method, "r", timeout=5, metadata=(("x-extra", "1"),))
    (key, token), extra = method.metadata[0]
    assert key == IDENTITY_METADATA_KEY and extra == ("x-extra", "1")
    caller = current().verify(token)
    assert (caller.user, caller.role) == ("alice", "admin")
    assert method.metadata[1] == (("x-extra", "1"),)
