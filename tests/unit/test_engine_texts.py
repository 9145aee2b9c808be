"""The engine's texts (services.engine.texts): each in English and French with
the same placeholders; the remember section is the one memory's templates
have, in each language; a line goes into the page's own section, whatever
its language; a user without a page gets the template of the run's language."""

from __future__ import annotations

import string

import pytest

from services.engine import texts
from services.engine.remember import with_fact
from services.memory.pages.templates import DEFAULT_TEMPLATE_ID, TEMPLATES, default_template_id, template


def placeholders(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


@pytest.mark.parametrize("key", sorted(texts.TEXTS))
def test_every_text_is_in_both_languages_with_the_same_placeholders(key: str) -> None:
    english, french = texts.TEXTS[key]
    assert english.strip() and french.strip() and english != french, key
    assert placeholders(english) == placeholders(french), key


def test_a_text_is_said_in_the_runs_language_and_english_otherwise() -> None:
    assert texts.say("fr", "PROVIDER_SWITCHED", old="a", new="b") == (
        "passage de a à b : il repart du résumé de passation et des entrées récentes"
    )
    assert texts.say("en", "PROVIDER_SWITCHED", old="a", new="b") == (
        "switched from a to b: it starts from the handoff summary and the recent entries"
    )
    assert texts.say("", "step.context") == texts.say("de", "step.context") == "Reading context"


@pytest.mark.parametrize("language", ["en", "fr"])
def test_each_templates_remember_section_is_the_engines(language: str) -> None:
    section = texts.say(language, "remember.section")
    bodies = [t.body for t in TEMPLATES if t.language == language]
    assert bodies and all(f"\n{section}\n" in body for body in bodies)


def test_the_line_goes_in_the_pages_own_section_whatever_its_language() -> None:
    french = next(t.body for t in TEMPLATES if t.language == "fr")
    added = with_fact(french, "Je préfère les réponses courtes", "en")
    section = added.split("## Ce que l'agent doit retenir\n", 1)[1].split("\n## ", 1)[0]
    assert section.rstrip().endswith("- Je préfère les réponses courtes")
    assert "What the agent should remember" not in added
    # A page without the section gets one, in the run's language, at its end.
    assert (
        with_fact("# Notes\n", "Je suis PM", "fr")
        == "# Notes\n\n## Ce que l'agent doit retenir\n\n- Je suis PM\n"
    )
    assert with_fact("", "I am PM", "en") == "## What the agent should remember\n\n- I am PM\n"


@pytest.mark.parametrize(
    ("language", "template_id"),
    [
        ("fr", "mon-ia-switchboard"),
        ("fr-CA", "mon-ia-switchboard"),
        ("FR", "mon-ia-switchboard"),
        ("en", DEFAULT_TEMPLATE_ID),
        ("", DEFAULT_TEMPLATE_ID),
        ("de", DEFAULT_TEMPLATE_ID),  # no template in German: English
    ],
)
def test_the_default_template_is_the_one_of_the_language(language: str, template_id: str) -> None:
    assert default_template_id(language) == template_id
    assert template("", language).id == template_id
    # A template named is that one, whatever the language.
    assert template("team-lead", language).id == "team-lead"
