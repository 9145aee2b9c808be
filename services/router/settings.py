from __future__ import annotations

from typing import Self

from pydantic import Field, PrivateAttr, model_validator
from pydantic_settings import SettingsConfigDict

from services.router.model_routing import DEFAULT_MODELS_JSON, ModelOption, parse_models
from services.shared.settings import ServiceSettings


class RouterSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="SWITCHBOARD_ROUTER_", frozen=True, extra="ignore")

    service_name: str = "router"
    port: int = 50052
    # Thresholds on the fused skill score (0..1; lexical only for now, see
    # domain.lexical_score). At or above ``high_threshold`` a skill is applied
    # outright; below ``low_threshold`` nothing is; between them is the grey
    # zone, decided deterministically at the midpoint (0.45 with these
    # defaults). 0.6 needs a request whose content words are mostly the skill's
    # vocabulary with at least two of them ("meeting notes" scores 0.67); one
    # shared word alone never reaches it (at most 0.33, grey). 0.3 keeps
    # incidental overlaps (one word in a longer request) out of the grey zone.
    # Prudent defaults (seed 002 P2-T11), checked against the labelled requests
    # of tests/unit/test_skill_scoring.py, to be re-tuned on the 30-request set.
    high_threshold: float = Field(default=0.6, ge=0.0, le=1.0)
    low_threshold: float = Field(default=0.3, ge=0.0, le=1.0)
    # The contract chooses 0 to 2 automatic skills.
    max_auto_skills: int = Field(default=2, ge=0, le=2)
    # JSON list of {id, provider, model, profile: fast|balanced|strong,
    # web_only, expensive}; parsed and checked once, at start-up.
    models_json: str = DEFAULT_MODELS_JSON

    _models: tuple[ModelOption, ...] = PrivateAttr(default=())

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.low_threshold >= self.high_threshold:
            raise ValueError(
                f"low_threshold ({self.low_threshold}) must be below high_threshold ({self.high_threshold})"
            )
        self._models = parse_models(self.models_json)
        return self

    @property
    def models(self) -> tuple[ModelOption, ...]:
        return self._models
