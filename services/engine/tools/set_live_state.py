"""set_live_state: the run's agent says what it is doing now, in its own
words, in its own entry of the project's live state only, until it
expires. A write of live state, not memory: the project's roles decide."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from services.engine.tools.backend import LiveEntry
from services.engine.tools.builtin import Args, Builtin, ToolServices
from services.engine.tools.context import ToolContext
from services.engine.tools.live_state import LIVE_STATE_RULE, live_line
from services.engine.tools.policy import WriteRefused
from services.shared.errors import PermissionDenied
from services.shared.write_guard import Refusal

# Limits of an entry set by a model, below memory's own (200 and 2,000
# characters): it is shown in every run of the project, so it stays short.
MAX_LIVE_ACTIVITY_CHARS = 200
MAX_LIVE_DETAIL_CHARS = 500
MAX_LIVE_TTL_SECONDS = 86_400


class SetLiveStateArgs(Args):
    activity: str = Field(
        min_length=1,
        max_length=MAX_LIVE_ACTIVITY_CHARS,
        description="What you are doing now, in a few words.",
    )
    detail: str = Field(default="", max_length=MAX_LIVE_DETAIL_CHARS, description="More about it, briefly.")
    ttl_seconds: int = Field(
        default=0,
        ge=0,
        le=MAX_LIVE_TTL_SECONDS,
        description="Seconds until the entry expires; 0 or omitted: the default lifetime.",
    )

    @field_validator("activity", "detail", mode="before")
    @classmethod
    def _one_line(cls, value: Any) -> Any:
        # An entry lands in the prompt of every run of the project, one line
        # per agent: a line break could pass for a heading of its own.
        return " ".join(value.split()) if isinstance(value, str) else value


async def set_live_state(
    tools: ToolServices, args: SetLiveStateArgs, context: ToolContext, call_id: str
) -> tuple[str, LiveEntry]:
    # The run's own entry only, never another agent's: the agent id is
    # the run's, not an argument. It goes through memory as the run's
    # user, so the project's roles decide (a viewer cannot write).
    try:
        entry = await tools.backend.set_live_state(
            context.user,
            context.project_id,
            context.live_state_id,
            args.activity,
            args.detail,
            args.ttl_seconds or None,
        )
    except PermissionDenied as exc:
        raise WriteRefused(
            Refusal(
                f"refused: {exc.message}. The live state was not changed; do not retry.",
                f"set_live_state was refused: {exc.message}.",
            )
        ) from None
    return f"Your live state is now:\n{live_line(entry, True)}", entry


TOOL = Builtin(
    "set_live_state",
    "live_state",
    "Says what you are doing now in this project, replacing what you said before, for "
    "every agent and member of the project until it expires. " + LIVE_STATE_RULE,
    SetLiveStateArgs,
    set_live_state,
    # Where the run sees what the others do (the live state is not sent to a
    # web-only model).
    lambda context, _: not context.web_only,
    writes=True,
)
