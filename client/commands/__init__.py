"""The commands of ``switchboard``, one module per group. Each module's
``add(commands, common)`` declares its subcommands and sets ``handler``: an
async function of a :class:`Context` returning the exit code."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from client.api import Api
from client.output import Output
from client.settings import ClientSettings


@dataclass
class Context:
    api: Api
    out: Output
    args: argparse.Namespace
    settings: ClientSettings

    @property
    def project(self) -> str:
        """The project the project-scoped commands work in (:func:`chosen_project`)."""
        return chosen_project(self.args, self.settings)

    def project_params(self) -> dict[str, str]:
        """The ``project_id`` query of a project-scoped route (none for the personal project)."""
        return {"project_id": self.project} if self.project else {}


def chosen_project(args: argparse.Namespace, settings: ClientSettings) -> str:
    """``--project``, else SWITCHBOARD_PROJECT (or the config file's
    ``project``), else "" (the user's personal project)."""
    chosen = getattr(args, "project", None)
    return str(chosen) if chosen is not None else settings.project


Handler = Callable[[Context], Awaitable[int]]


class UsageError(Exception):
    """The command line asks for something that cannot be done: exit code 2."""


async def all_pages(
    ctx: Context, path: str, key: str, params: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Every page of a List route, its items under ``key``; the last page's other fields kept."""
    items: list[Any] = []
    token = ""
    while True:
        page = await ctx.api.call(
            "GET", path, params={**(params or {}), "page_size": 500, "page_token": token}
        )
        items.extend(page.get(key, []))
        token = page.get("next_page_token", "")
        if not token:
            return {**page, key: items}


def listing(
    ctx: Context,
    items: Sequence[dict[str, Any]],
    columns: list[str],
    row: Callable[[dict[str, Any]], list[str]],
) -> int:
    """A list command's result: the items as JSON with --json, else one row each."""
    if ctx.out.json:
        ctx.out.document(list(items))
    else:
        ctx.out.table(columns, [row(item) for item in items])
    return 0
