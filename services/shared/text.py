"""Text normalisation shared by every service that matches words."""

from __future__ import annotations

import unicodedata


def fold(text: str) -> str:
    """Lower case without accents: "Réunion" -> "reunion" (NFKD, combining
    marks dropped; one character per character for Latin scripts)."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))
