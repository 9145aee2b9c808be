"""EngineService.ListSources: the connectors, then the MCP servers, the
engine is configured with, in configuration order, by name and title, paged;
nothing of a server's command, arguments or environment (SQLite and
PostgreSQL)."""

from __future__ import annotations

import json

import grpc

from services.engine.server import build_server
from services.engine.settings import EngineSettings
from switchboard.engine.v1 import engine_pb2, engine_service_pb2_grpc
from switchboard.engine.v1 import engine_service_pb2 as pb
from tests.service.harness import as_user, expect_error, running

SECRET = "sk-never-shown-4711"
SERVERS = [
    # Never started: listing the catalogue starts no server.
    {
        "name": "wiki",
        "title": "Wiki de l'équipe",
        "command": "/nonexistent/wiki-mcp",
        "args": ["--token", SECRET],
        "env": {"WIKI_TOKEN": SECRET},
    },
    {"name": "files", "command": "/nonexistent/files-mcp"},
]


async def test_list_sources_is_the_configuration_in_order_paged_without_secrets(db_url: str) -> None:
    settings = EngineSettings(
        port=0, database_url=db_url, connectors="testmail", mcp_servers_json=json.dumps(SERVERS)
    )
    async with running(build_server, settings) as (_, channel):
        stub = engine_service_pb2_grpc.EngineServiceStub(channel)
        whole = await stub.ListSources(pb.ListSourcesRequest(), **as_user("alice"))
        first = await stub.ListSources(pb.ListSourcesRequest(page_size=2), **as_user("bob"))
        rest = await stub.ListSources(
            pb.ListSourcesRequest(page_size=2, page_token=first.next_page_token), **as_user("bob")
        )
        await expect_error(
            stub.ListSources(pb.ListSourcesRequest(page_token="bm90LWEtdG9rZW4"), **as_user("bob")),
            grpc.StatusCode.INVALID_ARGUMENT,
            "ERROR_REASON_INVALID_ARGUMENT",
        )
        await expect_error(
            stub.ListSources(pb.ListSourcesRequest(page_size=-1), **as_user("bob")),
            grpc.StatusCode.INVALID_ARGUMENT,
            "ERROR_REASON_INVALID_ARGUMENT",
        )
    assert [(s.kind, s.name, s.title) for s in whole.sources] == [
        (engine_pb2.SOURCE_KIND_CONNECTOR, "testmail", "Test mail"),
        (engine_pb2.SOURCE_KIND_MCP_SERVER, "wiki", "Wiki de l'équipe"),
        # No title configured: the name.
        (engine_pb2.SOURCE_KIND_MCP_SERVER, "files", "files"),
    ]
    assert whole.next_page_token == ""
    assert [s.name for s in first.sources] == ["testmail", "wiki"] and first.next_page_token
    assert [s.name for s in rest.sources] == ["files"] and rest.next_page_token == ""
    wire = whole.SerializeToString()
    assert SECRET.encode() not in wire and b"nonexistent" not in wire


async def test_an_engine_without_sources_lists_none(db_url: str) -> None:
    async with running(build_server, EngineSettings(port=0, database_url=db_url)) as (_, channel):
        stub = engine_service_pb2_grpc.EngineServiceStub(channel)
        listed = await stub.ListSources(pb.ListSourcesRequest(), **as_user("alice"))
    assert list(listed.sources) == [] and listed.next_page_token == ""
