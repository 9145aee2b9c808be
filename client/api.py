"""The public HTTP API as the MCP tools use it: JSON calls and a run's SSE
stream, over any httpx transport. The stdio server reaches a gateway over
the network; the gateway's own /mcp reaches its API in-process
(gateway.mcp_server). Either way the request carries the caller's bearer
token, so the API applies its own authentication, validation and per-user
isolation, and a refusal keeps the API's code and reason."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

API = "/api/agent"


class ApiRefusal(Exception):
    """The API said no: its HTTP status and its error body's code, message and reason."""

    def __init__(
        self, status: int, code: str, message: str, reason: str = "", retry_after: int | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.reason = status, code, message, reason
        # Seconds to wait before retrying (a quota's 429), when the API said.
        self.retry_after = retry_after

    def as_dict(self) -> dict[str, object]:
        """The API's own error body, with its HTTP status."""
        error: dict[str, object] = {
            "code": self.code,
            "message": self.message,
            "reason": self.reason,
            "status": self.status,
        }
        if self.retry_after is not None:
            error["retry_after_seconds"] = self.retry_after
        return {"error": error}


def url(path: str) -> str:
    """A path of the agent API (``/conversations``), or a whole API path
    (``/api/schedules``) for the routes outside it."""
    return path if path.startswith("/api/") else API + path


def segment(value: str) -> str:
    """One path segment, quoted: an id holding "/", "?" or ".." stays one segment."""
    return quote(value, safe="")


@dataclass(frozen=True)
class SseEvent:
    """One event of a run's stream; ``id`` is its sequence ("" for an event
    that is no resume point, as the gateway's "stream interrupted")."""

    kind: str
    data: dict[str, Any]
    id: str = ""

    @property
    def terminal(self) -> bool:
        """The run's last event: its answer or its error."""
        return self.kind in ("final", "error") and bool(self.id)


class Api:
    """JSON over HTTP with the caller's token. ``client`` has the base URL
    and transport; ``token`` ("" = none: an open dev gateway) is sent as
    ``Authorization: Bearer``; ``agent`` is the agent this client speaks
    for ("" = none), the requester of its asks unless a call names one;
    ``project`` the project its project-scoped calls name unless a call
    names one ("" = the user's personal project)."""

    def __init__(
        self, client: httpx.AsyncClient, token: str = "", agent: str = "", project: str = ""
    ) -> None:
        self._client = client
        self.agent = agent
        self.project = project
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def call(
        self, method: str, path: str, *, body: object = None, params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        with _reachable():
            response = await self._client.request(
                method, url(path), json=body, params=params, headers=self._headers
            )
            if response.status_code >= 400:
                raise _refusal(response.status_code, response.content, response.headers.get("Retry-After"))
            if response.status_code == 204 or not response.content:
                return {}
            data = response.json()
        return data if isinstance(data, dict) else {"items": data}

    async def stream(
        self, path: str, body: object = None, *, method: str = "POST", last_event_id: str = ""
    ) -> AsyncGenerator[SseEvent, None]:
        """Sends the request (``body`` as JSON, ``last_event_id`` as the
        ``Last-Event-ID`` header) and yields the run's SSE events until the
        stream ends; a ``204`` (nothing left to send) yields none."""
        headers = {**self._headers, "Accept": "text/event-stream"}
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        with _reachable():
            async with self._client.stream(method, API + path, json=body, headers=headers) as response:
                if response.status_code >= 400:
                    raise _refusal(
                        response.status_code, await response.aread(), response.headers.get("Retry-After")
                    )
                kind, data, event_id = "message", list[str](), ""
                async for line in response.aiter_lines():
                    field, _, value = line.partition(":")
                    value = value.removeprefix(" ")
                    if field == "event":
                        kind = value
                    elif field == "data":
                        data.append(value)
                    elif field == "id":
                        event_id = value
                    elif not line:  # an event ends (":" keep-alive lines say nothing here)
                        if data:
                            yield SseEvent(kind, json.loads("\n".join(data)), event_id)
                        kind, data, event_id = "message", [], ""


@contextmanager
def _reachable() -> Iterator[None]:
    """A network failure or an answer that is not the API's JSON is a
    refusal too (UNAVAILABLE, as the API says of a service it cannot reach),
    never a crash of the tool."""
    try:
        yield
    except httpx.HTTPError as error:
        raise ApiRefusal(503, "UNAVAILABLE", f"Switchboard's API did not answer: {error!r}") from None
    except ValueError:
        raise ApiRefusal(
            502, "UNAVAILABLE", "Switchboard's API answered something that is not JSON"
        ) from None


def _refusal(status: int, content: bytes, retry_after: str | None = None) -> ApiRefusal:
    """The API's error body; ``retry_after``: its Retry-After header."""
    wait = int(retry_after) if retry_after and retry_after.isdigit() else None
    try:
        error = json.loads(content)["error"]
        return ApiRefusal(
            status, str(error["code"]), str(error["message"]), str(error.get("reason", "")), wait
        )
    except (ValueError, KeyError, TypeError):
        return ApiRefusal(status, "HTTP_ERROR", f"the API answered HTTP {status}", "", wait)
