"""live_state: the project's live state now, who is doing what, each entry
with its expiry (the run's own marked). Project content: a web-only model
gets none."""

from __future__ import annotations

from datetime import UTC

from pydantic import Field

from services.engine.tools.backend import LiveEntry
from services.engine.tools.builtin import Args, Builtin, ToolServices
from services.engine.tools.context import ToolContext

# What the live-state tools say of it, for the model.
LIVE_STATE_RULE = (
    "The project's live state is who is doing what now: one short entry per agent or person, which "
    "expires by itself. It is not memory: nothing to keep goes there."
)


class LiveStateArgs(Args):
    limit: int = Field(default=50, ge=1, le=200, description="At most this many entries, by agent id.")


async def live_state(
    tools: ToolServices, args: LiveStateArgs, context: ToolContext, call_id: str
) -> tuple[str, None]:
    entries = await tools.backend.live_state(context.user, context.project_id, args.limit)
    if not entries:
        return "The project's live state is empty: nobody says what they are doing now.", None
    you = context.live_state_id
    lines = [live_line(entry, entry.agent_id == you) for entry in entries[: args.limit]]
    return "The project's live state (who is doing what now):\n" + "\n".join(lines), None


def live_line(entry: LiveEntry, own: bool) -> str:
    """One entry as a tool result shows it: who (and whether it is the
    caller), what, and until when (RFC 3339, UTC)."""
    who = f"{entry.agent_id} (you)" if own else entry.agent_id
    detail = f" ({entry.detail})" if entry.detail else ""
    until = ""
    if entry.expire_time is not None:
        stamp = entry.expire_time.astimezone(UTC).isoformat(timespec="seconds")
        until = f" until {stamp.replace('+00:00', 'Z')}"
    return f"- {who}: {entry.activity}{detail}{until}"


TOOL = Builtin(
    "live_state",
    "live_state",
    "Reads the project's live state now, each entry with its expiry (yours is marked). " + LIVE_STATE_RULE,
    LiveStateArgs,
    live_state,
    # Project content: a web-only model gets none.
    lambda context, _: not context.web_only,
)
