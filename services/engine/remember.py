""" "Remember that...": when the **user's own message** asks
the agent to remember something, the run proposes adding it to the user's
active instruction page and ends ``waiting_approval``; nothing is written
until the user accepts. The request is recognised by
services.shared.remember (only ever on the user's own message); this module
places the accepted fact in the instruction page.
"""

from __future__ import annotations

# Where the remembered line goes in the page (the template's section).
REMEMBER_SECTION = "## What the agent should remember"


def with_fact(body: str, fact: str) -> str:
    """The page body with ``- fact`` added at the end of the remember
    section (created at the end of the page if the page has none)."""
    lines = body.rstrip("\n").split("\n") if body.strip() else []
    item = f"- {fact}"
    if REMEMBER_SECTION in lines:
        start = lines.index(REMEMBER_SECTION) + 1
        end = next(
            (i for i in range(start, len(lines)) if lines[i].startswith("## ")),
            len(lines),
        )
        while end > start and not lines[end - 1].strip():
            end -= 1
        return "\n".join([*lines[:end], item, *lines[end:]]) + "\n"
    return "\n".join([*lines, "", REMEMBER_SECTION, "", item]).lstrip("\n") + "\n"
