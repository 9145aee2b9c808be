"""search_workspace: the workspace pages the user can read that match some
words, each hit a read of its page (the model saw its snippet)."""

from __future__ import annotations

from pydantic import Field

from services.engine.tools.builtin import Args, Builtin, ToolServices
from services.engine.tools.context import ToolContext
from services.engine.tools.policy import reads_workspace


class SearchWorkspaceArgs(Args):
    query: str = Field(min_length=1, max_length=500, description="Words to look for in the pages.")
    limit: int = Field(default=5, ge=1, le=20, description="At most this many pages.")


async def search_workspace(
    tools: ToolServices, args: SearchWorkspaceArgs, context: ToolContext, call_id: str
) -> tuple[str, None]:
    hits = await tools.backend.search_pages(context.user, args.query, args.limit)
    if not hits:
        return f"No page matches {args.query!r}.", None
    lines = []
    for hit in hits[: args.limit]:
        # The model saw each hit's snippet: each counts as read.
        context.record("page", hit.page_id, hit.title)
        lines.append(f"- page {hit.page_id}: {hit.title}\n  {hit.snippet}")
    return f"Pages matching {args.query!r}:\n" + "\n".join(lines), None


TOOL = Builtin(
    "search_workspace",
    "workspace",
    "Searches the workspace pages the user can read; returns titles, ids and snippets.",
    SearchWorkspaceArgs,
    search_workspace,
    lambda context, _: reads_workspace(context),
)
