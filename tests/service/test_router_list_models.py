"""RouterService.ListModels: the configured models for a model selector, in
configuration order, with their flags, paginated (SQLite and PostgreSQL)."""

from __future__ import annotations

import json

import grpc

from services.router.server import build_server
from services.router.settings import RouterSettings
from switchboard.router.v1 import router_pb2, router_service_pb2_grpc
from switchboard.router.v1 import router_service_pb2 as pb
from tests.service.harness import as_user, expect_error, running

MODELS = [
    {"id": "big", "provider": "acme", "model": "acme-xl", "profile": "strong", "expensive": True},
    {"id": "web", "provider": "acme", "model": "acme-web", "profile": "fast", "web_only": True},
    {"id": "mid", "provider": "acme", "model": "acme-m", "profile": "balanced"},
]


async def test_list_models_is_the_configuration_in_order_with_flags_and_pages(db_url: str) -> None:
    settings = RouterSettings(port=0, database_url=db_url, embedder="hashing", models_json=json.dumps(MODELS))
    async with running(build_server, settings) as (_, channel):
        stub = router_service_pb2_grpc.RouterServiceStub(channel)
        whole = await stub.ListModels(pb.ListModelsRequest(), **as_user("alice"))
        first = await stub.ListModels(pb.ListModelsRequest(page_size=2), **as_user("bob"))
        rest = await stub.ListModels(
            pb.ListModelsRequest(page_size=2, page_token=first.next_page_token), **as_user("bob")
        )
        await expect_error(
            stub.ListModels(pb.ListModelsRequest(page_token="bm90LWEtdG9rZW4"), **as_user("bob")),
            grpc.StatusCode.INVALID_ARGUMENT,
            "ERROR_REASON_INVALID_ARGUMENT",
        )
        await expect_error(
            stub.ListModels(pb.ListModelsRequest(page_size=-1), **as_user("bob")),
            grpc.StatusCode.INVALID_ARGUMENT,
            "ERROR_REASON_INVALID_ARGUMENT",
        )
    assert [(m.id, m.web_only, m.expensive) for m in whole.models] == [
        ("big", False, True),
        ("web", True, False),
        ("mid", False, False),
    ]
    assert whole.models[0].profile == router_pb2.MODEL_PROFILE_STRONG and whole.models[0].model == "acme-xl"
    assert whole.next_page_token == ""
    assert [m.id for m in first.models] == ["big", "web"] and first.next_page_token
    assert [m.id for m in rest.models] == ["mid"] and rest.next_page_token == ""
