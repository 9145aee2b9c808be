from __future__ import annotations

import uuid
from typing import Self

from pydantic import AliasChoices, Field, model_validator
from pydantic_settings import SettingsConfigDict

from services.engine.connectors import TestMailConnector
from services.engine.mcp_tools import parse_mcp_servers
from services.engine.providers.config import ProviderConfig, parse_provider_configs
from services.shared.settings import ServiceSettings

# Connectors that can be switched on by name.
CONNECTORS = {"testmail": TestMailConnector}


class EngineSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="SWITCHBOARD_ENGINE_", frozen=True, extra="ignore")

    service_name: str = "engine"
    port: int = 50051
    threads_address: str = "127.0.0.1:50053"
    memory_address: str = "127.0.0.1:50054"
    router_address: str = "127.0.0.1:50052"
    # Deadline of each call to another service, in seconds.
    call_timeout: float = 5.0
    # Deadline of the routing calls: a slow router costs a run at most this,
    # then the run goes on without automatic skills, with the fallback model.
    router_timeout: float = Field(default=1.0, gt=0)
    # The model that answers when the router cannot be reached: "provider/model".
    fallback_model: str = "offline/switchboard-offline-balanced"
    # The model that titles a conversation after its first exchange
    # ("provider/model" of a configured provider); empty: the run's own
    # model. Offline runs keep the cut of the request.
    title_model: str = ""
    max_message_chars: int = 32_000
    # Token deltas are coalesced: the first is sent at once, later ones at most
    # every delta_flush_seconds or when delta_flush_chars have accumulated.
    delta_flush_seconds: float = 0.03
    delta_flush_chars: int = 512
    # Offline model: pause between tokens (0 for tests and benchmarks; a demo
    # sets it to watch the answer stream).
    offline_token_delay: float = 0.0
    # Runs of an engine instance whose lease is older than this are settled
    # failed ("interrupted"); each instance renews its lease every third of it.
    lease_seconds: float = 15.0
    instance_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    # LLM endpoints besides the offline model: a JSON list of
    # {name, kind: openai|anthropic|cli, base_url, api_key_env, timeout,
    # max_output_tokens}; the router's models name them as their provider.
    # Checked at start-up.
    providers_json: str = "[]"
    # Attempts at a model call that fails before any text reached the client
    # (429, 5xx, overloaded, connection lost); never retried after.
    provider_attempts: int = Field(default=3, ge=1, le=10)
    # Longest instruction page put in a prompt (characters); a longer page is
    # cut at a line break, and the run says so with a notice.
    instruction_page_budget_chars: int = Field(default=8000, ge=100)
    # A run's budget when its request sets none (0 = no limit): tokens in +
    # out over its model calls, model and tool steps, wall-clock seconds. A run
    # that reaches one ends budget_exceeded.
    max_run_tokens: int = Field(default=200_000, ge=0)
    max_run_steps: int = Field(default=20, ge=0)
    max_run_seconds: float = Field(default=600.0, ge=0)
    # Tools: MCP servers runs may call (JSON list of {name, command, args, env,
    # cwd, start_timeout}; started on first use, stdio), and the connectors
    # offered ("testmail": the canned mailbox of tests and demos). A
    # conversation must still allow each one (its allowed_sources).
    mcp_servers_json: str = "[]"
    connectors: str = ""
    # Per-user run quotas (0 = no limit), enforced where runs are created, on
    # every surface, from the database (so across replicas): runs executing
    # at once, and runs started within the last minute. A refusal is
    # RESOURCE_EXHAUSTED (HTTP 429) with a retry delay.
    max_concurrent_runs_per_user: int = Field(default=20, ge=0)
    runs_per_minute_per_user: int = Field(default=120, ge=0)
    # How often an engine looks for CancelRun requests made on another replica.
    cancel_poll_seconds: float = Field(default=0.5, gt=0)
    # Prompt and answer text on `chat` spans; off unless asked for (the
    # OpenTelemetry GenAI instrumentations' own switch is honoured too).
    capture_message_content: bool = Field(
        default=False,
        validation_alias=AliasChoices(
            "SWITCHBOARD_ENGINE_CAPTURE_MESSAGE_CONTENT", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
        ),
    )

    @property
    def provider_configs(self) -> list[ProviderConfig]:
        return parse_provider_configs(self.providers_json)

    @model_validator(mode="after")
    def _check_providers(self) -> Self:
        # A broken configuration fails at start-up, not at the first run.
        parse_provider_configs(self.providers_json)
        parse_mcp_servers(self.mcp_servers_json)
        provider, slash, model = self.fallback_model.partition("/")
        known = {"offline", *(c.name for c in self.provider_configs)}
        if not slash or not model or provider not in known:
            raise ValueError(f"fallback_model must be 'provider/model' with a provider of {sorted(known)}")
        title_provider, slash, title_model = self.title_model.partition("/")
        if self.title_model and (not slash or not title_model or title_provider not in known - {"offline"}):
            raise ValueError(
                f"title_model must be 'provider/model' with a provider of {sorted(known - {'offline'})}"
            )
        unknown = set(self.connector_names) - set(CONNECTORS)
        if unknown:
            raise ValueError(f"unknown connectors {sorted(unknown)}; known: {sorted(CONNECTORS)}")
        return self

    @property
    def connector_names(self) -> list[str]:
        return [name.strip() for name in self.connectors.split(",") if name.strip()]
