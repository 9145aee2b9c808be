from __future__ import annotations

import uuid
from typing import Self

from pydantic import AliasChoices, Field, SecretStr, model_validator
from pydantic_settings import SettingsConfigDict

from services.engine.providers.config import ProviderConfig, parse_provider_configs
from services.engine.tools.connectors import TestMailConnector
from services.engine.tools.mcp_client import parse_mcp_servers
from services.engine.webhooks.signing import load_secret
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
    # Conversations' earlier entries kept between runs, so that a run reads
    # only the entries added since the last one (services/engine/entry_log.py);
    # in MiB of encoded entries, least recently used conversation out first;
    # the same again, in characters, for the turns built from them
    # (services/engine/history.py, TurnCache).
    # 0: every run reads, builds and counts its conversation's whole history.
    history_cache_mb: int = Field(default=32, ge=0)
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
    # Webhooks (docs/operations.md, "Webhooks"): the secret every delivery is
    # signed with (Standard Webhooks: "whsec_" + base64 of 24-64 random
    # bytes); "" = runs cannot name a webhook.
    webhook_secret: SecretStr = SecretStr("")
    # The longest one ask of a remote A2A agent may take, its card and its
    # answer included, in seconds (where it may be: SWITCHBOARD_REMOTE_AGENT_ALLOW_*
    # of services/shared/settings.py).
    remote_agent_timeout: float = Field(default=120.0, gt=0)
    # Development: webhooks to loopback addresses (and http to them).
    webhook_allow_loopback: bool = False
    # Webhooks to private, link-local and other non-public addresses
    # (receivers inside the operator's own network). Refused by default.
    webhook_allow_private_addresses: bool = False
    # Each delivery attempt's time limit, in seconds.
    webhook_timeout: float = Field(default=10.0, gt=0)
    # Attempts go on for this long after the run's end, with a jittered
    # exponential backoff from webhook_backoff_initial to webhook_backoff_max.
    webhook_retry_seconds: float = Field(default=3600.0, ge=0)
    webhook_backoff_initial: float = Field(default=1.0, gt=0)
    webhook_backoff_max: float = Field(default=300.0, gt=0)
    # Attempts in flight at once.
    webhook_concurrency: int = Field(default=8, ge=1, le=100)
    # Per-user run quotas (0 = no limit), enforced where runs are created, on
    # every surface, from the database (so across replicas): runs executing
    # at once, and runs started within the last minute. A refusal is
    # RESOURCE_EXHAUSTED (HTTP 429) with a retry delay.
    max_concurrent_runs_per_user: int = Field(default=20, ge=0)
    runs_per_minute_per_user: int = Field(default=120, ge=0)
    # Schedules: how late a tick may still run: a tick no engine claimed
    # within this grace of its time (every engine was stopped) is counted
    # missed, never replayed.
    schedule_misfire_grace_seconds: float = Field(default=60.0, ge=0)
    # Retention (0 = keep forever, the default): run events of runs that
    # ended more than this many days ago; runs themselves (with their events,
    # actions and skill runs). A running run, or one waiting for approval, is
    # never pruned. The prune runs once per interval across replicas.
    retention_run_events_days: float = Field(default=0.0, ge=0)
    retention_runs_days: float = Field(default=0.0, ge=0)
    retention_interval_seconds: float = Field(default=3600.0, gt=0)
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
        if secret := self.webhook_secret.get_secret_value():
            load_secret(secret)
        unknown = set(self.connector_names) - set(CONNECTORS)
        if unknown:
            raise ValueError(f"unknown connectors {sorted(unknown)}; known: {sorted(CONNECTORS)}")
        return self

    @property
    def connector_names(self) -> list[str]:
        return [name.strip() for name in self.connectors.split(",") if name.strip()]
