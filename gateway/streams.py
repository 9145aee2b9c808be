"""A run's events relayed to one SSE client.

A pump task reads the engine's gRPC stream into this client's queue; the
response writes the queue to the socket. So the engine's stream never waits
on a client: a client that stops reading fills its own queue (at most
``sse_client_queue`` events) and is dropped — its engine stream released, its
connection closed once the writer notices — without slowing anyone else. A
write stuck on a full socket for ``sse_send_timeout`` closes the connection —
the response's last write included (``_Response``).

A stream broken by UNAVAILABLE/UNKNOWN/INTERNAL is reopened with WatchRun
after the last event sent (after 50 ms, backing off to once a second): the
engine replica holding it went away (crash, rollout), and another replica
serves the rest of the run from the database, including the "interrupted"
settlement once the dead replica's lease expires.

When the client goes away before the run's terminal event, the run goes on
(``disconnect_policy=continue``, the default) or is cancelled (``cancel``).
A client dropped for falling behind is not a disconnect: its run goes on, and
it can resume with Last-Event-ID."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import anyio
import grpc
from fastapi import Request, Response
from prometheus_client import Counter, Gauge
from sse_starlette import EventSourceResponse
from sse_starlette.sse import SendTimeoutError
from starlette.types import Message, Receive, Scope, Send

from gateway.deps import identity
from gateway.events import to_sse
from services.shared.clients import retried
from switchboard.engine.v1 import engine_pb2, engine_service_pb2

log = logging.getLogger(__name__)

SSE_CLIENTS = Gauge("switchboard_sse_clients", "Run event streams open to clients.")
SSE_DROPPED = Counter(
    "switchboard_sse_clients_dropped_total", "SSE clients dropped for not reading their events."
)
_RESUMABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL})


def is_terminal(event: engine_pb2.RunEvent) -> bool:
    return event.WhichOneof("kind") in ("final", "error")


class EventResponse(Protocol):
    """One message of a run's stream: StartRunResponse, WatchRunResponse or
    AskAgentResponse."""

    @property
    def event(self) -> engine_pb2.RunEvent: ...

    @property
    def event_json(self) -> str: ...


def to_client(response: EventResponse) -> dict[str, str]:
    """The response's event as SSE, with the JSON the engine made of it."""
    return to_sse(response.event, response.event_json)


class StreamEncoder(Protocol):
    """What a client's protocol makes of the run's events: the SSE events of
    one engine response, and of the in-band notice that the stream broke for
    good (never a resume point: no id)."""

    def event(self, response: EventResponse) -> list[dict[str, str]]: ...

    def interrupted(self, event: engine_pb2.RunEvent) -> list[dict[str, str]]: ...


class NativeEncoder:
    """Switchboard's own SSE: one event per run event, as the engine encoded it."""

    def event(self, response: EventResponse) -> list[dict[str, str]]:
        return [to_client(response)]

    def interrupted(self, event: engine_pb2.RunEvent) -> list[dict[str, str]]:
        sse = to_sse(event)
        sse.pop("id")
        return [sse]


async def open_run(start: Callable[[], Any]) -> tuple[Any, EventResponse | None]:
    """The stream ``start`` opens, and its first response: None when it has
    nothing to send (a finished run). Read before any response is started, so
    a refused run is an HTTP error (400, 404, 413...) rather than a 200 stream.

    An engine replica lost before the first event (UNAVAILABLE: killed,
    rolled out) is asked again, on the channel's other replicas: every start
    carries a request_id and watching is a read, so the retry is the same run
    (its events, or its "interrupted" settlement), never a second one."""

    async def opened() -> tuple[Any, EventResponse | None]:
        stream = start()
        try:
            first = await stream.read()
        except grpc.aio.AioRpcError:
            stream.cancel()
            raise
        return stream, (None if first is grpc.aio.EOF else first)

    return await retried(opened)


def sse_response(
    events: AsyncIterator[dict[str, str]],
    request: Request,
    headers: dict[str, str] | None = None,
    sep: str | None = None,
) -> EventSourceResponse:
    """``events`` written as SSE with the gateway's ping and send timeout;
    lines end with ``sep`` (sse-starlette's CRLF by default)."""
    settings = request.app.state.settings
    return _Response(
        events,
        sep=sep,
        ping=settings.sse_ping_seconds,
        send_timeout=settings.sse_send_timeout,
        headers={"Cache-Control": "no-store", **(headers or {})},
    )


async def stream_run(start: Callable[[], Any], request: Request, user: str) -> EventSourceResponse | Response:
    """The run's events as SSE, after its first one (see open_run). A
    stream with nothing left to send (a finished run) is 204."""
    stream, first = await open_run(start)
    if first is None:
        return Response(status_code=204)
    return sse_response(Relay(request, user, stream, first).events(), request)


class _Response(EventSourceResponse):
    """sse_starlette bounds each event's write by ``send_timeout`` but not the
    response's last (empty) one: a client that stopped reading would hold its
    connection and the response's tasks for as long as it stays connected.
    Here that write is bounded too, and a timed-out write ends the response:
    the server then closes the connection it could not complete."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def bounded(message: Message) -> None:
            last = message["type"] == "http.response.body" and not message.get("more_body", False)
            if not last or self.send_timeout is None:
                await send(message)
                return
            with anyio.move_on_after(self.send_timeout) as waited:
                await send(message)
            if waited.cancel_called:
                raise SendTimeoutError()

        try:
            await super().__call__(scope, receive, bounded)
        except SendTimeoutError:
            log.info("closing an SSE connection whose client stopped reading")


class Relay:
    def __init__(
        self,
        request: Request,
        user: str,
        stream: Any,
        first: EventResponse,
        encoder: StreamEncoder | None = None,
    ) -> None:
        self._encoder = encoder or NativeEncoder()
        self._app = request.app
        self._settings = request.app.state.settings
        # Signed at each call: a resume may come long after the request.
        self._identity = functools.partial(identity, request, user)
        self._stream = stream
        self._first = first
        self.run_id = first.event.run_id
        # (sse event, terminal) items, then None when nothing more will come.
        self._queue: asyncio.Queue[tuple[dict[str, str], bool] | None] = asyncio.Queue()
        self.dropped = False

    def _offer(self, items: list[dict[str, str]], terminal: bool) -> bool:
        """Queues the SSE events of one run event (``terminal``: the run's
        last); False (and the client dropped) when the client has
        ``sse_client_queue`` events it has not taken."""
        if self._queue.qsize() >= self._settings.sse_client_queue:
            self.dropped = True
            SSE_DROPPED.inc()
            log.warning("dropping an SSE client of run %s: it stopped reading", self.run_id)
            return False
        for number, item in enumerate(items, 1):
            self._queue.put_nowait((item, terminal and number == len(items)))
        return True

    async def _pump(self) -> None:
        current, last = self._stream, self._first.event
        resume_deadline: float | None = None
        reopened = 0  # in a row, without an event between
        try:
            if not self._offer(self._encoder.event(self._first), is_terminal(last)):
                return
            # Read to EOF, even after the terminal event: the engine's stream
            # then ends on its own rather than being cancelled mid-yield.
            while True:
                try:
                    # read(), not iteration: grpc.aio forbids mixing the two on one call.
                    response = await current.read()
                except grpc.aio.AioRpcError as error:
                    if is_terminal(last):
                        return  # the client has the whole run
                    now = asyncio.get_running_loop().time()
                    resume_deadline = resume_deadline or now + self._settings.stream_resume_seconds
                    if error.code() not in _RESUMABLE or now >= resume_deadline:
                        self._offer(self._encoder.interrupted(_interrupted(self.run_id, error)), True)
                        return
                    current.cancel()
                    await asyncio.sleep(self._resume_pause(reopened))
                    reopened += 1
                    current = self._app.state.engine.WatchRun(
                        engine_service_pb2.WatchRunRequest(run_id=self.run_id, after_sequence=last.sequence),
                        timeout=self._settings.run_stream_timeout,
                        metadata=self._identity(),
                    )
                    continue
                if response is grpc.aio.EOF:
                    return
                resume_deadline, reopened = None, 0
                last = response.event
                if not self._offer(self._encoder.event(response), is_terminal(last)):
                    return
        finally:
            current.cancel()
            self._queue.put_nowait(None)

    def _resume_pause(self, reopened: int) -> float:
        """How long to wait before reopening a broken stream: 50 ms at
        first (another replica, or the restarted one, usually answers at
        once), doubling each time in a row up to a second."""
        return float(min(0.05 * 2**reopened, 1.0, self._settings.stream_resume_seconds / 10))

    async def events(self) -> AsyncIterator[dict[str, str]]:
        pump = asyncio.create_task(self._pump())
        finished = False
        SSE_CLIENTS.inc()
        try:
            while (item := await self._queue.get()) is not None:
                event, terminal = item
                yield event
                finished = finished or terminal
        finally:
            SSE_CLIENTS.dec()
            pump.cancel()
            if not finished and not self.dropped and self._settings.disconnect_policy == "cancel":
                self._cancel_run_later()

    def _cancel_run_later(self) -> None:
        """CancelRun in a task of its own: this generator is being torn down
        (its awaits would be cancelled with it)."""
        tasks: set[asyncio.Task[None]] = self._app.state.background

        async def cancel() -> None:
            try:
                await self._app.state.engine.CancelRun(
                    engine_service_pb2.CancelRunRequest(run_id=self.run_id),
                    timeout=self._settings.call_timeout,
                    metadata=self._identity(),
                )
            except grpc.aio.AioRpcError as error:
                log.warning("cancelling run %s after its client left: %s", self.run_id, error.code().name)

        task = asyncio.create_task(cancel())
        tasks.add(task)
        task.add_done_callback(tasks.discard)


def _interrupted(run_id: str, error: grpc.aio.AioRpcError) -> engine_pb2.RunEvent:
    """The stream broke for good: the client is told in-band. Not a persisted
    event, so never a resume point; GET /runs/{id} has the outcome."""
    return engine_pb2.RunEvent(
        run_id=run_id, error=engine_pb2.RunError(code=error.code().name, message="stream interrupted")
    )
