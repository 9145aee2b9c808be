"""A real MCP client over stdio (the official ``mcp`` SDK): the configured
MCP servers (name, command, args, env) are started as subprocesses when a
run first needs them, their tools listed, and calls forwarded to them.

One :class:`McpHub` per engine process. Each server has one connection,
shared by the runs that use it and owned by a task of its own (the SDK's
stdio transport must be entered and left in one task, and a run's task may
be cancelled at any time). A server that cannot start, does not answer in
time, or dies mid-call gives a :class:`McpUnavailable` with the reason and
the tail of its stderr; the next use starts it afresh, after a short pause
so that a broken server does not cost every run its start-up timeout.

A server's tools reach the model as ``mcp__<server>__<tool>``; the tool
registry (services.engine.tools.registry) offers them only for the servers a
conversation allows."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, TextIO, cast

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

if TYPE_CHECKING:
    # The SDK is imported where a server is started (a second of start-up
    # otherwise, for engines that configure no MCP server).
    from mcp import Client, StdioServerParameters
    from mcp.types import CallToolResult

log = logging.getLogger(__name__)

MCP_PREFIX = "mcp__"
# Model APIs accept tool names of [A-Za-z0-9_-]{1,64}; a server tool whose
# full name would not fit is not offered.
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_STDERR_TAIL_CHARS = 400


class McpServerConfig(BaseModel):
    """One configured MCP server. ``env`` is added to a minimal inherited
    environment (PATH, HOME...): the engine's own variables, keys included,
    never reach the server unless named here."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Lower case, digits and single hyphens: "__" must stay the separator of
    # mcp__<server>__<tool>.
    name: str = Field(pattern=r"^[a-z0-9]+(?:-[a-z0-9]+)*$", max_length=32)
    # What users see where a conversation allows it (ListSources); the name when "".
    title: str = Field(default="", max_length=100)
    command: str = Field(min_length=1)
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    # Seconds for the process to start and answer the MCP handshake.
    start_timeout: float = Field(default=15.0, gt=0)
    # Seconds for one tool call (or one listing).
    call_timeout: float = Field(default=30.0, gt=0)
    # After a failed start, seconds before the next attempt.
    retry_after: float = Field(default=10.0, ge=0)


_CONFIGS = TypeAdapter(list[McpServerConfig])


def parse_mcp_servers(text: str) -> list[McpServerConfig]:
    """Parses and checks the configured servers (a JSON list); ValueError
    when they cannot work. For a settings validator."""
    configs = _CONFIGS.validate_json(text or "[]")
    names = [config.name for config in configs]
    if len(set(names)) != len(names):
        raise ValueError(f"MCP server names must be unique: {names}")
    return configs


def mcp_tool_name(server: str, tool: str) -> str:
    return f"{MCP_PREFIX}{server}__{tool}"


def split_mcp_tool_name(name: str) -> tuple[str, str] | None:
    """(server, tool) of an ``mcp__<server>__<tool>`` name, else None."""
    if not name.startswith(MCP_PREFIX):
        return None
    server, separator, tool = name[len(MCP_PREFIX) :].partition("__")
    return (server, tool) if separator and server and tool else None


@dataclass(frozen=True)
class McpTool:
    server: str
    name: str
    description: str
    input_schema: Mapping[str, Any]

    @property
    def qualified_name(self) -> str:
        return mcp_tool_name(self.server, self.name)


@dataclass(frozen=True)
class McpCallResult:
    """A tool's answer as text; ``is_error`` when the tool itself reported a
    failure (bad arguments, nothing found...): the server is fine."""

    text: str
    is_error: bool


class McpUnavailable(Exception):
    """The server could not be used: not configured, failed to start, timed
    out, or stopped mid-call. The message says which, for the model and the
    run's notices."""


def result_text(result: CallToolResult) -> str:
    """A CallToolResult's content blocks as text: text as is, other blocks
    named; the structured content when there is nothing else."""
    parts: list[str] = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(str(getattr(block, "text", "")))
        elif kind == "resource":
            resource = getattr(block, "resource", None)
            text = getattr(resource, "text", None)
            parts.append(str(text) if text is not None else f"[resource {getattr(resource, 'uri', '')}]")
        elif kind == "resource_link":
            parts.append(f"[resource {getattr(block, 'uri', '')}]")
        else:
            parts.append(f"[{kind or 'content'} {getattr(block, 'mime_type', '')}]".replace(" ]", "]"))
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, sort_keys=True))
    return "\n".join(parts)


class _Connection:
    """One server process and its MCP session, held by a task of its own."""

    def __init__(self, config: McpServerConfig) -> None:
        self.config = config
        self._lock = asyncio.Lock()
        self._client: Client | None = None
        self._holder: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._error: BaseException | None = None
        self._stderr: TextIO | None = None
        self._tools: list[McpTool] | None = None
        self._failed_until = 0.0
        self._last_failure = ""

    def _alive(self) -> bool:
        return self._client is not None and self._holder is not None and not self._holder.done()

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        try:
            self._stderr.seek(0)
            tail = self._stderr.read()[-_STDERR_TAIL_CHARS:].strip()
        except (OSError, ValueError):
            return ""
        return f" (stderr: {tail})" if tail else ""

    async def client(self) -> Client:
        async with self._lock:
            if self._alive():
                assert self._client is not None
                return self._client
            if time.monotonic() < self._failed_until:
                raise McpUnavailable(self._last_failure)
            try:
                return await self._start()
            except McpUnavailable as exc:
                self._failed_until = time.monotonic() + self.config.retry_after
                self._last_failure = str(exc)
                raise

    async def _start(self) -> Client:
        from mcp import StdioServerParameters

        await self._close_holder()
        name = self.config.name
        self._stop, self._error, self._tools = asyncio.Event(), None, None
        self._stderr = cast(TextIO, tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace"))
        params = StdioServerParameters(
            command=self.config.command,
            args=list(self.config.args),
            env=dict(self.config.env),
            cwd=self.config.cwd,
        )
        ready = asyncio.Event()
        self._holder = asyncio.create_task(self._hold(params, ready), name=f"mcp-server-{name}")
        try:
            async with asyncio.timeout(self.config.start_timeout):
                await ready.wait()
        except TimeoutError:
            tail = self._stderr_tail()
            await self._close_holder()
            raise McpUnavailable(
                f"MCP server {name!r} did not start within {self.config.start_timeout:g} s{tail}"
            ) from None
        if self._client is None:
            error = self._error
            tail = self._stderr_tail()
            await self._close_holder()
            raise McpUnavailable(f"MCP server {name!r} failed to start: {_describe(error)}{tail}")
        return self._client

    async def _hold(self, params: StdioServerParameters, ready: asyncio.Event) -> None:
        from mcp import Client, stdio_client

        try:
            assert self._stderr is not None
            transport = stdio_client(params, errlog=self._stderr)
            async with Client(transport, cache=None, read_timeout_seconds=self.config.call_timeout) as client:
                self._client = client
                ready.set()
                await self._stop.wait()
        except Exception as exc:  # noqa: BLE001 - reported by the starter, or at the next call
            self._error = exc
        finally:
            self._client = None
            ready.set()

    async def _close_holder(self) -> None:
        """Stops the server (the SDK closes stdin, then terminates and
        kills the process tree, each wait bounded)."""
        started = self._client is not None
        holder, self._holder, self._client = self._holder, None, None
        if holder is not None and not started:
            # Still in the handshake: it will not see the stop event.
            holder.cancel()
            await asyncio.gather(holder, return_exceptions=True)
        elif holder is not None and not holder.done():
            self._stop.set()
            try:
                async with asyncio.timeout(10.0):
                    await asyncio.shield(holder)
            except TimeoutError:
                holder.cancel()
                await asyncio.gather(holder, return_exceptions=True)
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    async def broken(self, reason: str) -> None:
        """The session failed mid-use: drop it; the next use restarts it."""
        log.warning("MCP server %s failed: %s", self.config.name, reason)
        async with self._lock:
            await self._close_holder()
            self._tools = None

    async def tools(self) -> list[McpTool]:
        client = await self.client()
        if self._tools is None:
            try:
                async with asyncio.timeout(self.config.call_timeout):
                    listed = await _list_all(client)
            except Exception as exc:  # noqa: BLE001 - any failure here is the server's
                reason = _describe(exc)
                await self.broken(reason)
                raise McpUnavailable(
                    f"MCP server {self.config.name!r} could not list its tools: {reason}"
                ) from exc
            self._tools = [
                McpTool(self.config.name, tool.name, tool.description or "", dict(tool.input_schema))
                for tool in listed
                if _TOOL_NAME.match(mcp_tool_name(self.config.name, tool.name))
            ]
        return self._tools

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> McpCallResult:
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        client = await self.client()
        try:
            async with asyncio.timeout(self.config.call_timeout):
                result = await client.call_tool(tool, dict(arguments))
        except MCPError as exc:
            if exc.code not in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
                # The server answered with an error (unknown tool, bad
                # params): it is alive, and the model may read why.
                return McpCallResult(f"error {exc.code}: {exc.message}", is_error=True)
            await self._fail(tool, exc)
        except Exception as exc:  # noqa: BLE001 - a timeout, a closed pipe, a protocol error
            await self._fail(tool, exc)
        return McpCallResult(result_text(result), bool(result.is_error))

    async def _fail(self, tool: str, exc: BaseException) -> NoReturn:
        stderr = self._stderr_tail()
        reason = _describe(exc)
        await self.broken(reason)
        raise McpUnavailable(
            f"MCP server {self.config.name!r} failed during {tool!r}: {reason}{stderr}"
        ) from exc

    async def close(self) -> None:
        async with self._lock:
            await self._close_holder()


async def _list_all(client: Client) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(100):  # a server that pages forever is cut off
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _describe(error: BaseException | None) -> str:
    if error is None:
        return "unknown error"
    if isinstance(error, TimeoutError):
        return "timed out"
    if isinstance(error, BaseExceptionGroup) and error.exceptions:
        return _describe(error.exceptions[0])
    return str(error) or type(error).__name__


class McpHub:
    """The engine's MCP servers, started lazily, stopped by :meth:`close`."""

    def __init__(self, configs: Sequence[McpServerConfig]) -> None:
        self._connections = {config.name: _Connection(config) for config in configs}

    @property
    def servers(self) -> frozenset[str]:
        return frozenset(self._connections)

    def _connection(self, server: str) -> _Connection:
        connection = self._connections.get(server)
        if connection is None:
            raise McpUnavailable(f"no MCP server named {server!r} is configured")
        return connection

    async def list_tools(self, server: str) -> list[McpTool]:
        return await self._connection(server).tools()

    async def call_tool(self, server: str, tool: str, arguments: Mapping[str, Any]) -> McpCallResult:
        return await self._connection(server).call(tool, arguments)

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self._connections.values()), return_exceptions=True)
