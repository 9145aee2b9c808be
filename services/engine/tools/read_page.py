"""read_page: one workspace page the user can read, by id."""

from __future__ import annotations

from pydantic import Field

from services.engine.tools.builtin import Args, Builtin, ToolServices
from services.engine.tools.context import ToolContext
from services.engine.tools.policy import reads_workspace


class ReadPageArgs(Args):
    page_id: str = Field(min_length=1, max_length=200, description="The id of the page to read.")


async def read_page(
    tools: ToolServices, args: ReadPageArgs, context: ToolContext, call_id: str
) -> tuple[str, None]:
    page = await tools.backend.read_page(context.user, args.page_id)
    context.record("page", page.page_id, page.title)
    return f"Page {page.page_id} (version {page.version}): {page.title}\n\n{page.body}", None


TOOL = Builtin(
    "read_page",
    "workspace",
    "Reads one workspace page by id.",
    ReadPageArgs,
    read_page,
    lambda context, _: reads_workspace(context),
)
