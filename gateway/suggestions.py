"""Suggested actions above the composer: 2 to 4 prompt
starters from the current page's type and the selected text. A pure,
deterministic function: showing them never calls a model, and clicking one
only prefills the composer (the page never starts a run from it). A prompt
never quotes the selection: the page sends the selected text with the
message as its context (MessageBody.context), where the model reads it as
content, not as part of the user's words."""

from __future__ import annotations

from dataclasses import dataclass

# Page types the page reports; anything else is treated as "page".
PAGE_TYPES = ("page", "meeting_notes", "database", "email", "chat", "skill")


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


# French, keyed by the English text: the page asks in its interface's language.
_FR = {
    "Extract the action items": "Extraire les actions à mener",
    "List the action items of these meeting notes, with owners and dates.": (
        "Liste les actions à mener de ce compte rendu, avec responsables et échéances."
    ),
    "Summarise the decisions": "Résumer les décisions",
    "Summarise the decisions taken in this meeting.": "Résume les décisions prises pendant cette réunion.",
    "Draft a follow-up email": "Rédiger un e-mail de suivi",
    "Draft a follow-up email to the attendees of this meeting.": (
        "Rédige un e-mail de suivi pour les participants de cette réunion."
    ),
    "Summarise the rows": "Résumer les lignes",
    "Summarise what the rows of this database show.": "Résume ce que montrent les lignes de cette base.",
    "Find outliers": "Trouver les valeurs atypiques",
    "Which rows of this database stand out, and why?": (
        "Quelles lignes de cette base sortent du lot, et pourquoi ?"
    ),
    "Draft a reply": "Rédiger une réponse",
    "Draft a reply to this email.": "Rédige une réponse à cet e-mail.",
    "Summarise the thread": "Résumer l'échange",
    "Summarise this email thread in three bullet points.": "Résume cet échange d'e-mails en trois points.",
    "List what this email asks me to do.": "Liste ce que cet e-mail me demande de faire.",
    "Summarise the conversation": "Résumer la conversation",
    "Summarise our conversation so far.": "Résume notre conversation jusqu'ici.",
    "Suggest next steps": "Proposer la suite",
    "What should I do next, given this conversation?": (
        "Que devrais-je faire ensuite, d'après cette conversation ?"
    ),
    "Improve the description": "Améliorer la description",
    "Rewrite this skill's description so the router finds it for the right requests.": (
        "Réécris la description de cette compétence pour que le routeur la trouve pour les bonnes demandes."
    ),
    "Write test requests": "Écrire des demandes de test",
    "Write five requests this skill should be chosen for, and two it should not.": (
        "Écris cinq demandes pour lesquelles cette compétence devrait "
        "être choisie, et deux pour lesquelles non."
    ),
    "Summarise this page": "Résumer cette page",
    "Summarise this page in five bullet points.": "Résume cette page en cinq points.",
    "List the action items in this page.": "Liste les actions à mener de cette page.",
    "Improve the writing": "Améliorer la rédaction",
    "Improve the writing of this page; keep its meaning.": (
        "Améliore la rédaction de cette page sans en changer le sens."
    ),
    "Summarise the selection": "Résumer la sélection",
    "Summarise the selected text.": "Résume le texte sélectionné.",
    "Shorten the selection": "Raccourcir la sélection",
    "Shorten the selected text; keep its meaning.": (
        "Raccourcis le texte sélectionné sans en changer le sens."
    ),
}


def _say(text: str, language: str) -> str:
    return _FR.get(text, text) if language == "fr" else text


def suggest(page_type: str, selection: str = "", language: str = "en") -> list[Suggestion]:
    """2 to 4 suggestions: with a selection, actions on it come first, then
    the page type's own, without duplicates; in English or French
    (`language`)."""
    kind = page_type if page_type in _BY_TYPE else "page"
    chosen: list[Suggestion] = []
    if selection.strip():
        for key, label, prompt in (
            ("summarise-selection", "Summarise the selection", "Summarise the selected text."),
            ("shorten-selection", "Shorten the selection", "Shorten the selected text; keep its meaning."),
        ):
            chosen.append(Suggestion(key, _say(label, language), _say(prompt, language)))
    for key, label, prompt in _BY_TYPE[kind]:
        if len(chosen) == 4:
            break
        chosen.append(Suggestion(key, _say(label, language), _say(prompt, language)))
    return chosen
