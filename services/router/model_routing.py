"""The ``Auto`` model router (profiles, web-only and expensive models): a
pure function over the configured models. No database, no gRPC, no LLM call.

How a request is classified (deterministic, in this order):

1. **strong** when the request is long (more than ``LONG_REQUEST_MIN_CHARS``
   characters) or shows multi-step markers: at least two numbered-list lines,
   at least three bullet lines, a sequencing word ("then", "ensuite", "puis",
   "step", "étape", "finally", "enfin", "afterwards"), or at least two
   sentences that open with an imperative verb ("Write ... . Compare ...").
2. **fast** when it is short (at most ``SHORT_FACTUAL_MAX_CHARS``) with no
   multi-step marker: a short factual question.
3. **balanced** otherwise.

A request that needs the web ("search the web for…", "latest news",
"cherche sur le web", "actualités d'aujourd'hui", the weather, a stock
price: the phrases of services/router/web_need.py) goes to a ``web_search``
model when one is eligible, in the same profile order; the reason says it
needed the web and which model searches it, or that no eligible model does.

Then the first configured model of that profile is chosen, falling back to
balanced, then fast, then any other profile. While routing automatically a
``web_only`` model is never chosen (it would silently drop the workspace
context), nor an ``expensive`` one unless the class is strong, and the route
then says so in its notices. In offline mode Auto only considers the
deterministic test models (provider ``offline``), with the same preference.
A manual choice (a configured id) is returned as is, never re-routed, with a
notice when it is web-only; an id that is not configured is refused, never
replaced. The route is decided once, before the run: a run never changes
model on the way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from services.router.web_need import needs_web
from services.shared.errors import FailedPrecondition, InvalidArgument
from services.shared.text import fold

Profile = Literal["fast", "balanced", "strong"]
AUTO = "auto"
# The provider of the deterministic test models that offline mode routes to.
OFFLINE_PROVIDER = "offline"
WEB_ONLY_NOTICE = "web-only model: the workspace context (pages, memory, connectors) is not sent to it"

DEFAULT_CONTEXT_WINDOW = 128_000
# Below this a model cannot hold the instruction layers and an answer.
MIN_CONTEXT_WINDOW = 2048
# The offline models' window (in words): small enough that a long offline
# conversation shows the folding into a summary.
OFFLINE_CONTEXT_WINDOW = 8192

SHORT_FACTUAL_MAX_CHARS = 200
LONG_REQUEST_MIN_CHARS = 600
MIN_NUMBERED_LINES = 2
MIN_BULLET_LINES = 3
MIN_IMPERATIVE_SENTENCES = 2

# Profiles tried for each class, in order; the class's own profile first.
_PREFERENCE: dict[Profile, tuple[Profile, ...]] = {
    "fast": ("fast", "balanced", "strong"),
    "balanced": ("balanced", "fast", "strong"),
    "strong": ("strong", "balanced", "fast"),
}

_NUMBERED_LINE = re.compile(r"^\s*\d{1,2}\s*[.)-]\s+\S", re.MULTILINE)
_BULLET_LINE = re.compile(r"^\s*[-*\u2022]\s+\S", re.MULTILINE)
_SENTENCE_SPLIT = re.compile(r"[.!?;:\n]+")
_WORD = re.compile(r"[a-z0-9]+")
# Accent-folded, lower case.
_SEQUENCE_WORDS = frozenset(
    {"then", "afterwards", "finally", "step", "steps", "ensuite", "puis", "enfin", "etape", "etapes"}
)
_IMPERATIVE_VERBS = frozenset(
    {
        # English
        "write", "draft", "create", "make", "build", "compare", "analyse", "analyze", "list", "find",
        "check", "summarize", "summarise", "translate", "explain", "review", "plan", "prepare", "send",
        "update", "extract", "organize", "organise", "generate", "rewrite", "search", "collect", "add",
        # French (imperative and infinitive forms)
        "ecris", "ecrivez", "ecrire", "redige", "redigez", "rediger", "cree", "creez", "creer",
        "comparez", "comparer", "analysez", "analyser", "liste", "listez", "lister", "trouve",
        "trouvez", "trouver", "verifie", "verifiez", "verifier", "resume", "resumez", "resumer", "traduis",
        "traduisez", "traduire", "explique", "expliquez", "expliquer", "preparez", "preparer",
        "envoie", "envoyez", "envoyer", "cherche", "cherchez", "chercher", "extrais", "extrayez",
        "extraire", "fais", "faites", "faire", "ajoute", "ajoutez", "ajouter", "planifie", "planifiez",
    }
)  # fmt: skip


class ModelOption(BaseModel):
    """One configured model (an entry of ``models_json``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1, max_length=128)
    provider: str = Field(min_length=1)
    model: str = Field(min_length=1)
    profile: Profile
    # Receives no workspace context: Auto never picks it.
    web_only: bool = False
    # Auto avoids it unless the request is classified strong.
    expensive: bool = False
    # Searches the web by itself at its provider (an online model): Auto
    # prefers it for a request that needs the web (web_need.py). The engine
    # gives no model a web tool; this says what the model does.
    web_search: bool = False
    # Input tokens the model takes: the engine fits a conversation's history
    # into it. The default suits today's hosted models; a local model
    # (Ollama's default context is 2,048 or 4,096) needs its own figure.
    context_window: int = Field(default=DEFAULT_CONTEXT_WINDOW, ge=MIN_CONTEXT_WINDOW, le=10_000_000)


_MODELS = TypeAdapter(list[ModelOption])

DEFAULT_MODELS_JSON = json.dumps(
    [
        {
            "id": f"offline-{p}",
            "provider": "offline",
            "model": f"switchboard-offline-{p}",
            "profile": p,
            "context_window": OFFLINE_CONTEXT_WINDOW,
        }
        for p in ("fast", "balanced", "strong")
    ]
)


def parse_models(text: str) -> tuple[ModelOption, ...]:
    """Parses and checks the configured models; ValueError with a readable
    message when the configuration cannot work."""
    try:
        models = _MODELS.validate_json(text)
    except ValidationError as exc:
        raise ValueError(f"models_json is not a valid list of models: {exc}") from exc
    if not models:
        raise ValueError("models_json must configure at least one model")
    seen: set[str] = set()
    for option in models:
        if option.id.strip().lower() == AUTO:
            raise ValueError(f"models_json: {option.id!r} is reserved for automatic routing")
        if option.id in seen:
            raise ValueError(f"models_json: model id {option.id!r} is configured twice")
        seen.add(option.id)
    if not any(_auto_eligible(option, "fast") for option in models):
        raise ValueError("models_json: Auto needs at least one model that is neither web_only nor expensive")
    return tuple(models)


@dataclass(frozen=True)
class Classification:
    profile: Profile
    rule: str
    # Why the request needs the web (web_need.needs_web); "" when it does not.
    needs_web: str = ""


@dataclass(frozen=True)
class ModelRoute:
    model: ModelOption
    reason: str
    routed: bool
    # The class of the request; None for a manual choice.
    request_profile: Profile | None = None
    notices: tuple[str, ...] = ()
    # Auto found the request needs the web (and said why in ``reason``).
    needs_web: bool = False


def _multi_step_marker(text: str) -> str:
    """The first multi-step marker found, described; "" when there is none."""
    numbered = len(_NUMBERED_LINE.findall(text))
    if numbered >= MIN_NUMBERED_LINES:
        return f"a numbered list ({numbered} items)"
    bullets = len(_BULLET_LINE.findall(text))
    if bullets >= MIN_BULLET_LINES:
        return f"a bulleted list ({bullets} items)"
    folded = fold(text)
    sequencing = sorted(set(_WORD.findall(folded)) & _SEQUENCE_WORDS)
    if sequencing:
        return f"sequencing word {sequencing[0]!r}"
    imperative = 0
    for sentence in _SENTENCE_SPLIT.split(folded):
        words = _WORD.findall(sentence)
        if words and words[0] in _IMPERATIVE_VERBS:
            imperative += 1
    if imperative >= MIN_IMPERATIVE_SENTENCES:
        return f"{imperative} sentences opening with an imperative verb"
    return ""


def classify(text: str) -> Classification:
    length = len(text.strip())
    web = needs_web(text)
    if length > LONG_REQUEST_MIN_CHARS:
        return Classification("strong", f"long request ({length} chars > {LONG_REQUEST_MIN_CHARS})", web)
    marker = _multi_step_marker(text)
    if marker:
        return Classification("strong", f"multi-step request ({marker})", web)
    if length <= SHORT_FACTUAL_MAX_CHARS:
        return Classification(
            "fast",
            f"short factual request ({length} chars <= {SHORT_FACTUAL_MAX_CHARS}, no multi-step marker)",
            web,
        )
    return Classification("balanced", f"medium request ({length} chars, no multi-step marker)", web)


def _auto_eligible(option: ModelOption, profile: Profile) -> bool:
    return not option.web_only and (not option.expensive or profile == "strong")


def _auto_route(models: Sequence[ModelOption], text: str, offline: bool) -> ModelRoute:
    if not text.strip():
        raise InvalidArgument("text must not be empty to route a model automatically", field="text")
    found = classify(text)
    pool = [m for m in models if m.provider == OFFLINE_PROVIDER] if offline else list(models)
    mode = "offline auto (deterministic test models only)" if offline else "auto"
    web = kind = ""
    if found.needs_web:
        searching = [m for m in pool if m.web_search and _auto_eligible(m, found.profile)]
        if searching:
            pool, kind = searching, " web-search"
            web = f"; needs the web ({found.needs_web}): only the web-search models"
        else:
            web = f"; needs the web ({found.needs_web}), but no eligible model searches the web"
    for profile in _PREFERENCE[found.profile]:
        for option in pool:
            if option.profile == profile and _auto_eligible(option, found.profile):
                fallback = (
                    ""
                    if profile == found.profile
                    else f", no eligible {found.profile}{kind} model: fell back"
                )
                notices = (
                    (f"expensive model {option.id}: chosen because the request is classed strong",)
                    if option.expensive
                    else ()
                )
                return ModelRoute(
                    option,
                    f"{mode}: {found.rule} -> {found.profile} profile{web}{fallback}; "
                    f"chose {option.id} ({profile})",
                    routed=True,
                    request_profile=found.profile,
                    notices=notices,
                    needs_web=bool(found.needs_web),
                )
    raise FailedPrecondition(
        f"no configured {'offline ' if offline else ''}model can serve "
        f"a {found.profile} request automatically",
        profile=found.profile,
    )


def route_model(
    models: Sequence[ModelOption],
    text: str,
    requested_model: str,
    default_model: str = "",
    *,
    offline: bool = False,
    provider: str = "",
) -> ModelRoute:
    """Resolves the requested model: "" or "auto" routes (through the user's
    ``default_model`` first when nothing was requested); a configured id is
    returned unchanged; anything else is INVALID_ARGUMENT. With
    ``provider`` (an agent pinned to it) only that provider's models count
    (see ``_pinned``)."""
    requested, source, field = requested_model.strip(), "requested", "requested_model"
    if not requested and default_model.strip():
        requested, source, field = default_model.strip(), "default", "default_model"
    if provider:
        models = _pinned(models, provider, requested, field, offline)
    if not requested or requested.lower() == AUTO:
        return _auto_route(models, text, offline)
    for option in models:
        if option.id == requested:
            return ModelRoute(
                option,
                f"manual: the {source} model {option.id!r}, never re-routed",
                routed=False,
                notices=(WEB_ONLY_NOTICE,) if option.web_only else (),
            )
    raise InvalidArgument(f"model {requested!r} is not configured", field=field, model=requested)


def _pinned(
    models: Sequence[ModelOption], provider: str, requested: str, field: str, offline: bool
) -> list[ModelOption]:
    """The models of the pinned ``provider``: Auto chooses among them, and a
    model of another provider is refused rather than run elsewhere (the pin
    is what the agent's owner asked for: a local-only agent stays local)."""
    pool = [option for option in models if option.provider == provider]
    if not pool:
        raise FailedPrecondition(f"no configured model is served by provider {provider!r}", provider=provider)
    elsewhere = next((o for o in models if o.id == requested and o.provider != provider), None)
    if elsewhere is not None:
        raise InvalidArgument(
            f"model {requested!r} is served by provider {elsewhere.provider!r}, "
            f"not by the pinned provider {provider!r}",
            field=field,
            model=requested,
            provider=provider,
        )
    if offline and provider != OFFLINE_PROVIDER and (not requested or requested.lower() == AUTO):
        raise FailedPrecondition(
            f"provider {provider!r} is pinned, but this engine runs offline: "
            "Auto only picks the deterministic test models",
            provider=provider,
        )
    return pool
