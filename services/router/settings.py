"""Settings of the router service (env prefix ``SWITCHBOARD_ROUTER_``)."""

from __future__ import annotations

from pathlib import Path
from typing import Self

from pydantic import Field, PrivateAttr, model_validator
from pydantic_settings import SettingsConfigDict

from services.router.model_routing import DEFAULT_MODELS_JSON, ModelOption, parse_models
from services.shared.completion import CompletionModel, parse_completion_model
from services.shared.embeddings import EmbedderName
from services.shared.settings import ServiceSettings

# Found by `python -m services.router fit-thresholds` (use-multilingual-v3).
FITTED_HIGH = 0.41
FITTED_LOW = 0.22


class RouterSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="SWITCHBOARD_ROUTER_", frozen=True, extra="ignore")

    service_name: str = "router"
    port: int = 50052
    # The embedder of the Skill Router's embedding ranking
    # (services.shared.embeddings: "use-multilingual-v3", or "hashing" for tests).
    embedder: EmbedderName = EmbedderName.USE_MULTILINGUAL
    # Another folder of the model's files than the wheel's (tests, air-gapped
    # mirrors); a missing or corrupt file stops the service at start-up.
    embedder_model_dir: Path | None = None
    # When more skills have no vector of this embedder than a catalog change
    # embeds on the spot (the embedder changed, a bulk import), embed them in
    # the background (`python -m services.router reindex` does it by hand);
    # routing is lexical only meanwhile, and says so.
    reindex_in_background: bool = True
    # Thresholds on the fused skill score (0..1, services/router/skill_router.py).
    # At or above ``high_threshold`` a skill is applied outright; below
    # ``low_threshold`` nothing is; between them is the grey zone (LLM
    # arbitration, or the midpoint when deterministic). Fitted, not guessed:
    # ``python -m services.router fit-thresholds`` on
    # tests/fixtures/router/skill_requests.json with the default embedder
    # (docs/router.md gives its output, precision and recall per language).
    high_threshold: float = Field(default=FITTED_HIGH, ge=0.0, le=1.0)
    low_threshold: float = Field(default=FITTED_LOW, ge=0.0, le=1.0)
    # LLM arbitration in the grey zone; off = the router is
    # fully deterministic. Offline requests never arbitrate.
    arbitration_enabled: bool = True
    # The grey-zone arbiter's model (services/shared/completion.py: a JSON
    # object {kind, base_url, model, api_key_env}); empty: the grey zone is
    # decided at the midpoint. It must answer within ``arbiter_timeout``
    # seconds, kept below the engine's router_timeout (1 s by default), else
    # the deterministic branch decides.
    arbiter_model_json: str = ""
    arbiter_timeout: float = Field(default=0.8, gt=0, le=30)
    # The contract chooses 0 to 2 automatic skills.
    max_auto_skills: int = Field(default=2, ge=0, le=2)
    # JSON list of {id, provider, model, profile: fast|balanced|strong,
    # web_only, expensive, web_search, context_window}; parsed and checked
    # once, at start-up. web_search marks a model that searches the web by
    # itself: Auto prefers it for a request that needs the web.
    models_json: str = DEFAULT_MODELS_JSON

    _models: tuple[ModelOption, ...] = PrivateAttr(default=())

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.low_threshold >= self.high_threshold:
            raise ValueError(
                f"low_threshold ({self.low_threshold}) must be below high_threshold ({self.high_threshold})"
            )
        self._models = parse_models(self.models_json)
        parse_completion_model(self.arbiter_model_json, "arbiter_model_json")
        return self

    @property
    def arbiter_model(self) -> CompletionModel | None:
        return parse_completion_model(self.arbiter_model_json, "arbiter_model_json")

    @property
    def models(self) -> tuple[ModelOption, ...]:
        return self._models
