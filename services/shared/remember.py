"""What the user asks the agent to remember: "remember that…" / "retiens
que…" opening the **user's own message**, in English or French.

Only the user's message is ever parsed here. Text the agent merely read
(recalled notes, pages, tool results, connector content) never reaches
this module, so an instruction planted in such content cannot make the
agent rewrite its own instructions — whatever its language, spelling or
encoding. The engine turns the fact into an instruction proposal; the write
guard (services.shared.write_guard) counts such a request as asking for an
instruction update.
"""

from __future__ import annotations

import re

from services.shared.text import fold

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
