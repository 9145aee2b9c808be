"""``switchboard <command>``: the command-line entry of Switchboard's clients.

    switchboard mcp     serve Switchboard's MCP tools over stdio, for an agent CLI

The commands reach Switchboard through its public HTTP API, at SWITCHBOARD_URL
with the bearer token SWITCHBOARD_TOKEN (see client.settings)."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence

import httpx

from client.api import Api
from client.settings import ClientSettings


async def serve_mcp_stdio(settings: ClientSettings) -> None:
    """The MCP server on this process's stdin/stdout until the client closes it."""
    from client.mcp_tools import build_server

    timeout = httpx.Timeout(settings.timeout, connect=10.0)
    async with httpx.AsyncClient(base_url=settings.url.rstrip("/"), timeout=timeout) as http:
        api = Api(http, settings.token, settings.agent)
        await build_server(lambda _ctx: api).run_stdio_async()


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="switchboard", description="Switchboard's command-line clients.")
    commands = root.add_subparsers(dest="command", required=True, metavar="command")
    commands.add_parser(
        "mcp",
        help="serve Switchboard's tools to an agent CLI over MCP (stdio)",
        description="An MCP server on stdin/stdout, reaching Switchboard at SWITCHBOARD_URL with "
        "the bearer token SWITCHBOARD_TOKEN; SWITCHBOARD_AGENT names the agent it speaks for.",
    )
    return root


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parser().parse_args(argv)
    if arguments.command == "mcp":
        asyncio.run(serve_mcp_stdio(ClientSettings()))
    return 0
