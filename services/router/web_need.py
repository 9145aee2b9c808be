"""Whether a request needs the web: the ``Auto`` model router then prefers
a model that searches the web (``web_search`` in the model configuration).
A pure function, English and French, accent-insensitive; no model.

A request needs the web when it says so or asks for what only the web knows
today, by one of these phrases (folded, lower case), in this order:

1. **an explicit web search**: a search verb ("search", "look up", "find",
   "check", "browse", "google"; "cherche", "recherche", "trouve",
   "vérifie", "regarde") followed within 40 characters of the same sentence
   by "the web", "online", "the internet", "on Google" ("sur le web", "sur
   internet", "en ligne", "sur Google"), or "web search" / "search the
   web" / "recherche web" / "recherche en ligne";
2. **the news**: "latest news", "breaking news", "today's news", "news of
   the day", "headlines"; "actualités d'aujourd'hui", "dernières
   nouvelles", "l'actualité du jour", "les infos du jour";
3. **live figures**: the weather ("météo"), a current or today's price,
   stock price, exchange rate or score ("cours de l'action", "taux de
   change", "prix actuel", "score du match").

Anything else does not: a request about the workspace's own pages, or one
that merely says "latest" or "forecast" ("the latest version of our notes",
"the sales forecast", "l'actualité de l'équipe"), is answered from the
context the run already has.
"""

from __future__ import annotations

import re

from services.shared.text import fold

# At most this many characters between a search verb and where it searches.
_GAP = r"[^.!?\n]{0,40}?"

_SEARCH = re.compile(
    rf"\b(?:search|searching|look up|look it up|look this up|look|find|check|browse|google)\b{_GAP}"
    r"\b(?:the web|on the web|online|the internet|on the internet|on google)\b"
    rf"|\b(?:cherche|cherchez|chercher|recherche|recherchez|rechercher|trouve|trouvez|trouver|verifie|"
    rf"verifiez|verifier|regarde|regardez)\b{_GAP}\b(?:sur le web|sur internet|en ligne|sur google|"
    r"sur la toile)\b"
    r"|\b(?:web search|internet search|online search|search the web|google it)\b"
    r"|\b(?:recherche web|recherche internet|recherche en ligne|recherche sur le web)\b"
)
_NEWS = re.compile(
    r"\b(?:latest|breaking|today'?s|current|recent|this morning'?s|this week'?s)\s+(?:news|headlines)\b"
    r"|\b(?:news|headlines)\s+(?:of |from )?(?:today|the day|this morning|this week|right now)\b"
    r"|\bwhat'?s in the news\b"
    r"|\b(?:dernieres?|recentes?)\s+(?:actualites?|nouvelles|infos?|informations)\b"
    r"|\b(?:actualites?|nouvelles|infos?|informations|gros titres)\s+(?:d'aujourd'hui|du jour|de ce matin|"
    r"de la semaine|en direct|recentes?)\b"
)
_LIVE = re.compile(
    r"\bweather\b"
    r"|\b(?:current|today'?s|latest|live)\s+"
    r"(?:price|prices|stock price|share price|exchange rate|score|scores)\b"
    r"|\b(?:stock|share) price\b|\bexchange rate\b"
    r"|\bmeteo\b"
    r"|\b(?:cours|prix)\s+(?:actuels?|du jour|en direct|de l'action|de la bourse|du bitcoin)\b"
    r"|\btaux de change\b|\bscore du match\b"
)
_KINDS = (("a web search", _SEARCH), ("the news", _NEWS), ("live figures", _LIVE))


def needs_web(text: str) -> str:
    """Why ``text`` needs the web: the kind and the phrase found
    ('a web search: "search the web for"'); "" when it does not."""
    folded = fold(text).replace("\u2019", "'")
    for kind, pattern in _KINDS:
        found = pattern.search(folded)
        if found:
            # As written, where folding kept one character per character.
            phrase = text[found.start() : found.end()] if len(folded) == len(text) else found.group(0)
            return f'{kind}: "{phrase}"'
    return ""
