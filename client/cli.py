"""``switchboard <command>``: Switchboard's terminal client.

    switchboard chat [-m MESSAGE] [--conversation ID]   chat with your personal agent
    switchboard ask AGENT MESSAGE                        ask an agent on its shared thread
    switchboard runs show|tail RUN_ID                    a run's record; follow its events
    switchboard agents list|register|update              the agents registry
    switchboard threads show|export|import               an agent's shared thread
    switchboard context import FOLDER                    a project folder's .ideai files
    switchboard projects list|create|show|update|members|add-member|remove-member
                                                         projects and their members
    switchboard proposals list|show|accept|refuse        notes agents propose for the project's memory
    switchboard schedules list|create|show|pause|resume|delete   scheduled runs
    switchboard skills list / models list                the catalogs
    switchboard mcp                                      Switchboard's MCP tools over stdio

Every command goes through the public HTTP API at SWITCHBOARD_URL with the
bearer token SWITCHBOARD_TOKEN, from the environment or the config file
(client.settings). The project-scoped ones (a chat's memory, the project
context) work in ``--project``, else SWITCHBOARD_PROJECT, else the user's
personal project. Exit codes: client.exits."""

from __future__ import annotations

import argparse
import asyncio
import os
import re
from collections.abc import Sequence
from pathlib import Path

import httpx
from pydantic import ValidationError

from client import exits, messages
from client.api import Api, ApiRefusal
from client.commands import (
    Context,
    UsageError,
    chosen_project,
    projects,
    proposals,
    registry,
    runs,
    schedules,
    threads,
)
from client.messages import say
from client.output import Output
from client.settings import PROJECT_PATTERN, ClientSettings, load_settings


async def serve_mcp_stdio(settings: ClientSettings, project: str) -> None:
    """The MCP server on this process's stdin/stdout until the client closes
    it; its project-scoped tools default to ``project``."""
    from client.mcp_tools import build_server

    async with http_client(settings) as http:
        api = Api(http, settings.token, settings.agent, project)
        await build_server(lambda _ctx: api).run_stdio_async()


def http_client(settings: ClientSettings) -> httpx.AsyncClient:
    timeout = httpx.Timeout(settings.timeout, connect=10.0)
    return httpx.AsyncClient(base_url=settings.url.rstrip("/"), timeout=timeout)


def project_id(value: str) -> str:
    """``--project``: "" (the personal project) or a project's id."""
    if re.fullmatch(PROJECT_PATTERN, value) is None:
        raise argparse.ArgumentTypeError(say("bad project", value=value))
    return value


PROJECT_HELP = (
    "the project of the project-scoped commands (a chat's memory, the project context); "
    "default: SWITCHBOARD_PROJECT, else your personal project"
)


def common_options() -> argparse.ArgumentParser:
    """Options every command takes, before or after its name (default SUPPRESS
    lets a subcommand's absent option keep the root's value)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="JSON output, for scripts"
    )
    common.add_argument(
        "--config",
        type=Path,
        default=argparse.SUPPRESS,
        metavar="FILE",
        help="the config file (default: SWITCHBOARD_CONFIG, else ~/.config/switchboard/config.toml)",
    )
    common.add_argument(
        "--project", type=project_id, default=argparse.SUPPRESS, metavar="PROJECT", help=PROJECT_HELP
    )
    return common


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="switchboard",
        description="Switchboard's terminal client, on the public HTTP API at SWITCHBOARD_URL with the "
        "token SWITCHBOARD_TOKEN (environment, else the config file).",
        epilog="Exit codes: 0 done, 1 the run failed, 2 usage, 3 not found, 4 not allowed, "
        "5 conflict or rate limit, 6 server error or unreachable.",
    )
    root.add_argument("--json", action="store_true", help="JSON output, for scripts")
    root.add_argument("--config", type=Path, default=None, metavar="FILE", help="the config file")
    root.add_argument("--project", type=project_id, default=None, metavar="PROJECT", help=PROJECT_HELP)
    commands = root.add_subparsers(dest="command", required=True, metavar="command")
    common = common_options()
    runs.add(commands, common)
    registry.add(commands, common)
    threads.add(commands, common)
    schedules.add(commands, common)
    projects.add(commands, common)
    proposals.add(commands, common)
    mcp = commands.add_parser(
        "mcp",
        help="serve Switchboard's tools to an agent CLI over MCP (stdio)",
        description="An MCP server on stdin/stdout, reaching Switchboard at SWITCHBOARD_URL with "
        "the bearer token SWITCHBOARD_TOKEN; SWITCHBOARD_AGENT names the agent it speaks for, and "
        "--project (else SWITCHBOARD_PROJECT) the project its tools work in unless a call names one.",
    )
    mcp.add_argument(
        "--project", type=project_id, default=argparse.SUPPRESS, metavar="PROJECT", help=PROJECT_HELP
    )
    return root


async def run_command(arguments: argparse.Namespace, settings: ClientSettings, out: Output) -> int:
    async with http_client(settings) as http:
        project = chosen_project(arguments, settings)
        context = Context(Api(http, settings.token, settings.agent, project), out, arguments, settings)
        code: int = await arguments.handler(context)
        return code


def main(argv: Sequence[str] | None = None) -> int:
    messages.use(messages.language(os.environ))
    arguments = parser().parse_args(argv)
    out = Output(as_json=arguments.json)
    try:
        settings = load_settings(arguments.config)
    except (OSError, ValueError, ValidationError) as error:  # a TOML error is a ValueError
        out.error(say("settings", error=error))
        return exits.USAGE
    if arguments.command == "mcp":
        asyncio.run(serve_mcp_stdio(settings, chosen_project(arguments, settings)))
        return exits.OK
    try:
        return asyncio.run(run_command(arguments, settings, out))
    except UsageError as error:
        out.error(str(error))
        return exits.USAGE
    except ApiRefusal as refusal:
        out.refusal(refusal)
        return exits.for_refusal(refusal)
    except KeyboardInterrupt:
        out.error(say("interrupted"))
        return exits.INTERRUPTED
