"""The configured providers: their settings (``SWITCHBOARD_ENGINE_PROVIDERS_JSON``)
and the registry that builds one client per entry, beside the offline model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from services.engine.providers.base import LLMProvider

if TYPE_CHECKING:
    from services.engine.providers.cli import SessionStore


class CliEvents(BaseModel):
    """Where a CLI's JSON-lines events keep what the provider needs: dotted
    paths into an event (an integer step indexes a list)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type_field: str = "type"
    # Event type -> path of the text delta it carries.
    text: dict[str, str] = Field(default_factory=lambda: {"text": "text"})
    # Looked for in every event; the last one seen is the session.
    session_id: str = "session_id"
    tokens_in: str = "usage.input_tokens"
    tokens_out: str = "usage.output_tokens"


class ProviderConfig(BaseModel):
    """One configured provider endpoint (``SWITCHBOARD_ENGINE_PROVIDERS_JSON``).
    A model of the router's catalog names its provider by ``name``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=64)
    kind: Literal["openai", "anthropic", "cli"]
    # OpenAI-compatible: ".../v1" (OpenAI, Ollama, vLLM, llama.cpp server...).
    base_url: str = ""
    # The environment variable holding the key: keys never sit in config files.
    api_key_env: str = ""
    # Seconds without a byte from the provider before the attempt fails.
    timeout: float = Field(default=60.0, gt=0)
    max_output_tokens: int = Field(default=4096, gt=0)

    # CLI (kind "cli"): the argv template; see services/engine/providers/cli.py.
    command: list[str] = Field(default_factory=list)
    context_strategy: Literal["convention_file", "flag", "stdin", "env"] = "convention_file"
    convention_file_name: str = "AGENTS.md"
    context_flag: str = ""
    context_env: str = ""
    resume_args: list[str] = Field(default_factory=list)
    output: Literal["jsonl", "text"] = "jsonl"
    events: CliEvents = Field(default_factory=CliEvents)
    # Text output: a regex whose first group is the session id, on stderr.
    session_pattern: str = ""
    # The only environment variables the CLI inherits (its own key among them).
    pass_env: list[str] = Field(default_factory=lambda: ["PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER"])

    @model_validator(mode="after")
    def _check_kind(self) -> Self:
        if self.kind != "cli":
            if not self.base_url:
                raise ValueError(f"provider {self.name!r}: base_url is required")
            return self
        from services.engine.providers.cli import check_cli_config

        check_cli_config(self)
        return self


_CONFIGS = TypeAdapter(list[ProviderConfig])


def parse_provider_configs(text: str) -> list[ProviderConfig]:
    """Parses and checks the configured providers; ValueError when they cannot work."""
    configs = _CONFIGS.validate_json(text or "[]")
    names = [config.name for config in configs]
    if "offline" in names or len(set(names)) != len(names):
        raise ValueError(f"provider names must be unique and not 'offline': {names}")
    return configs


def build_providers(
    configs: Sequence[ProviderConfig],
    environment: Mapping[str, str],
    offline_token_delay: float = 0.0,
    sessions: SessionStore | None = None,
) -> dict[str, LLMProvider]:
    """The offline provider plus one client per configured endpoint. CLI
    providers keep native sessions in ``sessions`` (by default in this
    process's memory)."""
    # Each SDK is imported only when a provider of its kind is configured
    # (together they cost about 2 s of start-up).
    from services.engine.providers.cli import CliProvider, InMemorySessionStore
    from services.engine.providers.offline import OfflineProvider

    built: dict[str, LLMProvider] = {"offline": OfflineProvider(offline_token_delay)}
    store = sessions if sessions is not None else InMemorySessionStore()
    for config in configs:
        key = environment.get(config.api_key_env, "") if config.api_key_env else ""
        if config.kind == "openai":
            from services.engine.providers.openai import OpenAIProvider

            built[config.name] = OpenAIProvider(config, key)
        elif config.kind == "cli":
            built[config.name] = CliProvider(config, environment, store)
        else:
            from services.engine.providers.anthropic import AnthropicProvider

            built[config.name] = AnthropicProvider(config, key)
    return built
