"""/mcp: Switchboard's MCP tools and resources (client.mcp_tools) over
Streamable HTTP, for agent CLIs and IDEs that speak MCP.

A request to /mcp needs a bearer token in its Authorization header, as the
HTTP API does (the web page's cookie is not taken here: MCP clients send
headers, and a page of another site must not drive the tools). Each tool
call then goes through the HTTP API of this very gateway, in-process
(:class:`AppTransport`), with the token the MCP request presented: the API
authenticates it again, validates the arguments and isolates users, so /mcp
can do nothing the token's user could not do over HTTP, and refuses with the
same codes and reasons.

The MCP server is stateless (no MCP session is kept between requests): a
tool call's progress and result travel on its own POST's response stream,
so any gateway replica can serve any request, and GET (a standalone event
stream) is 405."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from mcp.server.mcpserver import Context
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from client.api import Api
from client.mcp_tools import build_server
from gateway.auth import Authenticator
from gateway.errors import error_body

# The base URL of in-process API calls: never resolved, never on the network.
_INTERNAL = "http://gateway.internal"


class _Body(httpx.AsyncByteStream):
    """A response body as the app sends it, chunk by chunk (a run's SSE
    events arrive as they happen); closing it tells the app the client left."""

    def __init__(self, chunks: asyncio.Queue[bytes | None], left: asyncio.Event, task: asyncio.Task[None]):
        self._chunks, self._left, self._task = chunks, left, task

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while (chunk := await self._chunks.get()) is not None:
            yield chunk

    async def aclose(self) -> None:
        self._left.set()
        try:
            async with asyncio.timeout(10):
                await asyncio.shield(self._task)
        except (TimeoutError, Exception):
            self._task.cancel()


class AppTransport(httpx.AsyncBaseTransport):
    """httpx to an ASGI app in this process, streaming the response.
    (httpx's own ASGITransport waits for the whole body, so an ask's
    progress would only arrive with its answer.)"""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        scope: Scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": request.method,
            "scheme": request.url.scheme,
            "path": request.url.path,
            "raw_path": request.url.raw_path.split(b"?", 1)[0],
            "query_string": request.url.query,
            "headers": [(key.lower(), value) for key, value in request.headers.raw],
            "server": ("gateway.internal", 80),
            "client": ("127.0.0.1", 0),
            "root_path": "",
        }
        chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        started: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        left = asyncio.Event()
        request_sent = False

        async def receive() -> Message:
            nonlocal request_sent
            if not request_sent:
                request_sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await left.wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            if message["type"] == "http.response.start" and not started.done():
                started.set_result(message)
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    await chunks.put(message["body"])
                if not message.get("more_body", False):
                    await chunks.put(None)

        async def run() -> None:
            try:
                await self._app(scope, receive, send)
            except Exception as exc:  # the app's own handlers answered what they could
                if not started.done():
                    started.set_exception(exc)
            finally:
                await chunks.put(None)

        task = asyncio.create_task(run())
        start = await started
        headers = [(bytes(key), bytes(value)) for key, value in start.get("headers", [])]
        return httpx.Response(start["status"], headers=headers, stream=_Body(chunks, left, task))


class McpEndpoint:
    """The ASGI endpoint of /mcp: bearer authentication, then the SDK's
    Streamable HTTP session manager. ``running()`` belongs in the app's
    lifespan (the manager owns the tasks of the calls in flight)."""

    def __init__(self, app: ASGIApp, auth: Authenticator, timeout: float) -> None:
        self._auth = auth
        self._http = httpx.AsyncClient(
            transport=AppTransport(app), base_url=_INTERNAL, timeout=httpx.Timeout(timeout)
        )
        server = build_server(self._api_for)
        # The SDK's DNS-rebinding guard checks the Host against localhost
        # names; behind a deployment's own host name it would refuse every
        # call. The bearer token (a header no other site can make a
        # browser send) is the guard here.
        server.streamable_http_app(
            stateless_http=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self._sessions = server.session_manager

    def _api_for(self, ctx: Context) -> Api:
        headers: Any = ctx.headers or {}
        scheme, _, token = str(headers.get("authorization", "")).partition(" ")
        return Api(self._http, token.strip() if scheme.lower() == "bearer" else "")

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        try:
            async with self._sessions.run():
                yield
        finally:
            await self._http.aclose()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._auth.enabled:
            scheme, _, token = Request(scope).headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or self._auth.user_for(token.strip()) is None:
                response = JSONResponse(
                    error_body("UNAUTHENTICATED", "a valid bearer token is required"),
                    status_code=401,
                    headers={"WWW-Authenticate": 'Bearer realm="switchboard"'},
                )
                await response(scope, receive, send)
                return
        if scope["method"] == "GET":
            # No standalone event stream: a stateless server has nothing to
            # send outside a request's own response, and the stream would hold
            # a connection open for nothing. The protocol's answer is 405.
            response = JSONResponse(
                error_body("METHOD_NOT_ALLOWED", "/mcp offers no event stream on GET: POST requests"),
                status_code=405,
                headers={"Allow": "POST"},
            )
            await response(scope, receive, send)
            return
        await self._sessions.handle_request(scope, receive, send)
