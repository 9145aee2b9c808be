"""The SSE relay against a fake engine: a client that stops reading is
dropped without slowing another client of the same runs, the disconnect
policy decides whether a run is cancelled, and bad bodies never reach a
service."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
import httpx
import pytest
from fastapi import FastAPI

from gateway.app import create_app
from gateway.settings import GatewaySettings
from gateway.streams import SSE_DROPPED
from switchboard.engine.v1 import engine_pb2, engine_service_pb2

EVENTS = 60


class FakeCall:
    """A server stream of a run's events: one every ``gap`` seconds, the
    last one terminal; records whether the gateway cancelled it."""

    def __init__(self, run_id: str, after: int, gap: float) -> None:
        self.run_id, self.next, self.gap = run_id, after + 1, gap
        self.cancelled = asyncio.Event()

    async def read(self) -> Any:
        if self.next > EVENTS:
            return grpc.aio.EOF
        await asyncio.sleep(self.gap)
        sequence, self.next = self.next, self.next + 1
        event = engine_pb2.RunEvent(run_id=self.run_id, sequence=sequence)
        if sequence == EVENTS:
            event.final.text = "done"
        else:
            event.delta.text = f"t{sequence} "
        return engine_service_pb2.WatchRunResponse(event=event)

    def cancel(self) -> bool:
        self.cancelled.set()
        return True


class FakeEngine:
    def __init__(self, gap: float = 0.005) -> None:
        self.gap = gap
        self.calls: list[FakeCall] = []
        self.cancelled_runs: list[str] = []

    def WatchRun(self, request: engine_service_pb2.WatchRunRequest, **_: Any) -> FakeCall:  # noqa: N802
        call = FakeCall(request.run_id, request.after_sequence, self.gap)
        self.calls.append(call)
        return call

    async def CancelRun(self, request: engine_service_pb2.CancelRunRequest, **_: Any) -> Any:  # noqa: N802
        self.cancelled_runs.append(request.run_id)
        return engine_service_pb2.CancelRunResponse()


class NoService:
    """Any RPC on it fails the test: a bad body must be refused first."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"{name} was called for a request that should have been refused")


def app_with(engine: Any, **settings: Any) -> FastAPI:
    app = create_app(GatewaySettings(sse_ping_seconds=60, **settings))
    app.state.engine = engine
    for name in ("threads", "memory", "pages", "projects", "router"):
        setattr(app.state, name, NoService())
    return app


async def asgi_get(app: FastAPI, path: str, send: Any, receive: Any) -> None:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"test")],
        "client": ("127.0.0.1", 1),
        "server": ("test", 80),
    }
    try:
        await app(scope, receive, send)
    except Exception:  # the stuck client's send timing out ends its response
        pass


async def never_disconnects() -> dict[str, Any]:
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


async def test_a_client_that_stops_reading_is_dropped_without_slowing_another() -> None:
    engine = FakeEngine()
    app = app_with(engine, sse_client_queue=5, sse_send_timeout=0.5)
    dropped_before = SSE_DROPPED._value.get()
    first_chunk = asyncio.Event()

    async def stuck_send(message: dict[str, Any]) -> None:
        # Takes the response start and one chunk, then blocks like a full socket.
        if message["type"] == "http.response.body" and message.get("body"):
            if first_chunk.is_set():
                await asyncio.Event().wait()
            first_chunk.set()

    stuck = asyncio.create_task(asgi_get(app, "/api/agent/runs/r1/events", stuck_send, never_disconnects))
    await first_chunk.wait()
    started = time.monotonic()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        response = await client.get("/api/agent/runs/r1/events")
    elapsed = time.monotonic() - started
    ids = [int(line[3:]) for line in response.text.splitlines() if line.startswith("id:")]
    assert response.status_code == 200 and ids == list(range(1, EVENTS + 1))
    # The reader got every event at the engine's pace (60 x 5 ms), not the stuck one's.
    assert elapsed < EVENTS * engine.gap + 1.0
    stuck_call, reader_call = engine.calls
    # The stuck client was dropped once 5 events waited: its engine stream
    # released long before the run ended, and its connection closed.
    await asyncio.wait_for(stuck_call.cancelled.wait(), 1)
    assert stuck_call.next < EVENTS / 2
    await asyncio.wait_for(stuck, 2)
    assert SSE_DROPPED._value.get() == dropped_before + 1
    assert engine.cancelled_runs == []  # dropped is not a disconnect: the run goes on


async def leave_after_first_event(app: FastAPI) -> None:
    got_one = asyncio.Event()

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            got_one.set()

    async def receive() -> dict[str, Any]:
        await got_one.wait()
        return {"type": "http.disconnect"}

    await asyncio.wait_for(asgi_get(app, "/api/agent/runs/r2/events", send, receive), 5)


@pytest.mark.parametrize(("policy", "cancelled"), [("continue", []), ("cancel", ["r2"])])
async def test_the_disconnect_policy_decides_whether_the_run_is_cancelled(
    policy: str, cancelled: list[str]
) -> None:
    engine = FakeEngine(gap=0.02)
    app = app_with(engine, disconnect_policy=policy)
    await leave_after_first_event(app)
    await asyncio.wait_for(engine.calls[0].cancelled.wait(), 1)  # the engine stream is released
    for _ in range(50):
        if app.state.background == set():
            break
        await asyncio.sleep(0.01)
    assert engine.cancelled_runs == cancelled


async def test_a_run_that_ended_is_not_cancelled_when_its_client_leaves() -> None:
    engine = FakeEngine(gap=0)
    app = app_with(engine, disconnect_policy="cancel")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        response = await client.get("/api/agent/runs/r3/events", headers={"Last-Event-ID": "58"})
    assert [line for line in response.text.splitlines() if line.startswith("id:")] == ["id: 59", "id: 60"]
    await asyncio.sleep(0.05)
    assert engine.cancelled_runs == []


@functools.cache
def refusing_app() -> FastAPI:
    """One app for every refused request: nothing reaches a service, so no
    request changes it (its lifespan is never entered)."""
    return app_with(NoService())


@pytest.fixture
async def no_services() -> AsyncIterator[httpx.AsyncClient]:
    app = refusing_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        yield client


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", "/api/agent/conversations/c/messages", {"message": ""}, 400),
        ("POST", "/api/agent/conversations/c/messages", {"message": " "}, 400),
        ("POST", "/api/agent/conversations/c/messages", {"message": "x" * 32_001}, 413),
        ("POST", "/api/agent/conversations/c/messages", {"message": "hi", "busy_policy": "shove"}, 400),
        ("POST", "/api/agent/conversations/c/messages", {"message": "hi", "extra": 1}, 400),
        ("POST", "/api/agent/conversations/c/messages", {"message": "hi", "language": "français"}, 400),
        ("POST", "/api/agent/conversations/c/messages", {"message": "hi", "language": "fr;q=1"}, 400),
        ("PUT", "/api/agent/conversations/c/sources", {"workspace": "maybe"}, 400),
        ("PUT", "/api/agent/personal-settings", {}, 400),
        ("PUT", "/api/agent/personal-settings", {"chat_mode": "fullscreen"}, 400),
        ("PUT", "/api/agent/personal-settings", {"avatar": "not an object"}, 400),
        ("POST", "/api/agent/personal-settings/instructions-page", {"page_id": "p", "template_id": "t"}, 400),
        ("PUT", "/api/agent/personal-settings/instructions-page/active", {"page_id": ""}, 400),
        ("POST", "/api/agent/proposals/p/accept", {"reason": "x" * 1001}, 400),
        ("POST", "/api/agent/runs/r/feedback", {}, 400),
        ("PUT", "/api/agent/skills/s/enablement", {"auto_use": "sometimes"}, 400),
        ("POST", "/api/agent/agents", {"id": "Not A Slug"}, 400),
        ("POST", "/api/agent/agents/qa/asks", {"message": "hi", "requester": ""}, 400),
        ("GET", "/api/agent/agents/qa/entries?requester=a&correlation_id=b", None, 400),
        ("GET", "/api/agent/conversations?page_size=-1", None, 400),
        ("GET", "/api/agent/proposals?state=maybe", None, 400),
        ("PATCH", "/api/agent/agents/ops", {}, 400),
        ("GET", "/api/agent/project-context?project_id=bad id!", None, 400),
        ("PUT", "/api/agent/live-state/qa", {"activity": ""}, 400),
        ("PATCH", "/api/agent/pages/p", {}, 400),
        ("POST", "/api/agent/pages/p/versions/0/restore", None, 400),
        ("PATCH", "/api/agent/notes/n", {}, 400),
        ("POST", "/api/agent/notes", {"kind": "gossip", "title": "x"}, 400),
    ],
)
async def test_bad_requests_are_refused_before_any_rpc(
    no_services: httpx.AsyncClient, method: str, path: str, body: Any, status: int
) -> None:
    response = await no_services.request(method, path, json=body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] in ("INVALID_ARGUMENT", "PAYLOAD_TOO_LARGE") and error["message"]


@pytest.mark.parametrize(
    "body", [b'{"avatar": {"hat": {"size": NaN}}}', b'{"avatar": {"sizes": [1, Infinity]}}']
)
async def test_an_avatar_number_json_cannot_carry_is_refused_before_any_rpc(
    no_services: httpx.AsyncClient, body: bytes
) -> None:
    # Python's JSON reader accepts NaN and Infinity; a Struct cannot carry them.
    response = await no_services.put(
        "/api/agent/personal-settings", content=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "INVALID_ARGUMENT"


async def test_a_stuck_last_write_ends_the_response_after_the_send_timeout() -> None:
    """sse_starlette bounds each event's write but not the response's last
    (empty) one; a client that stopped reading would keep the response, its
    tasks and its connection forever. ``_Response`` bounds that write too."""
    from gateway.streams import _Response

    async def events() -> AsyncIterator[dict[str, str]]:
        yield {"event": "final", "data": "{}"}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            await asyncio.sleep(3600)  # the client's socket is full and stays full

    async def receive() -> dict[str, Any]:
        await asyncio.sleep(3600)  # the client never disconnects either
        return {"type": "http.disconnect"}

    response = _Response(events(), ping=0, send_timeout=0.2)
    scope = {"type": "http", "method": "GET", "path": "/", "headers": [], "query_string": b""}
    started = time.monotonic()
    await asyncio.wait_for(response(scope, receive, send), 5)
    assert 0.2 <= time.monotonic() - started < 2.0
    # The event went out, then the last write was tried and given up.
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body", "http.response.body"]
    assert sent[-1].get("more_body", False) is False


def rpc_error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details)


class LostReplica:
    """A stream whose engine replica dies before its first event."""

    def __init__(self, error: grpc.aio.AioRpcError) -> None:
        self.error = error
        self.cancelled = asyncio.Event()

    async def read(self) -> Any:
        raise self.error

    def cancel(self) -> bool:
        self.cancelled.set()
        return True


class FlakyEngine(FakeEngine):
    """Every way a run's stream is opened (StartRun, AskAgent, WatchRun)
    fails with ``errors`` in turn before a replica answers; records each
    request it was sent."""

    def __init__(self, *errors: grpc.aio.AioRpcError) -> None:
        super().__init__(gap=0)
        self.errors = list(errors)
        self.requests: list[Any] = []
        self.lost: list[LostReplica] = []

    def _open(self, request: Any, after: int = 0) -> Any:
        self.requests.append(request)
        if self.errors:
            self.lost.append(LostReplica(self.errors.pop(0)))
            return self.lost[-1]
        call = FakeCall("run-1", after, self.gap)
        self.calls.append(call)
        return call

    def StartRun(self, request: engine_service_pb2.StartRunRequest, **_: Any) -> Any:  # noqa: N802
        return self._open(request)

    def AskAgent(self, request: engine_service_pb2.AskAgentRequest, **_: Any) -> Any:  # noqa: N802
        return self._open(request)

    def WatchRun(self, request: engine_service_pb2.WatchRunRequest, **_: Any) -> Any:  # noqa: N802
        return self._open(request, request.after_sequence)


LOST = "Stream removed (Socket closed)"


async def request(engine: Any, method: str, path: str, body: Any = None) -> httpx.Response:
    """One request to a gateway whose engine is ``engine``."""
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app_with(engine)), base_url="http://t"
    ) as client:
        return await client.request(method, path, json=body)


STREAMS = [
    ("POST", "/api/agent/conversations/c/messages", {"message": "Résume la réunion d'hier"}),
    (
        "POST",
        "/api/agent/conversations/c/messages",
        {"message": "Summarise yesterday's meeting", "request_id": "r-7"},
    ),
    ("POST", "/api/agent/agents/qa/asks", {"message": "Où en est la tâche 3 ?", "requester": "main"}),
    ("GET", "/api/agent/runs/run-1/events", None),
]


@pytest.mark.parametrize(("method", "path", "body"), STREAMS)
async def test_a_replica_lost_before_the_first_event_is_asked_again_for_the_same_run(
    method: str, path: str, body: Any
) -> None:
    """The engine replica a start reached dies before answering (kill -9,
    rollout): the gateway asks again with the same request, so the client
    gets the run's whole stream, and a start's retry carries the same
    request_id (the engine's idempotency key), never a second run."""
    engine = FlakyEngine(rpc_error(grpc.StatusCode.UNAVAILABLE, LOST))
    response = await request(engine, method, path, body)
    assert response.status_code == 200, response.text
    assert response.text.count("event: delta") == EVENTS - 1 and "event: final" in response.text
    first, retry = engine.requests
    assert first == retry
    if body is not None:
        assert first.request_id and first.request_id == body.get("request_id", first.request_id)
        assert first.message == body["message"]
    assert engine.lost[0].cancelled.is_set()


@pytest.mark.parametrize(
    ("body", "accept_language", "sent"),
    [
        ({"language": "fr"}, "en-US,en;q=0.9", "fr"),  # the page's own language wins
        ({"language": "en-GB"}, "fr-FR,fr;q=0.9", "en-GB"),
        ({}, "fr-CH, fr;q=0.9, en;q=0.8", "fr"),  # else the browser's
        ({}, "de-DE,de;q=0.9,en;q=0.5", "en"),
        ({}, "de-DE", ""),  # a language without texts: the engine reads the message
        ({"language": "de"}, "fr-FR,fr;q=0.9", "fr"),  # no texts in the body's: the browser's
        ({}, None, ""),
    ],
)
async def test_a_start_carries_the_language_asked_for_else_accept_language(
    body: dict[str, str], accept_language: str | None, sent: str
) -> None:
    engine = FlakyEngine()
    headers = {"Accept-Language": accept_language} if accept_language else {}
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app_with(engine)), base_url="http://t", headers=headers
    ) as client:
        response = await client.post(
            "/api/agent/conversations/c/messages", json={"message": "Retiens que je suis PM", **body}
        )
    assert response.status_code == 200, response.text
    (start,) = engine.requests
    assert start.language == sent


async def test_a_background_start_is_asked_again_too() -> None:
    engine = FlakyEngine(rpc_error(grpc.StatusCode.UNAVAILABLE, LOST))
    response = await request(
        engine, "POST", "/api/agent/conversations/c/messages", {"message": "later", "background": True}
    )
    assert response.status_code == 202, response.text
    assert response.json()["run_id"] == "run-1"
    assert len(engine.requests) == 2 and engine.requests[0].request_id == engine.requests[1].request_id


@pytest.mark.parametrize(
    ("errors", "status", "calls"),
    [
        # Refused by the engine: an answer, not a lost replica. Never repeated.
        ([rpc_error(grpc.StatusCode.INVALID_ARGUMENT, "bad model")], 400, 1),
        ([rpc_error(grpc.StatusCode.INTERNAL, "bug")], 500, 1),
        # No replica answers: three tries, then 503.
        ([rpc_error(grpc.StatusCode.UNAVAILABLE, LOST)] * 3, 503, 3),
    ],
)
async def test_only_a_lost_replica_is_asked_again_and_only_so_often(
    errors: list[grpc.aio.AioRpcError], status: int, calls: int
) -> None:
    engine = FlakyEngine(*errors)
    response = await request(engine, "POST", "/api/agent/conversations/c/messages", {"message": "hello"})
    assert response.status_code == status, response.text
    assert len(engine.requests) == calls
    assert all(lost.cancelled.is_set() for lost in engine.lost)


class BrokenMidRun(FakeCall):
    """A run's stream whose replica dies after ``events`` events."""

    def __init__(self, run_id: str, events: int) -> None:
        super().__init__(run_id, 0, 0)
        self.events = events

    async def read(self) -> Any:
        if self.next > self.events:
            raise rpc_error(grpc.StatusCode.UNAVAILABLE, LOST)
        return await super().read()


async def test_a_stream_broken_mid_run_is_reopened_after_the_last_event_sent() -> None:
    """The replica streaming a run dies after ten events, and the first two
    reopenings find no replica either: the client still gets every event
    once, in order, on the same response."""
    engine = FlakyEngine(*[rpc_error(grpc.StatusCode.UNAVAILABLE, LOST)] * 2)
    engine.StartRun = lambda request, **_: BrokenMidRun("run-1", 10)  # type: ignore[method-assign]
    response = await request(
        engine, "POST", "/api/agent/conversations/c/messages", {"message": "Écris le rapport"}
    )
    assert response.status_code == 200, response.text
    ids = [int(line.removeprefix("id: ")) for line in response.text.splitlines() if line.startswith("id: ")]
    assert ids == list(range(1, EVENTS + 1))
    assert [request.after_sequence for request in engine.requests] == [10, 10, 10]


def test_reopening_backs_off_from_50_ms_to_a_second() -> None:
    from gateway.streams import Relay

    relay = Relay.__new__(Relay)
    relay._settings = GatewaySettings()  # stream_resume_seconds 45
    assert [relay._resume_pause(n) for n in range(7)] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    relay._settings = GatewaySettings(stream_resume_seconds=2)  # never more than a tenth of the window
    assert relay._resume_pause(5) == 0.2
