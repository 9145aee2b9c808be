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


WEB_MODELS = [
    {"id": "quick", "provider": "acme", "model": "acme-s", "profile": "fast"},
    {"id": "mid", "provider": "acme", "model": "acme-m", "profile": "balanced"},
    {"id": "online", "provider": "seeker", "model": "sk-online", "profile": "balanced", "web_search": True},
]


async def test_auto_chooses_the_configured_web_search_model_for_a_request_that_needs_the_web(
    db_url: str,
) -> None:
    """Through the real stub, in English and French: a request that needs the
    web goes to the web-search model and the route says why; the same kind of
    request without that need keeps the fast model. ListModels shows the flag."""
    settings = RouterSettings(
        port=0, database_url=db_url, embedder="hashing", models_json=json.dumps(WEB_MODELS)
    )
    needing = {
        "Search the web for the opening hours of the Orsay museum": 'a web search: "Search the web"',
        "Cherche sur le web les horaires du musée d'Orsay": 'a web search: "Cherche sur le web"',
        "What is the latest news about the rail strike?": 'the news: "latest news"',
        "Quelles sont les actualités d'aujourd'hui ?": "the news: \"actualités d'aujourd'hui\"",
    }
    not_needing = ["What are the opening hours in our office wiki?", "Quels sont les horaires du bureau ?"]
    alice = as_user("alice")
    async with running(build_server, settings) as (_, channel):
        stub = router_service_pb2_grpc.RouterServiceStub(channel)
        listed = await stub.ListModels(pb.ListModelsRequest(), **alice)
        routes = {
            text: await stub.RouteModel(pb.RouteModelRequest(text=text, requested_model="auto"), **alice)
            for text in [*needing, *not_needing]
        }
        message = await stub.RouteMessage(
            pb.RouteMessageRequest(text="Cherche sur le web les horaires du musée d'Orsay"), **alice
        )
    assert [(m.id, m.web_search) for m in listed.models] == [
        ("quick", False),
        ("mid", False),
        ("online", True),
    ]
    for text, why in needing.items():
        route = routes[text]
        assert (route.model.id, route.model.provider, route.needs_web, route.routed) == (
            "online",
            "seeker",
            True,
            True,
        ), route.reason
        assert f"needs the web ({why}): only the web-search models" in route.reason
    for text in not_needing:
        assert (routes[text].model.id, routes[text].needs_web) == ("quick", False)
        assert "web" not in routes[text].reason
    assert message.model.model.id == "online" and message.model.needs_web
