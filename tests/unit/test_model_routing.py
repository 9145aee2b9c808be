"""The `Auto` model router: classification, choice, refusals (profiles,
web-only and expensive models, requests that need the web)."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from services.router.model_routing import (
    DEFAULT_CONTEXT_WINDOW,
    ModelOption,
    classify,
    parse_models,
    route_model,
)
from services.router.settings import RouterSettings
from services.router.web_need import needs_web
from services.shared.errors import FailedPrecondition, InvalidArgument

DEFAULT = RouterSettings().models
SHORT = "What is the capital of Australia?"
MULTI_STEP = (
    "Read the three attached supplier offers, then compare their prices and delivery times. "
    "Write a recommendation for the purchasing committee and draft the email announcing it."
)
LONG = "Here is the context of the project. " * 30


def option(id: str, profile: str, **flags: bool) -> ModelOption:
    return ModelOption.model_validate(
        {"id": id, "provider": "p", "model": f"m-{id}", "profile": profile, **flags}
    )


def test_default_configuration_is_three_offline_models() -> None:
    assert [(m.id, m.provider, m.model, m.profile) for m in DEFAULT] == [
        ("offline-fast", "offline", "switchboard-offline-fast", "fast"),
        ("offline-balanced", "offline", "switchboard-offline-balanced", "balanced"),
        ("offline-strong", "offline", "switchboard-offline-strong", "strong"),
    ]
    assert not any(m.expensive or m.web_only for m in DEFAULT)


def test_short_factual_and_long_multi_step_choose_different_profiles() -> None:
    short = route_model(DEFAULT, SHORT, "auto")
    multi = route_model(DEFAULT, MULTI_STEP, "")
    assert (short.model.id, short.routed) == ("offline-fast", True)
    assert (multi.model.id, multi.routed) == ("offline-strong", True)
    assert "short factual" in short.reason and "fast" in short.reason
    assert "multi-step" in multi.reason and "strong" in multi.reason


@pytest.mark.parametrize(
    ("text", "profile", "rule"),
    [
        (SHORT, "fast", "short factual"),
        ("", "fast", "short factual"),
        (LONG, "strong", "long request"),
        ("Plan the launch:\n1. list the tasks\n2. assign owners\n3. set dates", "strong", "numbered list"),
        ("Fais le bilan du trimestre, ensuite propose un plan.", "strong", "ensuite"),
        ("Résume la réunion puis envoie-le à l'équipe", "strong", "puis"),
        ("Write the agenda. Send it to the team. Book the room.", "strong", "imperative"),
        ("Quelle est la date de la prochaine release ?", "fast", "short factual"),
        ("Could you explain " + "why the quarterly numbers moved so much " * 6, "balanced", "medium"),
    ],
)
def test_classification_rules(text: str, profile: str, rule: str) -> None:
    found = classify(text)
    assert found.profile == profile and rule in found.rule, found


def test_auto_avoids_expensive_models_unless_strong() -> None:
    models = [
        option("premium-fast", "fast", expensive=True),
        option("cheap-balanced", "balanced"),
        option("premium-strong", "strong", expensive=True),
    ]
    short = route_model(models, SHORT, "auto")
    assert short.model.id == "cheap-balanced" and "fell back" in short.reason
    assert route_model(models, MULTI_STEP, "auto").model.id == "premium-strong"


def test_auto_never_picks_a_web_only_model() -> None:
    models = [option("web-fast", "fast", web_only=True), option("plain-fast", "fast"), option("s", "strong")]
    assert route_model(models, SHORT, "").model.id == "plain-fast"
    # Chosen by hand, it is allowed.
    assert route_model(models, SHORT, "web-fast").model.id == "web-fast"


def test_falls_back_to_balanced_then_fast() -> None:
    models = [option("f", "fast"), option("b", "balanced")]
    assert route_model(models, MULTI_STEP, "auto").model.id == "b"
    assert route_model([option("f", "fast")], MULTI_STEP, "auto").model.id == "f"


def test_no_eligible_model_is_a_failed_precondition() -> None:
    with pytest.raises(FailedPrecondition):
        route_model([option("x", "strong", expensive=True)], SHORT, "auto")


def test_manual_choice_is_never_rerouted() -> None:
    route = route_model(DEFAULT, MULTI_STEP, "offline-fast")
    assert (route.model.id, route.routed) == ("offline-fast", False)
    assert "manual" in route.reason
    expensive = [option("big", "strong", expensive=True), option("small", "fast")]
    assert route_model(expensive, SHORT, "big").model.id == "big"


def test_unconfigured_model_is_refused_never_replaced() -> None:
    with pytest.raises(InvalidArgument) as raised:
        route_model(DEFAULT, SHORT, "gpt-unknown")
    assert "gpt-unknown" in raised.value.message and raised.value.metadata["model"] == "gpt-unknown"
    with pytest.raises(InvalidArgument) as raised:
        route_model(DEFAULT, SHORT, "", default_model="gone-model")
    assert raised.value.metadata["field"] == "default_model"


def test_default_model_applies_only_when_nothing_is_requested() -> None:
    assert route_model(DEFAULT, MULTI_STEP, "", default_model="offline-fast").model.id == "offline-fast"
    assert not route_model(DEFAULT, MULTI_STEP, "", default_model="offline-fast").routed
    routed = route_model(DEFAULT, MULTI_STEP, "", default_model="AUTO")
    assert (routed.model.id, routed.routed) == ("offline-strong", True)
    assert (
        route_model(DEFAULT, SHORT, "offline-strong", default_model="offline-fast").model.id
        == "offline-strong"
    )
    assert route_model(DEFAULT, SHORT, "Auto", default_model="offline-strong").model.id == "offline-fast"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("not json", "not a valid list of models"),
        ("[]", "at least one model"),
        ('[{"id": "a", "provider": "p", "model": "m", "profile": "huge"}]', "not a valid list"),
        ('[{"id": "auto", "provider": "p", "model": "m", "profile": "fast"}]', "reserved"),
        (
            json.dumps([{"id": "a", "provider": "p", "model": "m", "profile": "fast"}] * 2),
            "configured twice",
        ),
        (
            '[{"id": "a", "provider": "p", "model": "m", "profile": "fast", "expensive": true}]',
            "neither web_only nor expensive",
        ),
    ],
)
def test_bad_models_configuration_fails_start_up(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_models(value)
    with pytest.raises(ValidationError, match=message):
        RouterSettings(models_json=value)


def test_settings_refuse_inverted_thresholds() -> None:
    with pytest.raises(ValidationError, match="below high_threshold"):
        RouterSettings(high_threshold=0.3, low_threshold=0.5)
    with pytest.raises(ValidationError):
        RouterSettings(max_auto_skills=3)


def test_offline_auto_picks_only_the_deterministic_test_models() -> None:
    models = [
        option("cloud-fast", "fast"),
        option("cloud-strong", "strong"),
        ModelOption(id="offline-fast", provider="offline", model="o-fast", profile="fast"),
        ModelOption(id="offline-strong", provider="offline", model="o-strong", profile="strong"),
    ]
    short, multi = (
        route_model(models, SHORT, "auto", offline=True),
        route_model(models, MULTI_STEP, "", offline=True),
    )
    assert (short.model.id, short.request_profile) == ("offline-fast", "fast")
    assert (multi.model.id, multi.request_profile) == ("offline-strong", "strong")
    assert short.reason.startswith("offline auto") and short.routed
    # Online, the same requests go to the configured models.
    assert route_model(models, SHORT, "auto").model.id == "cloud-fast"
    # A manual choice is still never routed, offline or not.
    assert route_model(models, SHORT, "cloud-strong", offline=True).model.id == "cloud-strong"
    with pytest.raises(FailedPrecondition):
        route_model([option("cloud-fast", "fast")], SHORT, "auto", offline=True)


def test_the_route_says_when_it_chose_an_expensive_or_web_only_model() -> None:
    models = [
        option("cheap", "fast"),
        option("big", "strong", expensive=True),
        option("web", "fast", web_only=True),
    ]
    strong = route_model(models, MULTI_STEP, "auto")
    assert strong.model.id == "big" and strong.request_profile == "strong"
    assert any("expensive" in n and "strong" in n for n in strong.notices)
    cheap = route_model(models, SHORT, "auto")
    assert cheap.model.id == "cheap" and cheap.notices == ()
    manual_web = route_model(models, SHORT, "web")
    assert manual_web.model.web_only and manual_web.request_profile is None
    assert any("web-only" in n for n in manual_web.notices)


def test_auto_refuses_an_empty_request() -> None:
    with pytest.raises(InvalidArgument):
        route_model(DEFAULT, "   ", "auto")
    # A manual choice needs no text to classify.
    assert route_model(DEFAULT, "", "offline-fast").model.id == "offline-fast"


def test_a_bad_context_window_is_refused_at_start_up_naming_the_field() -> None:
    base = {"id": "m", "provider": "p", "model": "x", "profile": "fast"}
    for bad in ({"context_window": "lots"}, {"context_window": 100}, {"context_windw": 8192}):
        with pytest.raises(ValueError) as refused:
            parse_models(json.dumps([{**base, **bad}]))
        assert next(iter(bad)) in str(refused.value)
    (model,) = parse_models(json.dumps([base]))
    assert model.context_window == DEFAULT_CONTEXT_WINDOW


def test_a_pinned_provider_narrows_auto_and_refuses_another_providers_model() -> None:
    """An agent pinned to a provider: Auto chooses among that provider's
    models (the same request goes elsewhere unpinned), a model of another
    provider is refused rather than run there, and a provider no model is
    configured for is said so."""
    models = [
        ModelOption(id="alpha-fast", provider="alpha", model="a-fast", profile="fast"),
        ModelOption(id="beta-fast", provider="beta", model="b-fast", profile="fast"),
        ModelOption(id="beta-strong", provider="beta", model="b-strong", profile="strong"),
        ModelOption(id="offline-fast", provider="offline", model="o-fast", profile="fast"),
    ]
    assert route_model(models, SHORT, "auto").model.id == "alpha-fast"
    assert route_model(models, SHORT, "auto", provider="beta").model.id == "beta-fast"
    assert route_model(models, MULTI_STEP, "", provider="beta").model.id == "beta-strong"
    assert route_model(models, SHORT, "beta-strong", provider="beta").model.id == "beta-strong"
    with pytest.raises(InvalidArgument) as elsewhere:
        route_model(models, SHORT, "alpha-fast", provider="beta")
    assert "served by provider 'alpha', not by the pinned provider 'beta'" in elsewhere.value.message
    with pytest.raises(FailedPrecondition) as unknown:
        route_model(models, SHORT, "auto", provider="gamma")
    assert unknown.value.message == "no configured model is served by provider 'gamma'"
    # Offline, Auto only has the test models: a pin elsewhere cannot be served.
    assert route_model(models, SHORT, "auto", offline=True, provider="offline").model.id == "offline-fast"
    with pytest.raises(FailedPrecondition) as offline:
        route_model(models, SHORT, "auto", offline=True, provider="beta")
    assert "runs offline" in offline.value.message


# Requests that need the web, and requests that only sound like it.
NEEDS_WEB = {
    "en": [
        ("Search the web for the latest Python release", 'a web search: "Search the web"'),
        ("Can you look up online who won the match yesterday?", 'a web search: "look up online"'),
        ("What is the latest news about the rail strike?", 'the news: "latest news"'),
        ("Give me today's headlines", 'the news: "today\'s headlines"'),
        ("What's the weather in Lyon tomorrow?", 'live figures: "weather"'),
        ("What is the current stock price of Airbus?", 'live figures: "current stock price"'),
    ],
    "fr": [
        ("Cherche sur le web les horaires du musée d'Orsay", 'a web search: "Cherche sur le web"'),
        ("Quelles sont les actualités d'aujourd'hui ?", "the news: \"actualités d'aujourd'hui\""),
        ("Donne-moi les dernières nouvelles sur la grève", 'the news: "dernières nouvelles"'),
        ("Fais une recherche en ligne sur ce fournisseur", 'a web search: "recherche en ligne"'),
        ("Quelle est la météo à Paris demain ?", 'live figures: "météo"'),
        ("Quel est le cours de l'action Airbus ?", 'live figures: "cours de l\'action"'),
    ],
}
NO_WEB = {
    "en": [
        "Write the weekly status report for the Atlas project",
        "Summarize the latest version of our meeting notes",
        "Prepare the sales forecast for the third quarter",
        "Look at the Google Doc of the sprint and list the open tasks",
        "What is the capital of Australia?",
    ],
    "fr": [
        "Rédige le point d'avancement hebdomadaire du projet Atlas",
        "Rédige un post sur l'actualité de l'équipe",
        "Trouve la page du projet Atlas dans l'espace de travail",
        "Quelle est la dernière version de la spécification ?",
        "Combien font 17 fois 23 ?",
    ],
}
WEB_MODELS = [
    option("fast", "fast"),
    option("balanced", "balanced"),
    option("strong", "strong"),
    option("online-strong", "strong", web_search=True, expensive=True),
    option("online", "balanced", web_search=True),
]


@pytest.mark.parametrize("language", ["en", "fr"])
def test_a_request_that_needs_the_web_is_classified_so_in_both_languages(language: str) -> None:
    for text, why in NEEDS_WEB[language]:
        assert needs_web(text) == why, text
        assert classify(text).needs_web == why
    for text in NO_WEB[language]:
        assert needs_web(text) == "" and classify(text).needs_web == "", text


@pytest.mark.parametrize("language", ["en", "fr"])
def test_auto_sends_a_request_that_needs_the_web_to_a_web_search_model_and_says_so(language: str) -> None:
    for text, why in NEEDS_WEB[language]:
        route = route_model(WEB_MODELS, text, "auto")
        # Short requests are fast: no fast model searches the web, so the
        # balanced one that does, never the expensive one (not a strong request).
        assert (route.model.id, route.needs_web, route.routed) == ("online", True, True), text
        assert f"needs the web ({why}): only the web-search models" in route.reason
        assert "no eligible fast web-search model: fell back" in route.reason
    for text in NO_WEB[language]:
        route = route_model(WEB_MODELS, text, "auto")
        assert not route.needs_web and not route.model.web_search and "web" not in route.reason, text


def test_the_web_need_keeps_the_other_rules_of_auto() -> None:
    long_web = "Search the web for every article about the merger. " * 15  # long: strong
    assert route_model(WEB_MODELS, long_web, "auto").model.id == "online-strong"
    # A manual choice is never re-routed, whatever the request needs.
    manual = route_model(WEB_MODELS, "latest news please", "balanced")
    assert (manual.model.id, manual.needs_web, manual.routed) == ("balanced", False, False)
    # Without an eligible web-search model, Auto routes as usual and says why.
    web_only = [option("fast", "fast"), option("browser", "fast", web_search=True, web_only=True)]
    route = route_model(web_only, "Cherche sur le web la date du salon", "auto")
    assert route.model.id == "fast" and route.needs_web
    assert 'needs the web (a web search: "Cherche sur le web"), but no eligible model searches the web' in (
        route.reason
    )
    # Offline, Auto keeps to the deterministic test models.
    offline = route_model(
        [*DEFAULT, option("online", "fast", web_search=True)], "latest news", "auto", offline=True
    )
    assert offline.model.provider == "offline" and offline.needs_web
    assert parse_models(json.dumps([{**WEB_MODELS[4].model_dump()}]))[0].web_search
