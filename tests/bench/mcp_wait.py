"""An MCP server over stdio with one tool, ``wait(seconds)``, that answers
after sleeping. A run that calls it (the offline model calls
``@mcp:idle:wait {"seconds": 600}``) stays open without producing events:
the long-lived, idle SSE streams of the SSE fan-out benchmark
(tests/bench/sse_clients.py) and of tests/e2e/test_sse_load.py follow such
runs.

Run: ``python -m tests.bench.mcp_wait`` (the engine starts it as a configured
MCP server, see ``engine_env()``)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAME = "idle"


def serve() -> None:
    """The server itself (the MCP SDK is imported here only: the benchmark
    and the tests import this module for ``engine_env`` and ``hold_message``)."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("wait", log_level="WARNING")

    @server.tool()
    async def wait(seconds: float) -> str:
        """Sleeps that many seconds, then says so."""
        await asyncio.sleep(seconds)
        return f"waited {seconds:g} s"

    server.run("stdio")


def engine_env() -> dict[str, str]:
    """The engine setting that offers this server as ``idle`` (conversations
    still have to allow it); a tool call may last an hour."""
    config = {
        "name": NAME,
        "command": sys.executable,
        "args": ["-m", "tests.bench.mcp_wait"],
        "cwd": str(ROOT),
        "start_timeout": 120,
        "call_timeout": 3600,
    }
    return {"SWITCHBOARD_ENGINE_MCP_SERVERS_JSON": json.dumps([config])}


def hold_message(seconds: float) -> str:
    """The message whose run calls ``wait`` (it answers after ``seconds``)."""
    return f'@mcp:{NAME}:wait {{"seconds": {seconds:g}}}'


if __name__ == "__main__":
    serve()
