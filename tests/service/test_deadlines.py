"""Deadline propagation (services/shared/deadlines.py): a call made while
serving another carries at most what is left of the incoming deadline, so
when the caller's deadline passes, the work downstream stops within a second;
and a run, which outlives the call that started it, carries none."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field

import grpc
import pytest

from services.shared import deadlines
from services.shared.bootstrap import RunningService, start_service
from services.shared.clients import call, open_channel
from services.shared.identity import user_metadata
from services.shared.settings import ServiceSettings
from switchboard.engine.v1 import engine_pb2, engine_service_pb2
from switchboard.threads.v1 import threads_service_pb2
from tests.conftest import DatabaseFactory
from tests.service.harness import as_user
from tests.service.system import collect, system

SERVICE = "switchboard.test.Deadlines"
DOWNSTREAM_TIMEOUT = 30.0  # the middle service's own timeout for its call: far longer than the client's


@dataclass
class Seen:
    """What each hop observed, on the monotonic clock."""

    middle_remaining: float | None = None
    downstream_remaining: float | None = None
    downstream_stopped: float | None = None
    relayed: list[asyncio.Future[bytes]] = field(default_factory=list)


def _register(handlers: dict[str, grpc.RpcMethodHandler]) -> Callable[[grpc.aio.Server], Sequence[str]]:
    def register(server: grpc.aio.Server) -> Sequence[str]:
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
        return [SERVICE]

    return register


@pytest.fixture
async def chain() -> AsyncIterator[tuple[Seen, grpc.aio.Channel, list[bool]]]:
    """client → middle → downstream, both servers built by the shared
    bootstrap (its interceptors); the middle calls the downstream with
    ``services.shared.clients.call`` and a 30 s timeout, shielded from its own
    cancellation when ``shield[0]`` (so only the propagated deadline can stop
    the downstream work); the downstream works for 30 s unless stopped."""
    seen, shield = Seen(), [False]

    async def work(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        seen.downstream_remaining = context.time_remaining()
        if seen.downstream_remaining is not None and seen.downstream_remaining > 5:
            return b"no deadline to wait for"
        try:
            await asyncio.sleep(DOWNSTREAM_TIMEOUT)
        except asyncio.CancelledError:
            seen.downstream_stopped = time.monotonic()
            raise
        return b"done"

    downstream = await start_service(
        ServiceSettings(port=0),
        _register({"Work": grpc.unary_unary_rpc_method_handler(work)}),
    )
    downstream_channel = open_channel(f"127.0.0.1:{downstream.port}")
    work_method = downstream_channel.unary_unary(f"/{SERVICE}/Work")

    async def relay(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        seen.middle_remaining = deadlines.remaining()
        outgoing = asyncio.ensure_future(
            call(work_method, request, timeout=DOWNSTREAM_TIMEOUT, metadata=user_metadata("alice"))
        )
        seen.relayed.append(outgoing)
        return await (asyncio.shield(outgoing) if shield[0] else outgoing)

    middle = await start_service(
        ServiceSettings(port=0),
        _register({"Relay": grpc.unary_unary_rpc_method_handler(relay)}),
    )
    client_channel = grpc.aio.insecure_channel(f"127.0.0.1:{middle.port}")
    services: list[RunningService] = [middle, downstream]
    try:
        yield seen, client_channel, shield
    finally:
        await client_channel.close()
        await downstream_channel.close()
        for service in services:
            await service.stop(None)


# gRPC's core reads a cached clock and rounds the grpc-timeout it sends, so a
# server may see a little more time remaining than the caller gave (seen:
# 1.009 s of a 1 s deadline, 30.099 s of a 30 s one).
CLOCK_SLACK = 0.2


@pytest.mark.parametrize("shielded", [False, True], ids=["cancelled-middle", "shielded-middle"])
async def test_the_downstream_work_stops_within_a_second_of_the_callers_deadline(
    chain: tuple[Seen, grpc.aio.Channel, list[bool]], shielded: bool
) -> None:
    seen, channel, shield = chain
    shield[0] = shielded
    relay = channel.unary_unary(f"/{SERVICE}/Relay")
    started = time.monotonic()
    with pytest.raises(grpc.aio.AioRpcError) as failed:
        await relay(b"", timeout=1.0, metadata=user_metadata("alice"))
    assert failed.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    expired = started + 1.0

    # The outgoing call carried the incoming deadline, not its own 30 s.
    assert seen.middle_remaining is not None and 0 < seen.middle_remaining <= 1.0 + CLOCK_SLACK
    assert seen.downstream_remaining is not None
    assert seen.downstream_remaining <= seen.middle_remaining + 0.01

    # The downstream handler was cancelled within a second of the deadline,
    # and the middle's call ended with DEADLINE_EXCEEDED (shielded: nothing
    # else could have stopped it).
    (outcome,) = await asyncio.wait_for(asyncio.gather(seen.relayed[0], return_exceptions=True), 2.0)
    if shielded:
        assert isinstance(outcome, grpc.aio.AioRpcError), outcome
        assert outcome.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    else:  # cancelled with the middle's handler, or expired first
        assert isinstance(outcome, asyncio.CancelledError | grpc.aio.AioRpcError), outcome
    for _ in range(40):
        if seen.downstream_stopped is not None:
            break
        await asyncio.sleep(0.05)
    assert seen.downstream_stopped is not None, "the downstream handler kept working"
    lag = seen.downstream_stopped - expired
    print(f"downstream stopped {lag * 1000:.0f} ms after the caller's deadline (shielded: {shielded})")
    assert -0.05 <= lag < 1.0


async def test_without_an_incoming_deadline_a_call_keeps_its_own_timeout(
    chain: tuple[Seen, grpc.aio.Channel, list[bool]],
) -> None:
    seen, channel, _ = chain
    assert (
        await channel.unary_unary(f"/{SERVICE}/Relay")(b"", metadata=user_metadata("alice"))
        == b"no deadline to wait for"
    )
    assert seen.middle_remaining is None
    assert seen.downstream_remaining is not None
    assert DOWNSTREAM_TIMEOUT - 2 < seen.downstream_remaining <= DOWNSTREAM_TIMEOUT + CLOCK_SLACK


class _Context:
    def __init__(self, remaining: float | None) -> None:
        self._remaining = remaining

    def time_remaining(self) -> float | None:
        return self._remaining


async def test_bounded_detach_and_tasks() -> None:
    assert deadlines.remaining() is None and deadlines.bounded(5.0) == 5.0
    deadlines.enter(_Context(2.0))
    assert 1.9 < deadlines.bounded(5.0) <= 2.0 and deadlines.bounded(0.5) == 0.5

    async def spawned() -> tuple[float | None, float | None]:
        inherited = deadlines.remaining()
        deadlines.detach()
        return inherited, deadlines.remaining()

    inherited, detached = await asyncio.create_task(spawned())
    assert inherited is not None and detached is None  # a task copies the deadline until it detaches
    assert deadlines.remaining() is not None  # ... and detaching there leaves the caller's alone
    deadlines.enter(_Context(-1.0))
    assert deadlines.bounded(5.0) == 0.0  # expired: calls fail at once
    deadlines.enter(_Context(None))
    assert deadlines.remaining() is None


async def test_a_run_outlives_the_deadline_of_the_call_that_started_it(
    make_database: DatabaseFactory,
) -> None:
    """StartRun with a 1 s deadline on a run that takes longer: the client's
    stream ends DEADLINE_EXCEEDED, the run goes on and finishes `done` — its
    calls to threads, memory and router after that second (appending the
    answer, titling) are not cut to the client's deadline (runs.py detaches)."""
    async with system(make_database, offline_token_delay=0.2) as sb:
        created = await sb.threads.CreateConversation(
            threads_service_pb2.CreateConversationRequest(), **as_user("alice")
        )
        started = time.monotonic()
        stream = sb.engine.StartRun(
            engine_service_pb2.StartRunRequest(
                conversation_id=created.conversation.id, message="Tell me a long story about leases"
            ),
            metadata=as_user("alice")["metadata"],
            timeout=1.0,
        )
        run_id = (await stream.read()).event.run_id
        with pytest.raises(grpc.aio.AioRpcError) as expired:
            while await stream.read() is not grpc.aio.EOF:
                pass
        assert expired.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED

        events = await collect(
            sb.engine.WatchRun(engine_service_pb2.WatchRunRequest(run_id=run_id), **as_user("alice"))
        )
        assert events[-1].WhichOneof("kind") == "final", events[-1]
        assert time.monotonic() - started > 1.0  # the run did outlive the deadline
        run = (
            await sb.engine.GetRun(engine_service_pb2.GetRunRequest(run_id=run_id), **as_user("alice"))
        ).run
        assert run.status == engine_pb2.RUN_STATUS_DONE, run.error
        entries = await sb.threads.ListEntries(
            threads_service_pb2.ListEntriesRequest(
                for_conversation=threads_service_pb2.ListEntriesRequest.ForConversation(
                    conversation_id=created.conversation.id
                )
            ),
            **as_user("alice"),
        )
        assert [e.run_id for e in entries.entries] == [run_id, run_id]  # question and answer appended
