"""The language of a run's texts: a client's BCP 47 tag when the product has
texts in it, Accept-Language at the HTTP route, else the language of the
user's message (services.shared.language.detect)."""

from __future__ import annotations

import pytest

from services.shared.language import detect, from_accept_language, is_tag, resolve, supported


@pytest.mark.parametrize(
    "text",
    [
        "Retiens que je suis PM",
        "Retiens que je préfère les réponses courtes",
        "Quand est le déploiement ?",
        "Prépare la facture du client Dupont pour mardi",
        "Rédige les actions de la réunion de ce matin",
        "Souviens-toi que je signe mes courriels « Alice »",
        "C'est l'heure de la revue",
        "Bonjour",
        "Merci !",
        "Salut, tu peux m'aider ?",
    ],
)
def test_french(text: str) -> None:
    assert detect(text) == "fr"


@pytest.mark.parametrize(
    "text",
    [
        "Remember that I prefer short answers",
        "Draft the Q3 launch email to the sales team",
        "When is the deploy window?",
        "I'm PM",
        "Write an AI policy",
        "Hello",
        "Thanks!",
        "Book a table at the Café de Flore for Tuesday",  # a French name in English
    ],
)
def test_english(text: str) -> None:
    assert detect(text) == "en"


@pytest.mark.parametrize(
    "text",
    [
        "je prefere les reponses courtes",
        "retiens que je suis pm",
        "peux tu resumer la reunion de ce matin",
        "c'est pour demain",
    ],
)
def test_french_without_accents(text: str) -> None:
    assert detect(text) == "fr"


@pytest.mark.parametrize(
    ("text", "language"),
    [
        # The request comes first: what it asks to work on does not decide.
        ("Translate this paragraph into French: Le déploiement est mardi à midi.", "en"),
        ("Traduis ce paragraphe en anglais : The deploy is on Tuesday.", "fr"),
        ("Résume ce mail : Hi team, the release moved to Friday, please review the notes.", "fr"),
        ("Summarise this email: Bonjour à tous, la mise en production est décalée à vendredi.", "en"),
        # A short opening that says little does not decide alone.
        ("Thanks! Peux-tu résumer la réunion de ce matin ?", "fr"),
        ("Merci. Can you summarise this morning's meeting for the whole team?", "en"),
    ],
)
def test_mixed_messages_follow_the_request(text: str, language: str) -> None:
    assert detect(text) == language


@pytest.mark.parametrize("text", ["", "   ", "\n", "PM", "ok", "42", "Q3 OKR", "@page:roadmap", "🙂"])
def test_empty_or_signless_text_is_english(text: str) -> None:
    assert detect(text) == "en"


@pytest.mark.parametrize(("text", "language"), [("Je", "fr"), ("Le", "fr"), ("The", "en"), ("Hi", "en")])
def test_one_word_is_enough_when_it_tells(text: str, language: str) -> None:
    assert detect(text) == language


@pytest.mark.parametrize(
    ("tag", "language"),
    [
        ("fr", "fr"),
        ("fr-CA", "fr"),
        ("FR", "fr"),
        ("en-US", "en"),
        ("de", ""),
        ("", ""),
        ("fr_FR", ""),
        ("x", ""),
    ],
)
def test_supported_tags(tag: str, language: str) -> None:
    assert supported(tag) == language


@pytest.mark.parametrize(
    ("tag", "ok"),
    [
        ("", True),
        ("fr", True),
        ("zh-Hant-TW", True),
        ("français", False),
        ("fr;q=1", False),
        ("e", False),
        ("a" * 40, False),
    ],
)
def test_tag_shape(tag: str, ok: bool) -> None:
    assert is_tag(tag) is ok


def test_the_asked_language_wins_over_the_message_when_the_product_has_it() -> None:
    assert resolve("fr", "Remember that I prefer short answers") == "fr"
    assert resolve("en", "Retiens que je suis PM") == "en"
    # No texts in German: the message decides.
    assert resolve("de", "Retiens que je suis PM") == "fr"
    assert resolve("", "Retiens que je suis PM") == "fr"
    assert resolve("", "") == "en"


@pytest.mark.parametrize(
    ("header", "language"),
    [
        ("fr-CH, fr;q=0.9, en;q=0.8, de;q=0.7, *;q=0.5", "fr"),
        ("de-DE,de;q=0.9,en;q=0.8", "en"),
        ("en;q=0.5, fr;q=0.8", "fr"),
        ("en, fr", "en"),  # equal weights: the first listed
        ("fr;q=0", ""),  # q=0: not acceptable
        ("fr;q=abc", ""),
        ("de", ""),
        ("*", ""),
        ("", ""),
        ("fr;q=2", ""),
        (",,;;", ""),
    ],
)
def test_accept_language(header: str, language: str) -> None:
    assert from_accept_language(header) == language
