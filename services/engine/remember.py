""" "Remember that...": when the **user's own message** asks
the agent to remember something, the run proposes adding it to the user's
active instruction page and ends ``waiting_approval``; nothing is written
until the user accepts. The request is recognised by
services.shared.remember (only ever on the user's own message); this module
places the accepted fact in the instruction page.
"""

from __future__ import annotations

from services.engine import texts

# Where the remembered line goes in the page: the templates' section, in
# English and French (memory's templates use these headings).
REMEMBER_SECTIONS = texts.TEXTS["remember.section"]


def with_fact(body: str, fact: str, language: str = "en") -> str:
    """The page body with ``- fact`` added at the end of its remember
    section, in whichever language the page has it; a page with none gets
    one at its end, in ``language``."""
    lines = body.rstrip("\n").split("\n") if body.strip() else []
    item = f"- {fact}"
    section = next((line for line in lines if line in REMEMBER_SECTIONS), None)
    if section is not None:
        start = lines.index(section) + 1
        end = next(
            (i for i in range(start, len(lines)) if lines[i].startswith("## ")),
            len(lines),
        )
        while end > start and not lines[end - 1].strip():
            end -= 1
        return "\n".join([*lines[:end], item, *lines[end:]]) + "\n"
    heading = texts.say(language, "remember.section")
    return "\n".join([*lines, "", heading, "", item]).lstrip("\n") + "\n"
