"""What the shared bootstrap does with requests a handler never sees:
malformed bytes and NUL in text are INVALID_ARGUMENT with an ErrorInfo (not
UNKNOWN/INTERNAL), an oversize message is RESOURCE_EXHAUSTED; and a stream
the client abandons mid-send is closed in the call's own task."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import grpc
import pytest

from services.shared.bootstrap import MAX_REQUEST_BYTES, start_service
from services.shared.errors import error_info
from services.shared.identity import user_metadata
from services.shared.settings import ServiceSettings
from services.threads.server import build_server
from services.threads.settings import ThreadsSettings
from switchboard.threads.v1 import threads_service_pb2
from tests.service.harness import running

CREATE = "/switchboard.threads.v1.ThreadsService/CreateConversation"
LIST = "/switchboard.threads.v1.ThreadsService/ListConversations"
WATCH = "/grpc.health.v1.Health/Watch"


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (payloads under 128 bytes)."""
    return bytes([number << 3 | 2, len(payload)]) + payload


async def _refused(call: grpc.aio.UnaryUnaryMultiCallable, raw: bytes) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call(raw, metadata=user_metadata("alice"), timeout=10)
    return refused.value


async def test_malformed_requests_are_invalid_argument(db_url: str) -> None:
    async with running(build_server, ThreadsSettings(port=0, database_url=db_url)) as (_, channel):
        create = channel.unary_unary(CREATE)
        title = 2  # CreateConversationRequest.title
        assert (
            threads_service_pb2.CreateConversationRequest.DESCRIPTOR.fields_by_name["title"].number == title
        )
        for raw, field in [
            (b"\xff\xff\xff", ""),  # not protobuf
            (_field(title, b"caf\xc3"), ""),  # a string that is not UTF-8
            (threads_service_pb2.CreateConversationRequest(title="a\x00b").SerializeToString(), "title"),
        ]:
            error = await _refused(create, raw)
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
            info = error_info(error)
            assert info is not None and info.reason == "ERROR_REASON_INVALID_ARGUMENT"
            assert info.metadata["method"] == CREATE and info.metadata.get("field", "") == field
        # Nothing was written by any of them.
        listed = await channel.unary_unary(LIST)(b"", metadata=user_metadata("alice"), timeout=10)
        assert threads_service_pb2.ListConversationsResponse.FromString(listed).conversations == []

        oversize = await _refused(create, b"x" * (MAX_REQUEST_BYTES + 1))
        assert oversize.code() == grpc.StatusCode.RESOURCE_EXHAUSTED

        # A streaming method (health's Watch) too.
        with pytest.raises(grpc.aio.AioRpcError) as watch:
            await channel.unary_stream(WATCH)(_field(1, b"\xfe"), timeout=10).read()
        assert watch.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_a_stream_abandoned_mid_send_is_closed_in_its_own_task() -> None:
    """The client reads one message and leaves while the next (larger than
    the flow-control window) is being sent: grpc.aio then drops the response
    generator unclosed, for the garbage collector to close in another task
    (where the tracing interceptor could not detach its context). Through the
    bootstrap's interceptors it is closed in the call's own task, every time."""
    started: list[asyncio.Task[object] | None] = []
    closed: list[asyncio.Task[object] | None] = []

    async def stream(request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        started.append(asyncio.current_task())
        try:
            yield b"first"
            yield b"x" * (2 * 1024 * 1024)
            await asyncio.sleep(30)
        finally:
            closed.append(asyncio.current_task())

    def register(server: grpc.aio.Server) -> Sequence[str]:
        handler = grpc.unary_stream_rpc_method_handler(stream)
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("test.Streams", {"S": handler}),)
        )
        return ["test.Streams"]

    def abandon(port: int, times: int) -> None:
        # A blocking client in a thread of its own, as another process would be.
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            for _ in range(times):
                responses = channel.unary_stream("/test.Streams/S")(b"", timeout=10, metadata=identity)
                assert next(responses) == b"first"
                responses.cancel()

    identity = user_metadata("alice")
    service = await start_service(ServiceSettings(port=0), register)
    try:
        await asyncio.to_thread(abandon, service.port, 10)
        for _ in range(40):
            if len(closed) == 10:
                break
            await asyncio.sleep(0.05)
        assert len(closed) == 10
        assert all(c is s for c, s in zip(closed, started, strict=True))
    finally:
        await service.stop(None)
