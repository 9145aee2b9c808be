"""Which sources a run may read, and who may write.

A run reads the workspace only when its conversation allows it and its
model is not web-only; the ``@page:``, ``@connector:`` and ``@mcp:``
mentions of the user's message name sources, and only allowed ones are read.

Who may write: the tools that write durable memory (``save_note``,
``propose_instruction_update``, ``ask_agent``) run only when the user's own
message of this run (``ToolContext.request``) asked for that write, and only
with the user's own words (services.shared.write_guard); a refusal is an
error result plus a notice the engine shows the user. ``set_live_state`` is
a write too, but of live state, not memory: the run's agent says what it is
doing now, in its own words, in its own entry only (see that tool)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from services.engine import texts
from services.engine.tools.context import ToolContext
from services.shared.errors import Exhausted, QuotaExceeded, RateLimited, TooManyRuns
from services.shared.write_guard import Refusal, check_write

# The notice of a tool call a quota refused: memory full, or (ask_agent) the
# run quotas.
QUOTA_NOTICES: dict[type[Exhausted], str] = {
    QuotaExceeded: "QUOTA_EXCEEDED",
    RateLimited: "RATE_LIMITED",
    TooManyRuns: "TOO_MANY_RUNS",
}

MENTION = re.compile(r"(?<!\S)@(page|connector|mcp):([A-Za-z0-9_.-]+)")


class ToolRefused(Exception):
    """The call is not allowed or not well formed; its message is the result."""


class WriteRefused(ToolRefused):
    """A write the user's message did not ask for, or not in the user's words."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.for_model)
        self.refusal = refusal

    def notice(self, tool: str, language: str) -> str:
        """The run's WRITE_REFUSED notice, in ``language``."""
        reason = self.refusal.reason
        if not texts.has(f"write_refused.{reason}"):
            return self.refusal.for_user
        what = texts.say(language, f"write.{tool}") if texts.has(f"write.{tool}") else ""
        return texts.say(language, f"write_refused.{reason}", tool=tool, what=what)


def authorise(tool: str, context: ToolContext, *, asked: bool, texts: Sequence[str], what: str) -> None:
    """Raises WriteRefused unless the user's message asked for this write,
    in the words it would store (services.shared.write_guard)."""
    refusal = check_write(tool, context.request, asked=asked, texts=texts, what=what)
    if refusal is not None:
        raise WriteRefused(refusal)


def reads_workspace(context: ToolContext) -> bool:
    """Whether this run may read workspace pages (allowed, and not web-only)."""
    return context.allowed.workspace and not context.web_only


def mentioned_pages(message: str) -> list[str]:
    """The page ids of the ``@page:<id>`` mentions of a message, in order, once each."""
    return list(dict.fromkeys(name for kind, name in MENTION.findall(message) if kind == "page"))
