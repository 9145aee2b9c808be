"""GET /api/agent/sources reads the engine's catalogue (ListSources, every
page) and keeps it for a while: the popover asks each time it opens. The
real engine behind it: tests/e2e/test_system.py."""

from __future__ import annotations

import httpx

from gateway.app import create_app
from gateway.catalog import EngineSources
from gateway.settings import GatewaySettings
from switchboard.engine.v1 import engine_pb2
from switchboard.engine.v1 import engine_service_pb2 as pb

MAIL = engine_pb2.Source(kind=engine_pb2.SOURCE_KIND_CONNECTOR, name="testmail", title="Test mail")
WIKI = engine_pb2.Source(kind=engine_pb2.SOURCE_KIND_MCP_SERVER, name="wiki", title="Wiki de l'équipe")
PAGES = {
    "": pb.ListSourcesResponse(sources=[MAIL], next_page_token="p2"),
    "p2": pb.ListSourcesResponse(sources=[WIKI]),
}


class CountingEngine:
    def __init__(self) -> None:
        self.tokens: list[str] = []

    async def ListSources(self, request: pb.ListSourcesRequest, **_: object) -> pb.ListSourcesResponse:
        self.tokens.append(request.page_token)
        return PAGES[request.page_token]


async def sources_twice(ttl: float) -> tuple[list[str], list[dict[str, object]]]:
    app = create_app(GatewaySettings())
    engine = CountingEngine()
    app.state.engine = engine
    app.state.sources = EngineSources(ttl)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        bodies = [(await client.get("/api/agent/sources")).json() for _ in range(2)]
    return engine.tokens, bodies


async def test_every_page_is_read_once_then_kept() -> None:
    tokens, (first, second) = await sources_twice(ttl=3600)
    assert tokens == ["", "p2"]  # both pages, once for both requests
    assert first == second
    assert first["connectors"] == [{"kind": "connector", "name": "testmail", "title": "Test mail"}]
    assert first["mcp_servers"] == [{"kind": "mcp", "name": "wiki", "title": "Wiki de l'équipe"}]


async def test_an_expired_catalogue_is_read_again() -> None:
    tokens, _ = await sources_twice(ttl=0)
    assert tokens == ["", "p2", "", "p2"]
