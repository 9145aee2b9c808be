"""The launched system's gRPC ports, as a process on the same host sees
them: a caller without the system's identity key cannot act for a user (a
bare user header, or a token it signed itself with another key, is
UNAUTHENTICATED on every service), while the gateway, which holds the key,
serves that user; health needs no identity."""

from __future__ import annotations

import time
from typing import Any

import grpc
import jwt
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.shared.identity import IDENTITY_METADATA_KEY, user_metadata
from services.shared.identity_tokens import ALGORITHM, AUDIENCE, ISSUER
from switchboard.engine.v1 import engine_service_pb2, engine_service_pb2_grpc
from switchboard.memory.v1 import memory_service_pb2, memory_service_pb2_grpc
from switchboard.router.v1 import router_service_pb2, router_service_pb2_grpc
from switchboard.threads.v1 import threads_service_pb2, threads_service_pb2_grpc
from tests.e2e.conftest import Launched

# One read-only call per service, acting for the user: stub, method, request.
CALLS: dict[str, tuple[Any, str, Any]] = {
    "threads": (
        threads_service_pb2_grpc.ThreadsServiceStub,
        "ListConversations",
        threads_service_pb2.ListConversationsRequest,
    ),
    "memory": (memory_service_pb2_grpc.MemoryServiceStub, "ListNotes", memory_service_pb2.ListNotesRequest),
    "router": (router_service_pb2_grpc.RouterServiceStub, "ListSkills", router_service_pb2.ListSkillsRequest),
    "engine": (engine_service_pb2_grpc.EngineServiceStub, "ListRuns", engine_service_pb2.ListRunsRequest),
}


def outsider_token(user: str) -> str:
    now = int(time.time())
    claims = {"sub": user, "role": "user", "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 60}
    return jwt.encode(claims, "an-outsider-guessing-at-the-key-0123456789", algorithm=ALGORITHM)


@pytest.mark.parametrize("service", sorted(CALLS))
def test_without_the_key_no_one_acts_for_a_user_on_a_service_port(launched: Launched, service: str) -> None:
    user = launched.user("alice")
    with launched.client("alice") as gateway:
        created = gateway.post("/api/agent/conversations", json={"title": "mine"})
        assert created.status_code == 201, created.text
    fields = {"conversation_id": created.json()["id"]} if service == "engine" else {}
    with grpc.insecure_channel(f"127.0.0.1:{launched.ports[service]}") as channel:
        stub, name, request = CALLS[service]
        method = getattr(stub(channel), name)
        for forged in ((("x-switchboard-user", user),), ((IDENTITY_METADATA_KEY, outsider_token(user)),)):
            with pytest.raises(grpc.RpcError) as refused:
                method(request(**fields), metadata=forged, timeout=10)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED, service
        # This process holds the run's key (tests/identity_key.py), as the gateway does.
        method(request(**fields), metadata=user_metadata(user), timeout=10)
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
