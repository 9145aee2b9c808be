"""The registry that builds one client per configured provider, beside the
offline model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from services.engine.providers.base import LLMProvider
from services.engine.providers.config import ProviderConfig

if TYPE_CHECKING:
    from services.engine.providers.cli import SessionStore


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
