"""LLM providers behind one streaming interface, and the registry that builds
them from settings. The providers live in their own modules: offline (the
deterministic model of tests, demos and benchmarks), OpenAI-compatible,
Anthropic, and headless agent CLIs.

A provider yields text chunks as they arrive, tool calls once complete, and
the usage last. It raises :class:`ProviderError` for anything that went
wrong on the provider's side, saying whether trying again may help; the run
decides whether it still may (only before any text reached the client)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, Self

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from services.shared.errors import DependencyUnavailable

if TYPE_CHECKING:
    from services.engine.cli_provider import SessionStore


@dataclass(frozen=True)
class ToolCallChunk:
    """A complete tool call: ``arguments`` is the JSON text the model wrote."""

    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ChatMessage:
    """One message of a conversation with a model. An assistant message may
    carry the tool calls the model made; a "tool" message carries one call's
    result (``tool_call_id`` names the call)."""

    role: str  # "system" | "user" | "assistant" | "tool"
    content: str
    tool_calls: tuple[ToolCallChunk, ...] = ()
    tool_call_id: str = ""


@dataclass(frozen=True)
class TextChunk:
    text: str


@dataclass(frozen=True)
class ReasoningChunk:
    """Reasoning the model shows while it thinks; not part of the answer."""

    text: str


@dataclass(frozen=True)
class UsageChunk:
    tokens_in: int
    tokens_out: int


Chunk = TextChunk | ReasoningChunk | ToolCallChunk | UsageChunk


@dataclass(frozen=True)
class ToolSpec:
    """A tool offered to the model: its name, what it does, and the JSON
    Schema of its arguments."""

    name: str
    description: str
    parameters: Mapping[str, object]


class ProviderError(DependencyUnavailable):
    """The provider failed. ``retryable``: a rate limit, an overload, a 5xx, a
    broken connection — another attempt may succeed; not for a refused
    request (bad key, unknown model, invalid arguments)."""

    def __init__(self, provider: str, message: str, *, retryable: bool) -> None:
        super().__init__(f"{provider}: {message}", provider=provider)
        self.retryable = retryable


class LLMProvider(Protocol):
    name: str
    # "offline", "openai", "anthropic" or "cli": how its tokens are counted.
    kind: str
    # The longest answer it is asked for: reserved in the context window.
    max_output_tokens: int

    def stream(
        self,
        model: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        *,
        session_key: str = "",
        context_strategy: str = "",
    ) -> AsyncIterator[Chunk]:
        """``session_key`` names the conversation whose native session a
        provider with sessions of its own (the CLI provider) resumes — the
        agent thread; stateless providers ignore it. ``context_strategy``
        (an agent's own) replaces a CLI provider's way of handing it the
        context; API providers always get it as the system message."""
        ...


# The registry


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

    # CLI (kind "cli"): the argv template; see services/engine/cli_provider.py.
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
        from services.engine.cli_provider import check_cli_config

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
    from services.engine.cli_provider import CliProvider, InMemorySessionStore
    from services.engine.offline_provider import OfflineProvider

    built: dict[str, LLMProvider] = {"offline": OfflineProvider(offline_token_delay)}
    store = sessions if sessions is not None else InMemorySessionStore()
    for config in configs:
        key = environment.get(config.api_key_env, "") if config.api_key_env else ""
        if config.kind == "openai":
            from services.engine.openai_provider import OpenAIProvider

            built[config.name] = OpenAIProvider(config, key)
        elif config.kind == "cli":
            built[config.name] = CliProvider(config, environment, store)
        else:
            from services.engine.anthropic_provider import AnthropicProvider

            built[config.name] = AnthropicProvider(config, key)
    return built


def tool_arguments(call: ToolCallChunk) -> dict[str, object]:
    """A tool call's arguments as an object; a model that wrote broken JSON
    gets an empty object (the tool then reports what is missing)."""
    try:
        value = json.loads(call.arguments or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def count_tokens(text: str) -> int:
    """The offline model's tokenizer, and the engine's estimate for budgets:
    whitespace-separated words."""
    return len(text.split())
