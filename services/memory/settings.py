from __future__ import annotations

from pathlib import Path
from typing import Self

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from services.shared.completion import CompletionModel, parse_completion_model
from services.shared.embeddings import EmbedderName
from services.shared.settings import ServiceSettings


class MemorySettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="SWITCHBOARD_MEMORY_", frozen=True, extra="ignore")

    service_name: str = "memory"
    port: int = 50054
    # Longest note body accepted, in characters.
    max_note_chars: int = 8000
    # Longest project context accepted, in characters.
    max_context_chars: int = 32_000
    # The shared embedder (services.shared.embeddings): "use-multilingual-v3"
    # (a real multilingual sentence model, the default) or "hashing"
    # (deterministic, for tests).
    embedder: EmbedderName = EmbedderName.USE_MULTILINGUAL
    # Another folder of the model's files than the wheel's (tests, air-gapped
    # mirrors); a missing or corrupt file stops the service at start-up.
    embedder_model_dir: Path | None = None
    # At start-up, give notes of another embedder a vector of this one in the
    # background (`python -m services.memory reembed` does it by hand).
    reembed_at_startup: bool = True
    # Cosine at or above which a new note is a near-duplicate of an existing
    # one of the same project. None: the embedder's default
    # (notes.DUPLICATE_COSINE).
    duplicate_cosine: float | None = Field(default=None, gt=0.0, le=1.0)
    # Cosine below which a note is not an embedding candidate of recall, so a
    # query about nothing in the project recalls nothing. None: the
    # embedder's default (recall.MIN_COSINE).
    recall_min_cosine: float | None = Field(default=None, ge=-1.0, le=1.0)
    # The memory budget of the per-project recall indexes a process keeps
    # (vectors, postings, rows), least recently used dropped first. A project
    # of 100,000 notes of a few hundred characters takes about 600 MB with
    # 384-dimension vectors; an index bigger than the budget is kept alone.
    recall_cache_mb: int = Field(default=1024, ge=1)
    # Live state: lifetime of an entry set without ttl or expire_time, and
    # the longest allowed.
    live_default_ttl: float = Field(default=300.0, gt=0.0)
    live_max_ttl: float = Field(default=86_400.0, gt=0.0)
    # Pages: longest title + body accepted (characters), and how many
    # undecided proposals a page (and a project's notes) may have.
    max_page_chars: int = Field(default=100_000, gt=0)
    max_pending_proposals: int = Field(default=50, gt=0)
    # The most a project's durable notes may hold (titles and bodies, in
    # characters), whoever writes them.
    max_project_note_chars: int = Field(default=2_000_000, gt=0)
    # Handoff summaries fold the recorded entries every this many new entries
    # (and on rotation, and on request).
    handoff_checkpoint_every: int = Field(default=20, gt=0)
    # The summary model (services/shared/completion.py: a JSON object
    # {kind, base_url, model, api_key_env, timeout}); empty: the rules fold
    # every summary. On an error or past ``summary_model_timeout`` seconds the
    # rules fold instead, and the summary records why.
    summary_model_json: str = ""
    summary_model_timeout: float = Field(default=30.0, gt=0, le=600)

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.live_default_ttl > self.live_max_ttl:
            raise ValueError("live_default_ttl must not exceed live_max_ttl")
        parse_completion_model(self.summary_model_json, "summary_model_json")
        return self

    @property
    def summary_model(self) -> CompletionModel | None:
        return parse_completion_model(self.summary_model_json, "summary_model_json")
