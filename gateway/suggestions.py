"""Suggested actions above the composer (seed 002 P2-T16): 2 to 4 prompt
starters from the current page's type and the selected text. A pure,
deterministic function: showing them never calls a model, and clicking one
only prefills the composer (the page never starts a run from it)."""

from __future__ import annotations

from dataclasses import dataclass

# Page types the page reports; anything else is treated as "page".
PAGE_TYPES = ("page", "meeting_notes", "database", "email", "chat", "skill")
MAX_EXCERPT = 80


@dataclass(frozen=True)
class Suggestion:
    id: str
    label: str
    prompt: str


_BY_TYPE: dict[str, tuple[tuple[str, str, str], ...]] = {
    "meeting_notes": (
        (
            "extract-actions",
            "Extract the action items",
            "List the action items of these meeting notes, with owners and dates.",
        ),
        ("summarise-decisions", "Summarise the decisions", "Summarise the decisions taken in this meeting."),
        (
            "draft-follow-up",
            "Draft a follow-up email",
            "Draft a follow-up email to the attendees of this meeting.",
        ),
    ),
    "database": (
        ("summarise-rows", "Summarise the rows", "Summarise what the rows of this database show."),
        ("find-outliers", "Find outliers", "Which rows of this database stand out, and why?"),
    ),
    "email": (
        ("draft-reply", "Draft a reply", "Draft a reply to this email."),
        ("summarise-thread", "Summarise the thread", "Summarise this email thread in three bullet points."),
        ("extract-actions", "Extract the action items", "List what this email asks me to do."),
    ),
    "chat": (
        ("summarise-conversation", "Summarise the conversation", "Summarise our conversation so far."),
        ("next-steps", "Suggest next steps", "What should I do next, given this conversation?"),
    ),
    "skill": (
        (
            "improve-description",
            "Improve the description",
            "Rewrite this skill's description so the router finds it for the right requests.",
        ),
        (
            "test-requests",
            "Write test requests",
            "Write five requests this skill should be chosen for, and two it should not.",
        ),
    ),
    "page": (
        ("summarise-page", "Summarise this page", "Summarise this page in five bullet points."),
        ("extract-actions", "Extract the action items", "List the action items in this page."),
        ("improve-writing", "Improve the writing", "Improve the writing of this page; keep its meaning."),
    ),
}


def _excerpt(selection: str) -> str:
    text = " ".join(selection.split())
    return text if len(text) <= MAX_EXCERPT else text[: MAX_EXCERPT - 1].rstrip() + "…"


def suggest(page_type: str, selection: str = "") -> list[Suggestion]:
    """2 to 4 suggestions: with a selection, actions on it come first (and
    quote it), then the page type's own, without duplicates."""
    kind = page_type if page_type in _BY_TYPE else "page"
    chosen: list[Suggestion] = []
    excerpt = _excerpt(selection)
    if excerpt:
        quoted = f"\n\n> {excerpt}"
        chosen += [
            Suggestion(
                "summarise-selection", "Summarise the selection", f"Summarise the selected text.{quoted}"
            ),
            Suggestion(
                "shorten-selection",
                "Shorten the selection",
                f"Shorten the selected text; keep its meaning.{quoted}",
            ),
        ]
    for key, label, prompt in _BY_TYPE[kind]:
        if len(chosen) == 4:
            break
        chosen.append(Suggestion(key, label, prompt))
    return chosen
