"""Suggested actions: 2 to 4 deterministic prompt starters from the page
context, and the route that serves them (in-process: it calls no service)."""

from __future__ import annotations

import httpx
import pytest

from gateway.app import create_app
from gateway.settings import GatewaySettings
from gateway.suggestions import _BY_TYPE, _FR, PAGE_TYPES, suggest


@pytest.mark.parametrize("page_type", [*PAGE_TYPES, "unknown", ""])
@pytest.mark.parametrize("selection", ["", "The Q3 budget is late.", "word " * 100])
def test_two_to_four_distinct_starters_and_always_the_same(page_type: str, selection: str) -> None:
    actions = suggest(page_type, selection)
    assert 2 <= len(actions) <= 4
    assert len({a.id for a in actions}) == len(actions)
    assert all(a.label and a.prompt for a in actions)
    assert suggest(page_type, selection) == actions


def test_a_selection_comes_first_and_is_never_pasted_into_the_prompt() -> None:
    """The page sends the selected text as the message's context: a prompt
    that quoted it too would give the model the selection twice, once as
    the user's own words."""
    actions = suggest("meeting_notes", "  Ship   the beta\non Friday ")
    assert [a.id for a in actions][:2] == ["summarise-selection", "shorten-selection"]
    assert actions[0].prompt == "Summarise the selected text."
    assert all("Ship" not in a.prompt and "beta" not in a.prompt for a in actions)
    assert [a.id for a in suggest("meeting_notes", "   \n ")][0] == "extract-actions"  # blank: no selection


def test_the_page_type_chooses_the_starters() -> None:
    assert [a.id for a in suggest("meeting_notes")][0] == "extract-actions"
    assert [a.id for a in suggest("email")][0] == "draft-reply"
    assert suggest("no-such-type") == suggest("page")


@pytest.mark.parametrize("page_type", PAGE_TYPES)
def test_every_starter_is_in_french_too(page_type: str) -> None:
    for key, label, prompt in _BY_TYPE[page_type]:
        assert label in _FR and prompt in _FR, key
    english = suggest(page_type, "Livrer la bêta vendredi")
    french = suggest(page_type, "Livrer la bêta vendredi", "fr")
    assert [a.id for a in french] == [a.id for a in english]
    assert all(f.label != e.label and f.prompt != e.prompt for f, e in zip(french, english, strict=True))
    assert french[0].label == "Résumer la sélection"
    assert french[0].prompt == "Résume le texte sélectionné."


@pytest.mark.parametrize(("language", "word"), [("en", "Summarise"), ("fr", "Résume")])
async def test_the_route_answers_with_no_service_behind_it(language: str, word: str) -> None:
    """No model call and no run: the gateway here has no engine, router or
    model reachable (every service address is the closed port 9), so a
    route that called any of them would fail instead of answering."""
    nowhere = "127.0.0.1:9"
    settings = GatewaySettings(
        engine_address=nowhere, threads_address=nowhere, memory_address=nowhere, router_address=nowhere
    )
    transport = httpx.ASGITransport(app=create_app(settings))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        response = await client.get(
            "/api/agent/suggested-actions",
            params={"page_type": "meeting_notes", "selection": "Ship on Friday", "language": language},
        )
    assert response.status_code == 200, response.text
    actions = response.json()
    assert 2 <= len(actions["actions"]) <= 4 and set(actions) == {"actions"}
    assert actions["actions"][0]["prompt"].startswith(word)
    assert actions["actions"][0]["id"] == "summarise-selection"
    assert all("Ship on Friday" not in action["prompt"] for action in actions["actions"])
