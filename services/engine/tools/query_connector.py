"""query_connector: searches one of the configured connectors the run's
conversation allows (services.engine.tools.connectors)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from services.engine.tools.builtin import Args, Builtin, ToolServices
from services.engine.tools.context import ToolContext
from services.engine.tools.policy import ToolRefused


class QueryConnectorArgs(Args):
    connector: str = Field(min_length=1, max_length=64, description="Which connector to query.")
    query: str = Field(default="", max_length=500, description="Words to look for; empty lists the newest.")
    limit: int = Field(default=5, ge=1, le=20, description="At most this many items.")


async def query_connector(
    tools: ToolServices, args: QueryConnectorArgs, context: ToolContext, call_id: str
) -> tuple[str, None]:
    if args.connector not in tools.connectors_allowed(context):
        raise ToolRefused(f"the connector {args.connector!r} is not available in this conversation")
    connector = tools.connectors[args.connector]
    items = await connector.search(context.user, args.query, args.limit)
    context.record("connector", connector.name, connector.title)
    if not items:
        return f"{connector.title}: nothing matches {args.query!r}.", None
    lines = [f"- [{item.item_id}] {item.title}\n  {item.text}" for item in items[: args.limit]]
    return f"{connector.title}, {len(lines)} result(s) for {args.query!r}:\n" + "\n".join(lines), None


def _only_allowed(parameters: dict[str, Any], context: ToolContext, tools: ToolServices) -> None:
    # The model sees only the connectors it may query.
    parameters["properties"]["connector"]["enum"] = tools.connectors_allowed(context)


TOOL = Builtin(
    "query_connector",
    "connectors",
    "Searches one of the user's connected sources (mail...).",
    QueryConnectorArgs,
    query_connector,
    lambda context, tools: bool(tools.connectors_allowed(context)),
    fit=_only_allowed,
)
