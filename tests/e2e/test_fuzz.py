"""Property-based fuzzing (hypothesis) of the real processes' inputs.

* HTTP: every JSON route of the gateway (POST/PATCH/PUT) gets bodies of wrong
  types, unknown fields, valid shapes holding hostile text (NUL, lone
  surrogates, bidi marks, text at and past each length limit), deep nesting,
  invalid UTF-8, bytes that are no JSON, bodies past ``max_body_bytes``, under
  assorted content types: the answer is always a 2xx or one of 400, 404, 409,
  413, 429, in the gateway's error shape, never a 5xx.
* gRPC: every method of every service (and health, reflection) gets raw
  bytes through a generic call: random bytes, truncated valid messages, a
  ``string`` field that is not UTF-8, valid messages with random field values,
  and one message past the server's receive limit: the status is never
  INTERNAL, UNKNOWN or DATA_LOSS; malformed bytes are INVALID_ARGUMENT with an
  ErrorInfo, oversize ones RESOURCE_EXHAUSTED.
* Afterwards every process is alive, health is SERVING and a run works.

Reproducible: each property runs a fixed number of examples, derandomized
(the same inputs on every run) and without an example database. The number
of cases of each kind is printed at the end (and checked against a floor).

On SQLite only by default, for time (the malformed-input handling is the
same code on both); SWITCHBOARD_FUZZ_BACKENDS=sqlite,postgres runs both."""

from __future__ import annotations

import json
import os
import string
import time
import typing
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import grpc
import httpx
import pytest
from a2a.types import a2a_pb2
from google.protobuf import descriptor as pb_descriptor
from google.protobuf import message_factory
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from gateway import params, schemas
from gateway.openai_compat import conversations_api
from gateway.openai_compat.exchange import ChatCompletionBody
from services.shared.bootstrap import MAX_REQUEST_BYTES
from services.shared.identity import user_metadata
from switchboard.engine.v1 import engine_service_pb2
from switchboard.memory.v1 import handoff_service_pb2, memory_service_pb2, pages_service_pb2
from switchboard.router.v1 import router_service_pb2
from switchboard.threads.v1 import threads_service_pb2
from tests.e2e.conftest import SERVICES, Launched
from tests.e2e.sse import read_events

pytestmark = pytest.mark.parametrize(
    "launched",
    os.environ.get("SWITCHBOARD_FUZZ_BACKENDS", "sqlite").split(","),
    indirect=True,
    scope="module",
)
CASES: Counter[str] = Counter()
MISSING = "00000000-0000-4000-8000-000000000000"
FUZZ = settings(
    max_examples=30,
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
GRPC_FUZZ = settings(FUZZ, max_examples=12)

# ---------------------------------------------------------------- HTTP bodies

MAX_BODY_BYTES = 256 * 1024  # the gateway's default max_body_bytes
HTTP_OK = {200, 201, 204}
HTTP_REFUSED = {400, 404, 409, 413, 429}


def _routes() -> list[tuple[str, str, type[BaseModel] | None]]:
    """Every JSON route (method, path, body model), on objects that do not
    exist where a valid body would otherwise start a run."""
    return [
        ("POST", "/api/agent/conversations", schemas.CreateConversationBody),
        ("PATCH", "/api/agent/conversations/{conversation}", schemas.UpdateConversationBody),
        ("PUT", "/api/agent/conversations/{conversation}/sources", schemas.SourcesUpdateBody),
        ("POST", f"/api/agent/conversations/{MISSING}/archive", None),
        ("POST", f"/api/agent/conversations/{MISSING}/messages", schemas.MessageBody),
        ("POST", f"/api/agent/runs/{MISSING}/cancel", None),
        ("PUT", f"/api/agent/conversations/{MISSING}/webhook", schemas.WebhookDefaultBody),
        ("PUT", f"/api/agent/agents/{MISSING}/webhook", schemas.WebhookDefaultBody),
        ("POST", f"/api/agent/runs/{MISSING}/feedback", schemas.FeedbackBody),
        ("PUT", "/api/agent/personal-settings", schemas.PersonalSettingsBody),
        ("POST", "/api/agent/personal-settings/instructions-page", schemas.InstructionPageBody),
        ("PUT", "/api/agent/personal-settings/instructions-page/active", schemas.ActivePageBody),
        ("POST", f"/api/agent/proposals/{MISSING}/accept", schemas.DecisionBody),
        ("POST", f"/api/agent/proposals/{MISSING}/refuse", schemas.DecisionBody),
        ("PUT", "/api/agent/skills/{skill}/enablement", schemas.EnablementBody),
        # Catalog writes: a user is refused (403) once the body is valid.
        ("POST", "/api/agent/skills", schemas.CreateSkillBody),
        ("PATCH", f"/api/agent/skills/{MISSING}", schemas.UpdateSkillBody),
        ("POST", "/api/agent/agents", schemas.CreateAgentBody),
        ("POST", f"/api/agent/agents/{MISSING}/asks", schemas.AskBody),
        ("PATCH", f"/api/agent/agents/{MISSING}", schemas.UpdateAgentBody),
        ("POST", "/api/agent/agents/import", schemas.ImportThreadBody),
        # Fetches nothing: a fuzzed card_url is refused by the outbound guard first.
        ("POST", "/api/agent/agents/remote", schemas.RegisterRemoteAgentBody),
        ("PUT", "/api/agent/project-context", schemas.ProjectContextBody),
        ("POST", "/api/agent/project-context/import", schemas.ImportProjectBody),
        ("PUT", "/api/agent/live-state/fuzz", schemas.LiveStateBody),
        ("PATCH", f"/api/agent/pages/{MISSING}", schemas.UpdatePageBody),
        ("POST", f"/api/agent/pages/{MISSING}/versions/1/restore", schemas.RestoreBody),
        ("POST", "/api/agent/notes", schemas.NoteBody),
        ("PATCH", f"/api/agent/notes/{MISSING}", schemas.UpdateNoteBody),
        # The OpenAI-compatible endpoint (a random model name is refused
        # before any conversation is created).
        ("POST", "/v1/chat/completions", ChatCompletionBody),
        ("POST", "/v1/conversations", conversations_api.NewConversation),
        ("POST", f"/v1/conversations/conv_{MISSING}", conversations_api.ConversationUpdate),
        ("POST", f"/v1/conversations/conv_{MISSING}/items", conversations_api.NewItems),
    ]


ROUTES = _routes()

# Text a client may send: NUL and other controls, lone surrogates (JSON's
# "\ud800"), bidi overrides, non-characters, astral planes.
hostile_char = st.one_of(
    st.characters(codec="utf-8"),
    st.sampled_from(["\x00", "\x1b", "\u202e", "\ufeff", "\uffff", "\U0010ffff", "\U0001f600", "\u0301"]),
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
)
hostile_text = st.one_of(
    st.text(hostile_char, max_size=40),
    # At and just past the usual limits (64, 100, 128, 200, 1000 characters).
    st.builds(
        lambda c, n: c * n,
        st.sampled_from(["a", "é", "\x00", "\U0001f600"]),
        st.sampled_from([64, 65, 100, 101, 128, 129, 200, 201, 1000, 1001, 20_001, 32_001]),
    ),
)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    hostile_text,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def _value_for(annotation: Any) -> st.SearchStrategy[Any]:
    """A value of about the right type for a body field: right type with
    hostile content, or a wrong type now and then."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Union or (origin is not None and type(None) in args):
        return st.one_of(*(_value_for(a) for a in args))
    if annotation is type(None):
        return st.none()
    if origin is typing.Literal:
        return st.sampled_from(args) | hostile_text
    if annotation is str:
        return hostile_text
    if annotation is bool:
        return st.booleans() | json_scalars
    if origin is list:
        return st.lists(hostile_text, max_size=120) | json_values
    if origin is dict:
        return st.dictionaries(st.text(max_size=10), json_values, max_size=5) | _deep_object()
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _shaped(annotation)
    return json_values


def _deep_object() -> st.SearchStrategy[Any]:
    """An object nested ``depth`` levels: {"a": {"a": ... 1}}."""

    def nest(depth: int) -> Any:
        value: Any = 1
        for _ in range(depth):
            value = {"a": value}
        return value

    return st.sampled_from([50, 200, 400, 900]).map(nest)


def _shaped(model: type[BaseModel]) -> st.SearchStrategy[dict[str, Any]]:
    """The model's fields, each present or not, plus now and then an unknown one."""
    hints = typing.get_type_hints(model)
    fields = {name: _value_for(hints[name]) for name in model.model_fields}
    return st.fixed_dictionaries(
        {}, optional={**fields, "unknown_field": json_values, "__proto__": json_values}
    )


def _deep_array(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def body_strategy(model: type[BaseModel] | None) -> st.SearchStrategy[tuple[str, bytes]]:
    """(kind, raw body): every kind of body a client could send."""
    shaped = _shaped(model) if model is not None else st.dictionaries(st.text(max_size=8), json_values)
    dumps: Callable[[Any], bytes] = lambda value: json.dumps(value).encode()  # noqa: E731 - \ud800 stays escaped
    return st.one_of(
        json_values.map(lambda v: ("wrong_type", dumps(v))),
        shaped.map(lambda v: ("shaped", dumps(v))),
        shaped.map(lambda v: ("shaped", dumps(v))),
        st.sampled_from([2, 100, 1000, 5000, 100_000]).map(lambda d: ("deep_nesting", _deep_array(d))),
        # Valid JSON but for one string that is not UTF-8.
        st.binary(min_size=1, max_size=16)
        .filter(lambda b: not _is_utf8(b))
        .map(lambda b: ("invalid_utf8", b'{"title": "' + b + b'", "message": "' + b + b'"}')),
        st.binary(max_size=64).map(lambda b: ("not_json", b)),
        st.text(string.printable, max_size=40).map(lambda t: ("not_json", t.encode())),
        st.sampled_from([MAX_BODY_BYTES + 1, 2 * MAX_BODY_BYTES]).map(
            lambda n: ("oversize", dumps({"title": "x" * n}))
        ),
    )


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


CONTENT_TYPES = st.sampled_from(
    ["application/json", "application/json", "application/json; charset=utf-8", "text/plain", "", None]
)


@pytest.fixture(scope="module")
def alice(launched: Launched) -> Iterator[httpx.Client]:
    with launched.client("alice") as client:
        yield client


@pytest.fixture(scope="module")
def root(launched: Launched) -> Iterator[httpx.Client]:
    with launched.client("root") as client:
        yield client


@pytest.fixture(scope="module")
def targets(alice: httpx.Client) -> dict[str, str]:
    """Real ids for the routes that change an object (rename, sources, enablement)."""
    conversation = alice.post("/api/agent/conversations", json={"title": "fuzzed"}).json()["id"]
    skill = alice.get("/api/agent/skills").json()["skills"][0]["id"]
    made = alice.post("/api/agent/agents", json={"id": "fuzz-a2a", "display_name": "Fuzz"})
    assert made.status_code in (200, 201), made.text
    return {"conversation": conversation, "skill": skill, "agent": "fuzz-a2a"}


# The A2A JSON-RPC methods (gateway/a2a/): an envelope naming one, with params
# of any shape; A2A's errors are JSON-RPC errors in a 200, never -32603.
A2A_METHODS = st.sampled_from(
    [
        "SendMessage",
        "SendStreamingMessage",
        "GetTask",
        "ListTasks",
        "CancelTask",
        "SubscribeToTask",
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
        "GetExtendedAgentCard",
        "message/send",
    ]
)
JSON_RPC_INTERNAL_ERROR = -32603


@st.composite
def json_rpc_body(draw: st.DrawFn) -> tuple[str, bytes]:
    if draw(st.booleans()):
        return draw(body_strategy(None))
    params = draw(
        st.one_of(
            json_values,
            st.fixed_dictionaries(
                {"id": st.text(max_size=70)},
                optional={
                    "message": st.fixed_dictionaries(
                        {},
                        optional={
                            "messageId": st.text(max_size=80),
                            "contextId": st.text(max_size=80),
                            "taskId": st.text(max_size=5),
                            "role": st.sampled_from(["ROLE_USER", "ROLE_AGENT", "x", 7]),
                            "parts": st.lists(
                                st.one_of(st.fixed_dictionaries({"text": st.text(max_size=30)}), json_values),
                                max_size=3,
                            ),
                        },
                    ),
                    "taskId": st.text(max_size=70),
                    "pageSize": st.integers(-5, 500),
                },
            ),
        )
    )
    envelope = {
        "jsonrpc": draw(st.sampled_from(["2.0", "1.0", 2])),
        "id": draw(st.one_of(st.integers(), st.text(max_size=5), st.none())),
        "method": draw(A2A_METHODS),
        "params": params,
    }
    return "json_rpc", json.dumps(envelope).encode()


def test_a2a_json_rpc_bodies_are_refused_never_internal(alice: httpx.Client, targets: dict[str, str]) -> None:
    url = f"/a2a/agents/{targets['agent']}"

    @FUZZ
    @given(case=json_rpc_body(), content_type=CONTENT_TYPES)
    def check(case: tuple[str, bytes], content_type: str | None) -> None:
        kind, body = case
        headers = {"A2A-Version": "1.0", **({"Content-Type": content_type} if content_type else {})}
        with alice.stream("POST", url, content=body, headers=headers) as response:
            status = response.status_code
            streaming = response.headers.get("content-type", "").startswith("text/event-stream")
            text = "" if streaming else response.read().decode(errors="replace")
        CASES[f"a2a {kind}"] += 1
        assert status in HTTP_OK | HTTP_REFUSED, (status, text[:500])
        if text and status == 200:
            error = json.loads(text).get("error") or {}
            assert error.get("code") != JSON_RPC_INTERNAL_ERROR, (body[:300], text[:500])

    check()


@pytest.mark.parametrize(("method", "path", "model"), ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
def test_http_bodies_are_refused_never_500(
    alice: httpx.Client,
    targets: dict[str, str],
    method: str,
    path: str,
    model: type[BaseModel] | None,
) -> None:
    url = path.format(**targets)

    @FUZZ
    @given(case=body_strategy(model), content_type=CONTENT_TYPES)
    def check(case: tuple[str, bytes], content_type: str | None) -> None:
        kind, body = case
        headers = {"Content-Type": content_type} if content_type is not None else {}
        response = alice.request(method, url, content=body, headers=headers)
        CASES[f"http {kind}"] += 1
        status = response.status_code
        assert status in HTTP_OK | HTTP_REFUSED, (status, response.text[:500])
        if status == 200 and response.headers.get("content-type", "").startswith("text/event-stream"):
            return
        if status in HTTP_REFUSED:
            error = response.json()["error"]
            assert error["code"] and error["message"], error
            if kind == "oversize":
                assert status == 413, response.text[:300]

    check()


# ------------------------------------------- HTTP paths, query strings, headers

# Values for a path or query parameter, or a header: well-formed unknown ids,
# text past each length limit, controls, separators, percent signs, any
# Unicode, and numbers out of range (for the integer ones).
EDGE_TEXT = st.one_of(
    st.sampled_from(
        [
            MISSING,
            "",
            " ",
            "x" * 129,
            "x" * 2001,
            "7" * 5000,
            "a b",
            "..",
            "%",
            "%00",
            "\x00",
            "\t\n",
            "\u202e",
            "-1",
            "9" * 30,
            "1e9",
            "true",
            "../../etc/passwd",
            "<script>",
            "'; drop table runs; --",
        ]
    ),
    st.text(max_size=40),
    st.text(string.ascii_letters + string.digits + "-_.:", min_size=1, max_size=140),
    st.integers(-(2**70), 2**70).map(str),
)
# Header values h11 can send: visible ASCII and Latin-1 (no CR, LF or NUL).
HEADER_TEXT = st.one_of(
    EDGE_TEXT.map(lambda t: t.encode("latin-1", "ignore")),
    st.binary(max_size=60),
).map(lambda raw: bytes(b for b in raw if b >= 0x20 and b != 0x7F).strip())
ACCEPTS = st.sampled_from([None, "*/*", "text/event-stream", "application/json", "image/png", "\u00e9"])


def _operations() -> list[tuple[str, str, dict[str, Any]]]:
    """Every operation of the gateway's OpenAPI schema: new routes are fuzzed
    without being listed here."""
    from gateway.app import create_app
    from gateway.settings import GatewaySettings

    schema = create_app(GatewaySettings()).openapi()
    return [
        (method.upper(), path, operation)
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
    ]


OPERATIONS = _operations()


def _body(operation: dict[str, Any], path: str) -> bytes | None:
    """A small body for routes that take one: on the OpenAI endpoint a model
    that does not exist (refused before any conversation is made)."""
    if "requestBody" not in operation:
        return None
    if path == "/v1/chat/completions":
        return json.dumps({"model": "fuzz-missing", "messages": [{"role": "user", "content": "hi"}]}).encode()
    return b"{}"


@st.composite
def edge_request(
    draw: st.DrawFn, operation: dict[str, Any]
) -> tuple[dict[str, str], dict[str, str], dict[str, bytes]]:
    """Path values, query values and headers for one request."""
    path_values: dict[str, str] = {}
    query: dict[str, str] = {}
    headers: dict[str, bytes] = {}
    for parameter in operation.get("parameters", []):
        where, name = parameter["in"], parameter["name"]
        if where == "path":
            path_values[name] = draw(EDGE_TEXT.filter(len))
        elif where == "query" and draw(st.booleans()):
            query[name] = draw(EDGE_TEXT)
        elif where == "header" and draw(st.booleans()):
            headers[name] = draw(HEADER_TEXT)
    if draw(st.integers(0, 3)) == 0:
        headers["Authorization"] = draw(
            st.one_of(HEADER_TEXT, HEADER_TEXT.map(lambda v: b"Bearer " + v), st.just(b"Bearer"))
        )
    if draw(st.booleans()):
        headers["Content-Type"] = draw(st.one_of(CONTENT_TYPES.filter(bool).map(str.encode), HEADER_TEXT))
    accept = draw(ACCEPTS)
    if accept is not None:
        headers["Accept"] = accept.encode("latin-1")
    if draw(st.integers(0, 5)) == 0:
        query[draw(st.sampled_from(["unknown", "page_size", "%"]))] = draw(EDGE_TEXT)
    return path_values, query, headers


@pytest.mark.parametrize(
    ("method", "path", "operation"), OPERATIONS, ids=[f"{m} {p}" for m, p, _ in OPERATIONS]
)
def test_paths_queries_and_headers_are_refused_never_500(
    alice: httpx.Client, method: str, path: str, operation: dict[str, Any]
) -> None:
    body = _body(operation, path)

    @FUZZ
    @given(case=edge_request(operation))
    def check(case: tuple[dict[str, str], dict[str, str], dict[str, bytes]]) -> None:
        path_values, query, extra = case
        url = path.format(**{k: quote(v, safe="") for k, v in path_values.items()})
        headers = {k: v.strip() for k, v in extra.items()}  # h11 sends no edge whitespace
        if body is not None and "Content-Type" not in headers:
            headers["Content-Type"] = b"application/json"
        with alice.stream(method, url, params=query, headers=headers, content=body) as response:
            status = response.status_code
            streaming = response.headers.get("content-type", "").startswith("text/event-stream")
            text = "" if streaming else response.read().decode(errors="replace")
        CASES["edge request"] += 1
        # 503 is an honest "try again" (a dependency's limit); any other 5xx is a bug.
        assert status < 500 or status == 503, (method, url, query, headers, status, text[:500])
        if status >= 400 and status != 503:
            assert json.loads(text)["error"], text[:300]
            if any(len(v) > 128 for v in path_values.values()):
                assert status in (400, 401, 404, 405, 413), (url, status)

    check()


OVERSIZE_ID = "7" * 5000


@pytest.mark.parametrize(
    ("method", "path", "operation"),
    [o for o in OPERATIONS if "{" in o[1]],
    ids=[f"{m} {p}" for m, p, _ in OPERATIONS if "{" in p],
)
def test_a_malformed_path_id_is_400_and_a_well_formed_unknown_one_404(
    alice: httpx.Client, root: httpx.Client, method: str, path: str, operation: dict[str, Any]
) -> None:
    """Refused at the edge, before any service: a 5,000-character id, an id
    with a control character or a space; a well-formed id that names nothing
    is the service's 404 (bodies are valid where one is needed), asked by an
    admin so that routes gated by role reach the lookup."""
    names = [p["name"] for p in operation["parameters"] if p["in"] == "path"]
    integers = {
        p["name"] for p in operation["parameters"] if p["in"] == "path" and p["schema"]["type"] == "integer"
    }
    ids = all(
        p["schema"].get("pattern") == params.ID_PATTERN
        for p in operation["parameters"]
        if p["in"] == "path" and p["name"] not in integers
    )
    # A name chosen by the caller (a live-state agent) may hold spaces and accents.
    for bad in (OVERSIZE_ID, "a\x01b", *(("a b", "é") if ids else ())):
        values = {n: ("1" if n in integers else quote(bad, safe="")) for n in names}
        response = alice.request(method, path.format(**values), content=_body(operation, path) or None)
        assert response.status_code == 400, (path, bad[:20], response.status_code, response.text[:300])
        # The /v1 routes answer in OpenAI's error shape.
        invalid = "invalid_request" if path.startswith("/v1/") else "INVALID_ARGUMENT"
        assert response.json()["error"]["code"] == invalid, response.text[:300]
        CASES["edge malformed_path"] += 1
    if method in ("GET", "DELETE"):
        values = {n: ("1" if n in integers else MISSING) for n in names}
        response = root.request(method, path.format(**values))
        assert response.status_code == 404, (path, response.status_code, response.text[:300])
        CASES["edge unknown_path"] += 1


def test_last_event_id_that_is_no_sequence_is_400(alice: httpx.Client) -> None:
    for value in ("abc", "1" * 19, "-1", "\u00b2"):
        response = alice.get(
            f"/api/agent/runs/{MISSING}/events", headers={"Last-Event-ID": value.encode("latin-1")}
        )
        assert response.status_code == 400, (value, response.text[:300])
    assert alice.get(f"/api/agent/runs/{MISSING}/events", headers={"Last-Event-ID": "12"}).status_code == 404


# ---------------------------------------------------------------- gRPC requests

SERVICE_MODULES = {
    "engine": [engine_service_pb2],
    "threads": [threads_service_pb2],
    "memory": [memory_service_pb2, pages_service_pb2, handoff_service_pb2],
    "router": [router_service_pb2],
}
REFUSED_CODES = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.DATA_LOSS}


def _methods() -> list[tuple[str, pb_descriptor.MethodDescriptor]]:
    methods: list[tuple[str, pb_descriptor.MethodDescriptor]] = []
    for process, modules in SERVICE_MODULES.items():
        for module in modules:
            for service in module.DESCRIPTOR.services_by_name.values():
                methods.extend((process, method) for method in service.methods)
    # Health's Check and Watch; its List is not implemented by grpcio-health-checking's servicer.
    health = health_pb2.DESCRIPTOR.services_by_name["Health"]
    methods.extend(("threads", health.methods_by_name[name]) for name in ("Check", "Watch"))
    return methods


METHODS = _methods()


def _path(method: pb_descriptor.MethodDescriptor) -> str:
    return f"/{method.containing_service.full_name}/{method.name}"


def message_strategy(descriptor: pb_descriptor.Descriptor, depth: int = 0) -> st.SearchStrategy[bytes]:
    """A valid serialized message with random field values."""
    cls = message_factory.GetMessageClass(descriptor)

    def field_values(field: pb_descriptor.FieldDescriptor) -> st.SearchStrategy[Any]:
        t = pb_descriptor.FieldDescriptor
        if field.message_type is not None:
            if depth >= 2:
                return st.just(b"")
            return message_strategy(field.message_type, depth + 1)
        if field.type == t.TYPE_STRING:
            return st.one_of(
                st.text(st.characters(codec="utf-8"), max_size=30),
                st.sampled_from(["", MISSING, "default", "alice", "auto", "offline", " ", "\x00"]),
            )
        if field.type == t.TYPE_BYTES:
            return st.binary(max_size=20)
        if field.type == t.TYPE_BOOL:
            return st.booleans()
        if field.type == t.TYPE_ENUM:
            return st.integers(-3, 12)  # proto3 enums are open: unknown values too
        if field.type in (t.TYPE_DOUBLE, t.TYPE_FLOAT):
            return st.floats(allow_nan=True, allow_infinity=True, width=32)
        if field.type in (t.TYPE_UINT32, t.TYPE_FIXED32):
            return st.integers(0, 2**32 - 1)
        if field.type in (t.TYPE_UINT64, t.TYPE_FIXED64):
            return st.integers(0, 2**64 - 1)
        if field.type in (t.TYPE_INT64, t.TYPE_SINT64, t.TYPE_SFIXED64):
            return st.integers(-(2**63), 2**63 - 1)
        return st.integers(-(2**31), 2**31 - 1)

    @st.composite
    def build(draw: st.DrawFn) -> bytes:
        message = cls()
        for field in descriptor.fields:
            if not draw(st.booleans()):
                continue
            if field.message_type is not None and field.message_type.GetOptions().map_entry:
                continue  # maps: left empty
            values = field_values(field)
            repeated = field.is_repeated
            drawn = draw(st.lists(values, max_size=3)) if repeated else [draw(values)]
            for value in drawn:
                if field.message_type is not None:
                    sub = message_factory.GetMessageClass(field.message_type).FromString(value)
                    if repeated:
                        getattr(message, field.name).add().CopyFrom(sub)
                    else:
                        getattr(message, field.name).CopyFrom(sub)
                elif repeated:
                    getattr(message, field.name).append(value)
                else:
                    setattr(message, field.name, value)
        return bytes(message.SerializeToString())

    return build()


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _string_paths(descriptor: pb_descriptor.Descriptor, depth: int = 0) -> list[list[int]]:
    """Field-number paths to every string field, two messages deep."""
    paths: list[list[int]] = []
    for field in descriptor.fields:
        if field.type == pb_descriptor.FieldDescriptor.TYPE_STRING:
            paths.append([field.number])
        elif field.message_type is not None and depth < 2:
            if not field.message_type.GetOptions().map_entry:
                paths.extend([field.number, *p] for p in _string_paths(field.message_type, depth + 1))
    return paths


def bad_string_strategy(descriptor: pb_descriptor.Descriptor, nul: bool) -> st.SearchStrategy[bytes]:
    """A valid message, then one string field (maybe nested) holding bytes
    that are not UTF-8, or (``nul``) valid UTF-8 text with a U+0000 in it."""
    paths = _string_paths(descriptor)
    if nul:
        bad = st.tuples(st.text(max_size=5), st.text(max_size=5)).map(
            lambda parts: f"{parts[0]}\x00{parts[1]}".encode()
        )
    else:
        bad = st.binary(min_size=1, max_size=12).filter(lambda b: not _is_utf8(b))

    def encode(path: list[int], payload: bytes) -> bytes:
        for number in reversed(path):
            payload = _length_delimited(number, payload)
        return payload

    return st.builds(
        lambda prefix, path, payload: prefix + encode(path, payload),
        message_strategy(descriptor),
        st.sampled_from(paths),
        bad,
    )


def grpc_strategy(descriptor: pb_descriptor.Descriptor) -> st.SearchStrategy[tuple[str, bytes]]:
    kinds = [
        st.binary(min_size=1, max_size=64).map(lambda b: ("random_bytes", b)),
        st.builds(
            lambda raw, cut: ("truncated", raw[: int(len(raw) * cut)]),
            message_strategy(descriptor).filter(len),
            st.floats(0, 0.999),
        ),
        message_strategy(descriptor).map(lambda b: ("random_valid", b)),
    ]
    if _string_paths(descriptor):
        kinds.append(bad_string_strategy(descriptor, nul=False).map(lambda b: ("invalid_utf8", b)))
        kinds.append(bad_string_strategy(descriptor, nul=True).map(lambda b: ("nul_text", b)))
    return st.one_of(*kinds)


@pytest.fixture(scope="module")
def channels(launched: Launched) -> Iterator[dict[str, grpc.Channel]]:
    opened = {
        service: grpc.insecure_channel(
            f"127.0.0.1:{launched.ports[service]}", options=[("grpc.max_send_message_length", -1)]
        )
        for service in SERVICES
    }
    yield opened
    for channel in opened.values():
        channel.close()


def _invoke(
    channel: grpc.Channel,
    method: pb_descriptor.MethodDescriptor,
    raw: bytes,
    user: str | None,
    metadata: tuple[tuple[str, str], ...] | None = None,
) -> grpc.StatusCode:
    """Sends ``raw`` as the request, as ``user`` (their signed identity) or
    with ``metadata``; the status (OK once a stream's first message has
    come: it is then cancelled)."""
    if metadata is None:
        metadata = user_metadata(user) if user else ()
    try:
        if method.server_streaming:
            responses = channel.unary_stream(_path(method))(raw, timeout=10, metadata=metadata)
            try:
                next(responses, None)
            finally:
                responses.cancel()
        else:
            channel.unary_unary(_path(method))(raw, timeout=10, metadata=metadata)
    except grpc.RpcError as error:
        assert isinstance(error, grpc.Call)
        code = error.code()
        if code == grpc.StatusCode.CANCELLED and method.server_streaming:
            return grpc.StatusCode.OK  # our own cancel, after the first message
        assert code not in REFUSED_CODES, (code, error.details())
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            _assert_error_info(error)
        return code
    return grpc.StatusCode.OK


def _assert_error_info(error: grpc.Call) -> None:
    status = rpc_status.from_call(error)
    assert status is not None, error.details()
    infos = [d for d in status.details if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR)]
    assert infos, status


@pytest.mark.parametrize(
    ("process", "method"), METHODS, ids=[f"{p}:{m.containing_service.name}.{m.name}" for p, m in METHODS]
)
def test_grpc_requests_are_refused_never_internal(
    channels: dict[str, grpc.Channel], process: str, method: pb_descriptor.MethodDescriptor
) -> None:
    channel = channels[process]
    # Health checking (and reflection) answer probes without an identity.
    open_to_all = method.containing_service.full_name.startswith("grpc.")

    @GRPC_FUZZ
    @given(case=grpc_strategy(method.input_type), user=st.sampled_from(["alice", "fuzzer", None]))
    def check(case: tuple[str, bytes], user: str | None) -> None:
        kind, raw = case
        code = _invoke(channel, method, raw, user)
        CASES[f"grpc {kind}"] += 1
        if user is None and not open_to_all:  # who calls is checked before what the call says
            assert code == grpc.StatusCode.UNAUTHENTICATED, code
        elif kind in ("invalid_utf8", "nul_text"):
            assert code == grpc.StatusCode.INVALID_ARGUMENT, code

    check()
    # One request past the receive limit, which gRPC itself refuses.
    oversize = _length_delimited(1, b"x" * MAX_REQUEST_BYTES)
    assert _invoke(channel, method, oversize, "alice") == grpc.StatusCode.RESOURCE_EXHAUSTED
    CASES["grpc oversize"] += 1


# The gateway's A2A gRPC binding (the a2a-sdk's A2AService): the caller is a
# bearer token, the agent the request's tenant.
A2A_METHODS_GRPC = list(a2a_pb2.DESCRIPTOR.services_by_name["A2AService"].methods)
A2A_CALLERS = ["alice", "bob", "no token", "bad token", "basic", "internal identity"]
A2A_CLIENT_ERRORS = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.UNIMPLEMENTED,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
}


def a2a_metadata(launched: Launched, caller: str) -> tuple[tuple[str, str], ...]:
    return {
        "alice": (("authorization", f"Bearer {launched.token('alice')}"),),
        "bob": (("authorization", f"Bearer {launched.token('bob')}"),),
        "no token": (),
        "bad token": (("authorization", "Bearer not-a-token"),),
        "basic": (("authorization", "Basic YWxpY2U6c2VjcmV0"),),
        # The services' signed identity is no A2A credential.
        "internal identity": tuple(user_metadata("alice")),
    }[caller]


@st.composite
def a2a_request(draw: st.DrawFn, descriptor: pb_descriptor.Descriptor, agent: str) -> tuple[str, bytes]:
    """A fuzzed request, half of them naming a tenant: the real agent, an
    unknown one, or odd text."""
    kind, raw = draw(grpc_strategy(descriptor))
    if "tenant" in descriptor.fields_by_name and draw(st.booleans()):
        tenant = draw(
            st.sampled_from([agent, "no-such-agent", "", " ", "../x", "é" * 80, "a\x00b", "x" * 300])
        )
        number = descriptor.fields_by_name["tenant"].number
        raw += _length_delimited(number, tenant.encode())  # the last occurrence of a field wins
        kind = f"{kind}+tenant"
    return kind, raw


@pytest.mark.parametrize("method", A2A_METHODS_GRPC, ids=[m.name for m in A2A_METHODS_GRPC])
def test_a2a_grpc_requests_are_client_errors_never_internal(
    launched: Launched, targets: dict[str, str], method: pb_descriptor.MethodDescriptor
) -> None:
    channel = grpc.insecure_channel(f"127.0.0.1:{launched.ports['a2a']}")

    @GRPC_FUZZ
    @given(case=a2a_request(method.input_type, targets["agent"]), caller=st.sampled_from(A2A_CALLERS))
    def check(case: tuple[str, bytes], caller: str) -> None:
        kind, raw = case
        code = _invoke(channel, method, raw, None, a2a_metadata(launched, caller))
        CASES[f"grpc a2a {kind.partition('+')[0]}"] += 1
        assert code in A2A_CLIENT_ERRORS, (kind, caller, code)
        if caller not in ("alice", "bob") and code != grpc.StatusCode.INVALID_ARGUMENT:
            assert code == grpc.StatusCode.UNAUTHENTICATED, (kind, caller, code)

    try:
        check()
    finally:
        channel.close()


def test_reflection_refuses_malformed_requests(channels: dict[str, grpc.Channel]) -> None:
    """A client-streaming method (reflection) checks each request it reads."""
    call = channels["memory"].stream_stream("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
    for raw in (b"\xff\xff\xff", _length_delimited(3, b"\xff\xfe"), _length_delimited(7, b"\xc3")):
        with pytest.raises(grpc.RpcError) as refused:
            list(call(iter([raw]), timeout=10))
        error = refused.value
        assert isinstance(error, grpc.Call) and error.code() == grpc.StatusCode.INVALID_ARGUMENT
        CASES["grpc reflection_malformed"] += 1


# ---------------------------------------------------------------- afterwards


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found.extend(int(c) for c in (task / "children").read_text().split())
    return found


def test_every_process_survived_and_serves(
    launched: Launched,
    alice: httpx.Client,
    channels: dict[str, grpc.Channel],
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert launched.process.poll() is None, launched.log.read_text()[-3000:]
    children = _children(launched.process.pid)
    assert len(children) == 5 and all(Path(f"/proc/{pid}").exists() for pid in children)
    for service in SERVICES:
        reply = health_pb2_grpc.HealthStub(channels[service]).Check(
            health_pb2.HealthCheckRequest(), timeout=5
        )
        assert reply.status == health_pb2.HealthCheckResponse.SERVING, service
    assert alice.get("/healthz").json() == {"status": "ok"}

    # A normal run, start to finish.
    conversation = alice.post("/api/agent/conversations", json={"title": "after the fuzz"}).json()["id"]
    started = time.monotonic()
    with alice.stream(
        "POST",
        f"/api/agent/conversations/{conversation}/messages",
        json={"message": "Summarise our plan", "request_id": str(uuid.uuid4())},
    ) as response:
        assert response.status_code == 200, response.read()
        events = list(read_events(response))
    assert events[-1].event == "final", events[-1]
    assert time.monotonic() - started < 30

    http = {k: v for k, v in CASES.items() if k.startswith("http ")}
    grpc_cases = {k: v for k, v in CASES.items() if k.startswith("grpc ")}
    edges = {k: v for k, v in CASES.items() if k.startswith("edge ")}
    with capsys.disabled():
        print(
            f"\nfuzz cases ({launched.backend}): HTTP {sum(http.values())} {dict(sorted(http.items()))}; "
            f"gRPC {sum(grpc_cases.values())} {dict(sorted(grpc_cases.items()))}; "
            f"HTTP paths, queries, headers {sum(edges.values())} {dict(sorted(edges.items()))}"
        )
    # Floors, so that a strategy that silently stops producing is noticed.
    assert sum(http.values()) >= len(ROUTES) * 25
    assert CASES["edge request"] >= len(OPERATIONS) * 25
    assert sum(grpc_cases.values()) >= len(METHODS) * 11
    assert CASES["grpc oversize"] == len(METHODS)
    CASES.clear()
