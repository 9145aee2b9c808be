"""Service identity: every method of every service the four servers publish
(found by reflection, described by the generated descriptors, so a new
service or method is covered without touching this file) refuses a call
without a valid identity token — none, a bare user header, a token signed
with another key, an expired one — with UNAUTHENTICATED, and accepts one
minted with the system's key. Health checks and reflection stay open."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator

import grpc
import jwt
import pytest
from google.protobuf import descriptor_pool
from google.protobuf.descriptor import MethodDescriptor
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from services.shared.bootstrap import start_service
from services.shared.identity import IDENTITY_METADATA_KEY, user_metadata
from services.shared.identity_tokens import ALGORITHM, AUDIENCE, ISSUER, IdentityKeyError, current
from services.shared.settings import ServiceSettings
from switchboard.threads.v1 import threads_service_pb2 as threads_pb
from switchboard.threads.v1 import threads_service_pb2_grpc
from tests.conftest import DatabaseFactory, MovableClock
from tests.service.system import system

SERVICES = [
    "engine.v1.EngineService",
    "router.v1.RouterService",
    "threads.v1.ThreadsService",
    "memory.v1.MemoryService",
    "memory.v1.PagesService",
    "memory.v1.HandoffService",
]
OPEN = {"grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"}
# Long enough for the slowest method to refuse or answer an empty request on
# a loaded machine; a method that accepted the call and then waits (a watch)
# ends with DEADLINE_EXCEEDED, which still says the identity was accepted.
CALL_TIMEOUT = 5.0
Metadata = tuple[tuple[str, str], ...]


def other_key_token(user: str) -> str:
    """Well-formed, but signed with a key the system does not hold."""
    now = int(time.time())
    claims = {"sub": user, "role": "user", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 60}
    return jwt.encode(claims, "another-key-that-is-long-enough-for-hs256!", algorithm=ALGORITHM)


async def published_services(channel: grpc.aio.Channel) -> list[str]:
    """The service names the server lists through reflection."""
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    call = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
    async for response in call:
        return [service.name for service in response.list_services_response.service]
    raise AssertionError("reflection answered nothing")


def methods_of(name: str) -> list[MethodDescriptor]:
    return list(descriptor_pool.Default().FindServiceByName(name).methods)


async def outcome(channel: grpc.aio.Channel, method: MethodDescriptor, metadata: Metadata) -> grpc.StatusCode:
    """The status of ``method`` called with an empty request (one, for a
    client stream) and ``metadata``; for a response stream, of its first message."""
    path = f"/{method.containing_service.full_name}/{method.name}"
    options = {"timeout": CALL_TIMEOUT, "metadata": metadata}
    try:
        if method.client_streaming and method.server_streaming:
            stream = channel.stream_stream(path)(iter([b""]), **options)
            await stream.read()
        elif method.client_streaming:
            await channel.stream_unary(path)(iter([b""]), **options)
        elif method.server_streaming:
            await channel.unary_stream(path)(b"", **options).read()
        else:
            await channel.unary_unary(path)(b"", **options)
    except grpc.aio.AioRpcError as error:
        return error.code()
    return grpc.StatusCode.OK


@pytest.fixture
async def channels(make_database: DatabaseFactory) -> AsyncIterator[dict[str, grpc.aio.Channel]]:
    """A plain channel to each of the four services, running in this process."""
    async with system(make_database) as sb:
        opened = {
            name: grpc.aio.insecure_channel(f"127.0.0.1:{service.port}")
            for name, service in sb.services.items()
        }
        try:
            yield opened
        finally:
            for channel in opened.values():
                await channel.close()


async def test_every_method_of_every_service_refuses_a_call_without_a_valid_identity(
    channels: dict[str, grpc.aio.Channel], clock: MovableClock
) -> None:
    expired = user_metadata("alice")
    clock.advance(current().lifetime + current().leeway + 1)
    refused: dict[str, Metadata] = {
        "no identity": (),
        "a bare user header": (("x-switchboard-user", "alice"),),
        "a user name as the token": ((IDENTITY_METADATA_KEY, "alice"),),
        "an unsigned token": ((IDENTITY_METADATA_KEY, jwt.encode({"sub": "alice"}, None, algorithm="none")),),
        "another key's token": ((IDENTITY_METADATA_KEY, other_key_token("alice")),),
        "an expired token": expired,
    }
    wrong: list[str] = []
    covered, published = 0, set()
    for server, channel in channels.items():
        names = [name for name in await published_services(channel) if name not in OPEN]
        assert names, f"{server} publishes no service"
        published |= set(names)
        for name in names:
            for method in methods_of(name):
                covered += 1
                for case, metadata in refused.items():
                    code = await outcome(channel, method, metadata)
                    if code != grpc.StatusCode.UNAUTHENTICATED:
                        wrong.append(f"{method.full_name} with {case}: {code.name}")
                code = await outcome(channel, method, user_metadata("alice"))
                if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.UNIMPLEMENTED):
                    wrong.append(f"{method.full_name} with a valid token: {code.name}")
    assert not wrong, "\n".join(wrong)
    # At least the six services of the four servers (and 79 methods when this was written).
    assert {f"switchboard.{name}" for name in SERVICES} <= published, published
    assert covered >= 79, covered


async def test_health_and_reflection_need_no_identity(channels: dict[str, grpc.aio.Channel]) -> None:
    for channel in channels.values():
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        assert "grpc.health.v1.Health" in await published_services(channel)


async def test_a_stolen_token_stops_working_after_its_lifetime(
    channels: dict[str, grpc.aio.Channel], clock: MovableClock
) -> None:
    threads = threads_service_pb2_grpc.ThreadsServiceStub(channels["threads"])
    stolen = user_metadata("alice")
    created = await threads.CreateConversation(
        threads_pb.CreateConversationRequest(title="x"), metadata=stolen
    )
    read = threads_pb.GetConversationRequest(conversation_id=created.conversation.id)
    # Within its lifetime (and the leeway) it is honoured...
    clock.advance(current().lifetime)
    assert (await threads.GetConversation(read, metadata=stolen)).conversation.id == created.conversation.id
    # ...past it, refused, while a freshly minted one still works.
    clock.advance(current().leeway + 1)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await threads.GetConversation(read, metadata=stolen)
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "expired" in (refused.value.details() or "")
    fresh = user_metadata("alice")
    assert fresh != stolen
    assert (await threads.GetConversation(read, metadata=fresh)).conversation.id == created.conversation.id


async def test_the_user_is_the_tokens_and_another_users_token_sees_nothing_of_hers(
    channels: dict[str, grpc.aio.Channel],
) -> None:
    threads = threads_service_pb2_grpc.ThreadsServiceStub(channels["threads"])
    created = await threads.CreateConversation(
        threads_pb.CreateConversationRequest(title="privé"), metadata=user_metadata("alice")
    )
    read = threads_pb.GetConversationRequest(conversation_id=created.conversation.id)
    with pytest.raises(grpc.aio.AioRpcError) as hidden:
        # The bare header naming alice next to bob's token changes nothing.
        await threads.GetConversation(read, metadata=(*user_metadata("bob"), ("x-switchboard-user", "alice")))
    assert hidden.value.code() == grpc.StatusCode.NOT_FOUND


async def test_a_service_without_an_identity_key_does_not_start() -> None:
    with pytest.raises(IdentityKeyError, match="SWITCHBOARD_IDENTITY_KEY"):
        await start_service(ServiceSettings(port=0, identity_key=""), lambda _server: [])


@pytest.mark.parametrize("module", ["services.router", "gateway"])
async def test_a_process_started_without_an_identity_key_exits_at_once_saying_why(module: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHBOARD_IDENTITY_KEY")}
    env["SWITCHBOARD_ROUTER_EMBEDDER"] = "hashing"
    done = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", module], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "no identity key: set SWITCHBOARD_IDENTITY_KEY or SWITCHBOARD_IDENTITY_KEY_FILE" in done.stderr
