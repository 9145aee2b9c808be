"""Every HTTP route documents its response body in /openapi.json, and each
body the routes build is exactly what its model describes: the gateway runs
in-process (httpx.ASGITransport) over fake services that answer every RPC
with a message whose every field is set (and, second pass, with an empty
one), and each JSON body must equal its model's dump, field for field."""

from __future__ import annotations

import json
from typing import Any

import fastapi.routing
import grpc
import httpx
import pytest
from fastapi import FastAPI
from fastapi.encoders import jsonable_encoder
from fastapi.routing import APIRoute
from google.protobuf.descriptor import FieldDescriptor, ServiceDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from gateway import api_docs, responses
from gateway.app import create_app
from gateway.openai_compat.completion import Completion
from gateway.openai_compat.errors import openai_error
from gateway.settings import GatewaySettings
from switchboard.comments import COMMENTS
from switchboard.engine.v1 import engine_service_pb2, schedules_service_pb2
from switchboard.memory.v1 import memory_service_pb2, pages_service_pb2, projects_service_pb2
from switchboard.router.v1 import router_service_pb2
from switchboard.threads.v1 import threads_service_pb2

SCHEMA_REF = "#/components/schemas/"


def _app() -> FastAPI:
    return create_app(GatewaySettings())


def _api_routes(app: FastAPI) -> list[APIRoute]:
    """Every documented route, through the included routers."""
    found: list[APIRoute] = []
    pending: list[Any] = list(app.routes)
    while pending:
        route = pending.pop(0)
        included = getattr(route, "original_router", None)  # FastAPI includes routers lazily
        if included is not None:
            pending.extend(included.routes)
        elif isinstance(route, APIRoute) and route.include_in_schema:
            found.append(route)
    return found


# Bodies the A2A specification defines and its SDK encodes (an agent card, a
# JSON-RPC response): the protocol's schema, not one of ours.
PROTOCOL_DEFINED = {
    "GET /a2a/agents/{agent_id}/.well-known/agent-card.json",
    "GET /.well-known/agent-card.json",
    "POST /a2a/agents/{agent_id}",
}


def test_every_route_documents_a_typed_response_body() -> None:
    app = _app()
    spec = app.openapi()
    schemas = spec["components"]["schemas"]
    routes = _api_routes(app)
    assert len(routes) >= 50
    for route in routes:
        for method in route.methods:
            name = f"{method} {route.path}"
            answers = spec["paths"][route.path][method.lower()]["responses"]
            successes = {code: answer for code, answer in answers.items() if code.startswith("2")}
            assert successes, name
            if name in PROTOCOL_DEFINED:
                continue
            for code, answer in successes.items():
                content = answer.get("content", {})
                if code == "204":
                    assert not content, name
                    continue
                assert content, name
                for media, described in content.items():
                    if media == "text/event-stream":
                        assert described["schema"]["type"] == "string", name
                        continue
                    assert media == "application/json", name
                    ref = described["schema"]["$ref"]
                    assert ref.startswith(SCHEMA_REF), name
                    body = schemas[ref.removeprefix(SCHEMA_REF)]
                    # A described object, not a free-form dict.
                    assert body["type"] == "object" and body["properties"], name
                    assert body["additionalProperties"] is False, name
            # The error body: this API's, or OpenAI's on the /v1 routes.
            expected = "OpenAIErrorResponse" if route.path.startswith("/v1/") else "ErrorResponse"
            for code in ("4XX", "5XX"):
                error = answers[code]["content"]["application/json"]["schema"]["$ref"]
                assert error == SCHEMA_REF + expected, name
            assert "422" not in answers, f"{name}: validation errors are 400 here"


def test_every_response_body_and_field_says_what_it_means() -> None:
    """Descriptions come from the protos' comments (switchboard.comments)
    for the bodies derived from a message, and from gateway.responses for
    the others: none is left without."""
    spec = api_docs.openapi()
    schemas = spec["components"]["schemas"]
    names = api_docs.referenced(spec)
    assert {"Run", "Conversation", "ErrorResponse"} <= set(names)
    for name in names:
        assert schemas[name].get("description"), name
        for field, value in schemas[name].get("properties", {}).items():
            assert value.get("description"), f"{name}.{field}"
    # A proto comment reached the description of its field.
    status = schemas["Run"]["properties"]["status"]["description"]
    assert status.startswith(COMMENTS["switchboard.engine.v1.Run.status"])


def _fill(message: Message, depth: int = 0) -> Message:
    """Sets every field of `message` (one element per list and map) but the
    next page token: a
    number 7, text "x" (a JSON object for a `_json` field), the first enum
    value after UNSPECIFIED, messages recursively."""
    for field in message.DESCRIPTOR.fields:
        if field.name == "next_page_token":
            continue  # the last page: routes that read every page stop
        if field.containing_oneof is not None and field.containing_oneof.fields[0] is not field:
            continue  # one member per oneof
        if field.message_type is not None:
            if depth > 4:
                continue
            if field.message_type.GetOptions().map_entry:
                value_field = field.message_type.fields_by_name["value"]
                target = getattr(message, field.name)
                if value_field.message_type is not None:
                    _fill(target["x"], depth + 1)
                else:
                    target["x"] = _scalar(value_field)
            elif field.is_repeated:
                _fill(getattr(message, field.name).add(), depth + 1)
            else:
                _fill(getattr(message, field.name), depth + 1)
                getattr(message, field.name).SetInParent()
        elif field.is_repeated:
            getattr(message, field.name).append(_scalar(field))
        else:
            setattr(message, field.name, _scalar(field))
    return message


def _scalar(field: FieldDescriptor) -> Any:
    if field.type == FieldDescriptor.TYPE_ENUM:
        return field.enum_type.values[min(1, len(field.enum_type.values) - 1)].number
    if field.type == FieldDescriptor.TYPE_BOOL:
        return True
    if field.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return 0.5
    if field.type == FieldDescriptor.TYPE_STRING:
        return '{"key": 1}' if field.name.endswith("_json") else "x"
    if field.type == FieldDescriptor.TYPE_BYTES:
        return b"x"
    return 7


class _Stream:
    """A server stream that has ended: a run's answers 204, the live state's
    SSE closes at once."""

    async def read(self) -> Any:
        return grpc.aio.EOF

    def __aiter__(self) -> _Stream:
        return self

    async def __anext__(self) -> Any:
        raise StopAsyncIteration

    def cancel(self) -> None:
        pass


class FakeService:
    """Answers every unary RPC of `service` with a full (or empty) response."""

    def __init__(self, service: ServiceDescriptor, full: bool) -> None:
        self._methods = {m.name: m for m in service.methods}
        self._full = full

    def __getattr__(self, name: str) -> Any:
        method = self._methods[name]
        if method.server_streaming:
            return lambda *args, **kwargs: _Stream()

        async def unary(request: Message, *, timeout: float, metadata: Any) -> Message:
            response = GetMessageClass(method.output_type)()
            if not self._full:
                return response
            _fill(response)
            if name == "GetConversation":
                # A live one: an archived conversation is 404 on the /v1 routes.
                response.conversation.archived = False  # type: ignore[attr-defined]
            return response

        return unary


def _fake_app(full: bool) -> FastAPI:
    app = _app()
    services = {
        "engine": engine_service_pb2.DESCRIPTOR.services_by_name["EngineService"],
        "threads": threads_service_pb2.DESCRIPTOR.services_by_name["ThreadsService"],
        "memory": memory_service_pb2.DESCRIPTOR.services_by_name["MemoryService"],
        "pages": pages_service_pb2.DESCRIPTOR.services_by_name["PagesService"],
        "projects": projects_service_pb2.DESCRIPTOR.services_by_name["ProjectsService"],
        "router": router_service_pb2.DESCRIPTOR.services_by_name["RouterService"],
        "schedules": schedules_service_pb2.DESCRIPTOR.services_by_name["ScheduleService"],
    }
    for name, service in services.items():
        setattr(app.state, name, FakeService(service, full))
    return app


# A valid request per route that has a body or needs a query to reach its
# other branch; the other routes are called with "x" in each path parameter.
BODIES: dict[str, Any] = {
    "POST /api/agent/conversations": {"title": "t"},
    "POST /api/agent/agents/remote": {
        "id": "x",
        "card_url": "https://agents.example/.well-known/agent-card.json",
    },
    "PATCH /api/agent/conversations/{conversation_id}": {"pinned": True},
    "PUT /api/agent/conversations/{conversation_id}/sources": {"workspace": True},
    "POST /api/agent/conversations/{conversation_id}/messages": {"message": "hello"},
    "POST /api/agent/runs/{run_id}/feedback": {"skill_id": "x"},
    "PUT /api/agent/personal-settings": {"display_name": "Ana", "avatar": {"hat": 1}},
    "POST /api/agent/personal-settings/instructions-page": {"title": "Mine"},
    "PUT /api/agent/personal-settings/instructions-page/active": {"page_id": "x"},
    "PATCH /api/agent/pages/{page_id}": {"body": "text"},
    "POST /api/agent/pages/{page_id}/versions/{version}/restore": {},
    "PUT /api/agent/pages/{page_id}/acl": {"reader_user_ids": ["bob"], "reader_project_ids": ["apollo"]},
    "POST /api/agent/proposals/{proposal_id}/accept": {},
    "POST /api/agent/proposals/{proposal_id}/refuse": {},
    "PUT /api/agent/skills/{skill_id}/enablement": {"enabled": True},
    "POST /api/agent/skills": {"name": "s", "body": "b"},
    "PATCH /api/agent/skills/{skill_id}": {"description": "d"},
    "POST /api/agent/agents": {"id": "qa"},
    "PATCH /api/agent/agents/{agent_id}": {"persona": "p"},
    "POST /api/agent/agents/{agent_id}/asks": {"message": "hello"},
    "POST /api/agent/agents/import": {"files": [{"path": "agents/qa/log.jsonl", "content": ""}]},
    "PUT /api/agent/project-context": {"body": "context"},
    "POST /api/agent/project-context/import": {"files": [{"path": ".ideai/CONTEXT.md", "content": "c"}]},
    "PUT /api/agent/live-state/{agent_id}": {"activity": "testing", "ttl_seconds": 60},
    "POST /api/agent/notes": {"title": "n"},
    "POST /v1/chat/completions": {"model": "auto", "messages": [{"role": "user", "content": "hello"}]},
    "PATCH /api/agent/notes/{note_id}": {"title": "n"},
    "POST /api/schedules": {"cron": "0 9 * * *", "message": "m", "conversation_id": "c"},
    "PUT /api/agent/conversations/{conversation_id}/webhook": {"webhook_url": "https://example.com/h"},
    "PUT /api/agent/agents/{agent_id}/webhook": {"webhook_url": ""},
    "POST /api/agent/projects": {"id": "apollo", "display_name": "Apollo", "note_policy": "auto"},
    "PATCH /api/agent/projects/{project_id}": {"note_policy": "review"},
    "PUT /api/agent/projects/{project_id}/members/{user_id}": {"role": "editor"},
    "POST /v1/conversations": {"items": [{"role": "user", "content": "hello"}], "metadata": {"k": "v"}},
    "POST /v1/conversations/{conv_id}": {"metadata": {"k": "v"}},
    "POST /v1/conversations/{conv_id}/items": {"items": [{"role": "assistant", "content": "hello"}]},
}
# Second calls that take another branch of the same route.
QUERIES: dict[str, list[dict[str, str]]] = {
    "GET /api/agent/notes": [{"q": "search"}],
    "GET /api/agent/sources": [{"conversation_id": "x"}],
    "GET /api/agent/agents/{agent_id}/entries": [{"requester": "main"}, {"correlation_id": "c"}],
    "GET /api/agent/suggested-actions": [{"language": "fr", "selection": "du texte"}],
}
PATH_VALUES = {"version": "1", "response_id": "resp_run-1", "conv_id": "conv_x", "item_id": "msg_x"}


def _json(value: Any) -> str:
    # A route returns its model (or a dict of them): as it would print, with the fields it set.
    return json.dumps(jsonable_encoder(value, exclude_unset=True), sort_keys=True)


def _model_of(route: APIRoute) -> type[Any] | None:
    return route.response_model  # type: ignore[no-any-return]


@pytest.mark.parametrize("full", [True, False], ids=["every field set", "every field empty"])
async def test_every_json_body_is_exactly_its_model(full: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each route's own return value (the dict it built), before its model.
    built: dict[str, Any] = {}
    serialize = fastapi.routing.serialize_response

    async def recording(**kwargs: Any) -> Any:
        built["body"] = kwargs["response_content"]
        return await serialize(**kwargs)

    monkeypatch.setattr(fastapi.routing, "serialize_response", recording)
    app = _fake_app(full)
    checked = 0
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
        for route in _api_routes(app):
            for method in route.methods:
                key = f"{method} {route.path}"
                path = route.path
                for param in route.param_convertors:
                    path = path.replace("{" + param + "}", PATH_VALUES.get(param, "x"))
                body = BODIES.get(key)
                for params in [{}, *QUERIES.get(key, [])]:
                    answer = await client.request(method, path, json=body, params=params)
                    model = _model_of(route)
                    error_model = route.responses["4XX"]["model"]
                    if model is None or answer.status_code == 204:
                        # A stream: the fake engine's has ended, so a run's
                        # answers 204, and a chat completion a typed 502.
                        if answer.status_code >= 400:
                            error_model.model_validate(answer.json(), strict=True)
                        else:
                            assert answer.status_code in (200, 201, 204), (key, answer.text)
                        continue
                    # Empty services make a few routes refuse (e.g. feedback
                    # on a run without that skill): the error body is typed too.
                    if answer.status_code >= 400:
                        assert not full, (key, answer.text)
                        error_model.model_validate(answer.json(), strict=True)
                        continue
                    assert answer.status_code in (200, 201), (key, answer.text)
                    # What clients read is the dict the route built, every
                    # field and value (the model neither adds nor drops)...
                    data = answer.json()
                    assert _json(data) == _json(built.pop("body")), key
                    # ...and the model describes it: it validates strictly.
                    model.model_validate(data, strict=True)
                    checked += 1
    assert checked >= 50


def test_openai_bodies_are_their_models() -> None:
    """What the /v1 routes build outside FastAPI's models (a completion, its
    stream's chunks, an error) is what /openapi.json and the models say."""
    completion = Completion("run-1", "auto")
    usage = {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    responses.ChatCompletion.model_validate(completion.whole("Bonjour", usage), strict=True)
    for chunk in (
        completion.chunk({"role": "assistant", "content": ""}),
        completion.chunk({"content": "Bon"}),
        completion.chunk({"reasoning_content": "…"}),
        completion.chunk({}, "stop"),
        completion.usage_chunk(usage),
    ):
        responses.ChatCompletionChunk.model_validate(json.loads(chunk["data"]), strict=True)
    for error in (
        openai_error(404, "no such model", "unknown_model", "model"),
        openai_error(500, "internal error"),
    ):
        responses.OpenAIErrorResponse.model_validate(error, strict=True)
