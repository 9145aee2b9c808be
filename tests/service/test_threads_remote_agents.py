"""Registering a remote A2A agent by its card URL (RegisterRemoteAgent),
through the real stub: the card is read with the a2a-sdk's resolver from a
real a2a-sdk server, and every URL it cannot use is a clear
INVALID_ARGUMENT naming card_url, never an internal error."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from switchboard.threads.v1 import threads_pb2, threads_service_pb2_grpc
from switchboard.threads.v1 import threads_service_pb2 as pb
from tests.fakes.a2a_agent import FakeAgent, serve_agent
from tests.fakes.llm_server import serve_app
from tests.processes import free_port
from tests.service.harness import as_user, expect_error

Stub = threads_service_pb2_grpc.ThreadsServiceStub
INVALID = (grpc.StatusCode.INVALID_ARGUMENT, "ERROR_REASON_INVALID_ARGUMENT")


@pytest.fixture
def threads_options() -> dict[str, Any]:
    # The test's servers are on loopback, which only development allows.
    return {"remote_agent_allow_loopback": True, "remote_card_timeout": 2.0}


@pytest.fixture
def stub(threads_channel: grpc.aio.Channel) -> Stub:
    return Stub(threads_channel)


@pytest.fixture(scope="module")
def agent() -> Iterator[FakeAgent]:
    with serve_agent("Traducteur", {}, streaming=True) as served:
        yield served


def card(**fields: Any) -> dict[str, Any]:
    return {"name": "Broken", "description": "d", "version": "1", "skills": [], **fields}


@pytest.fixture(scope="module")
def bad_cards() -> Iterator[str]:
    """Bodies at card URLs that are no usable agent card."""
    rpc = {"url": "http://127.0.0.1:9/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    bodies = {
        "/no-interface": JSONResponse(card()),
        "/grpc-only": JSONResponse(
            card(supportedInterfaces=[{**rpc, "protocolBinding": "GRPC", "url": "127.0.0.1:9"}])
        ),
        "/no-name": JSONResponse(card(name="", supportedInterfaces=[rpc])),
        "/private-endpoint": JSONResponse(card(supportedInterfaces=[{**rpc, "url": "https://10.1.2.3/a2a"}])),
        "/not-json": PlainTextResponse("<html>hello</html>"),
        "/array": JSONResponse([1, 2]),
        "/wrong-types": JSONResponse(
            card(capabilities={"streaming": "yes please"}, supportedInterfaces=[rpc])
        ),
    }
    routes = [Route(path, lambda _request, body=body: body) for path, body in bodies.items()]
    port = free_port()
    with serve_app(Starlette(routes=routes), port):
        yield f"http://127.0.0.1:{port}"


async def register(stub: Stub, agent_id: str, url: str, user: str = "alice") -> threads_pb2.Agent:
    request = pb.RegisterRemoteAgentRequest(agent_id=agent_id, card_url=url)
    response = await stub.RegisterRemoteAgent(request, **as_user(user))
    agent: threads_pb2.Agent = response.agent
    return agent


async def test_a_remote_agent_is_registered_from_its_card_and_listed_as_remote(
    stub: Stub, agent: FakeAgent
) -> None:
    registered = await register(stub, "traducteur", agent.card_url)
    assert registered.display_name == "Traducteur" and registered.owner == "alice"
    assert registered.remote == threads_pb2.RemoteAgent(
        card_url=agent.card_url,
        card_name="Traducteur",
        description="Traducteur, a scripted remote agent",
        streaming=True,
    )
    listed = await stub.ListAgents(pb.ListAgentsRequest(), **as_user("alice"))
    assert [a.remote.card_url for a in listed.agents if a.id == "traducteur"] == [agent.card_url]
    # A retry is the agent unchanged; the id with another URL, or a local
    # agent's id, is taken.
    assert await register(stub, "traducteur", agent.card_url) == registered
    await expect_error(
        register(stub, "traducteur", agent.card_url + "?v=2"),
        grpc.StatusCode.ALREADY_EXISTS,
        "ERROR_REASON_ALREADY_EXISTS",
    )
    await stub.CreateAgent(pb.CreateAgentRequest(agent=threads_pb2.Agent(id="qa")), **as_user("alice"))
    await expect_error(
        register(stub, "qa", agent.card_url), grpc.StatusCode.ALREADY_EXISTS, "ERROR_REASON_ALREADY_EXISTS"
    )
    local = await stub.GetAgent(pb.GetAgentRequest(agent_id="qa"), **as_user("alice"))
    assert not local.agent.HasField("remote")


@pytest.mark.parametrize(
    ("url", "why"),
    [
        # The outbound guard, as for webhooks: loopback is allowed here, the rest is not.
        ("http://10.0.0.7/.well-known/agent-card.json", "private"),
        ("https://169.254.169.254/latest/meta-data", "private or special-purpose"),
        ("http://example.com/.well-known/agent-card.json", "must be https"),
        ("ftp://example.com/card.json", "must be an https URL"),
        ("https://user:secret@example.com/card.json", "credentials"),
        ("not a url", "spaces"),
        ("", "card_url is required"),
    ],
)
async def test_a_url_the_guard_refuses_is_invalid_before_any_request(stub: Stub, url: str, why: str) -> None:
    error = await expect_error(register(stub, "refused", url), *INVALID)
    assert why in (error.details() or "")
    await expect_error(
        stub.GetAgent(pb.GetAgentRequest(agent_id="refused"), **as_user("alice")),
        grpc.StatusCode.NOT_FOUND,
        "ERROR_REASON_NOT_FOUND",
    )


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/missing", "HTTP 404"),
        ("/not-json", "parse JSON"),
        ("/array", "must be a JSON object"),
        ("/wrong-types", "validate agent card"),
        ("/no-name", "has no name"),
        ("/no-interface", "declares no interface Switchboard can call"),
        ("/grpc-only", "it declares: GRPC"),
        ("/private-endpoint", "private"),
    ],
)
async def test_a_card_that_cannot_be_used_is_invalid_and_says_why(
    stub: Stub, bad_cards: str, path: str, why: str
) -> None:
    error = await expect_error(register(stub, "broken", bad_cards + path), *INVALID)
    details = error.details() or ""
    assert details.startswith("card_url: ") and why in details, details


async def test_an_unreachable_card_is_invalid_within_the_timeout(stub: Stub) -> None:
    nobody = free_port()  # nothing listens there
    error = await expect_error(register(stub, "gone", f"http://127.0.0.1:{nobody}/card.json"), *INVALID)
    assert "card_url: " in (error.details() or "") and "Network communication error" in (
        error.details() or ""
    )
