"""What every service gets from the shared bootstrap: health, reflection,
and a shutdown that turns health NOT_SERVING before draining."""

from __future__ import annotations

import asyncio

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from services.threads.server import SERVICE_NAME, build_server
from services.threads.settings import ThreadsSettings


async def test_health_reflection_and_graceful_shutdown(db_url: str) -> None:
    service = await build_server(ThreadsSettings(port=0, database_url=db_url))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{service.port}")
    try:
        health = health_pb2_grpc.HealthStub(channel)
        for name in ("", SERVICE_NAME):
            reply = await health.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING

        reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        responses = [r async for r in reflection.ServerReflectionInfo(iter([request]), timeout=5)]
        names = {s.name for s in responses[0].list_services_response.service}
        assert {SERVICE_NAME, "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"} <= names

        # A watcher sees NOT_SERVING as soon as shutdown begins.
        watch = health.Watch(health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=10)
        assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
        stopping = asyncio.create_task(service.stop(1.0))
        assert (await watch.read()).status == health_pb2.HealthCheckResponse.NOT_SERVING
        await stopping
    finally:
        await channel.close()
