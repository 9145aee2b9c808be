""" "Remember that...": when the **user's own message** asks
the agent to remember something, the run proposes adding it to the user's
active instruction page and ends ``waiting_approval``; nothing is written
until the user accepts.

Only the user's message is ever parsed here. Text the agent merely read
(recalled notes, pages, tool results, connector content) never reaches
this module, so an instruction planted in such content cannot make the
agent rewrite its own instructions — whatever its language, spelling or
encoding.
"""

from __future__ import annotations

import re

from services.shared.text import fold

# Where the remembered line goes in the page (the template's section).
REMEMBER_SECTION = "## What the agent should remember"
MAX_FACT_CHARS = 500

# Accent-folded, lower case; the request opens the message (after an optional
# greeting or "please"), English and French.
_REQUEST = re.compile(
    r"^(?:(?:hi|hello|bonjour|salut)[ ,!]+)?(?:please[ ,]+|stp[ ,]+|s'il te plait[ ,]+)?"
    r"(?:remember|keep in mind|don't forget|do not forget|note that"
    r"|retiens|souviens[- ]toi|rappelle[- ]toi|n'oublie pas|garde en (?:tete|memoire)|note bien"
    r"|notez?(?=\s+qu))\b"
    r"(?:\s*(?:that|que|de)(?=\W|$)|\s*(?:qu'|d'))?\s*[:,]?\s*",
)


def remembered_fact(message: str) -> str | None:
    """What the user asks to remember, in their own words, or None when the
    message is not such a request. "Retiens que je suis PM" -> "je suis PM"."""
    stripped = message.strip()
    folded = fold(stripped).replace("\u2019", "'")  # typographic apostrophes too
    match = _REQUEST.match(folded)
    if match is None or match.end() == 0:
        return None
    # Folding keeps one character per character for these scripts (NFKD then
    # dropping combining marks), so the offset maps back onto the original.
    fact = stripped[match.end() :].strip().rstrip(".!").strip()
    if not fact or len(fact) > MAX_FACT_CHARS:
        return None
    return fact[0].upper() + fact[1:]


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
