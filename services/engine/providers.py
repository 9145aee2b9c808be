"""LLM providers behind one streaming interface: the offline deterministic
provider (tests, demos, benchmarks) here, the OpenAI-compatible and Anthropic
ones in their own modules, and the registry that builds them from settings.

A provider yields text chunks as they arrive, tool calls once complete, and
the usage last. It raises :class:`ProviderError` for anything that went
wrong on the provider's side, saying whether trying again may help; the run
decides whether it still may (only before any text reached the client)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from services.shared.errors import DependencyUnavailable


@dataclass(frozen=True)
class ChatMessage:
    role: str  # "system" | "user" | "assistant"
    content: str


@dataclass(frozen=True)
class TextChunk:
    text: str


@dataclass(frozen=True)
class ToolCallChunk:
    """A complete tool call: ``arguments`` is the JSON text the model wrote."""

    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class UsageChunk:
    tokens_in: int
    tokens_out: int


Chunk = TextChunk | ToolCallChunk | UsageChunk


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

    def stream(
        self, model: str, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()
    ) -> AsyncIterator[Chunk]: ...


def count_tokens(text: str) -> int:
    """The offline model's tokenizer: whitespace-separated words."""
    return len(text.split())


# A directive the offline model follows wherever it appears in the system
# layers (an instruction page, typically): "Signature: Your QA bot" ends every
# answer with "— Your QA bot". French too ("Signature :", "Signe : ...").
_SIGNATURE = re.compile(r"^\s*[-*]?\s*(?:signature|sign as|signe)\s*:\s*(\S.*?)\s*$", re.I | re.M)


class OfflineProvider:
    """Deterministic: the same messages give the same answer, token by token.
    It answers from what its context holds (the request, recalled memory,
    applied skills) and follows the signature directive of its instructions,
    so tests can observe that context reached the model and that changing
    the instruction page changes the next answer (seed 002 T-04)."""

    name = "offline"

    def __init__(self, token_delay: float = 0.0) -> None:
        self._token_delay = token_delay

    def answer(self, model: str, messages: Sequence[ChatMessage]) -> str:
        system = "\n".join(m.content for m in messages if m.role == "system")
        request = next((m.content for m in reversed(messages) if m.role == "user"), "")
        words = request.split()
        echo = " ".join(words[:12]) + (" …" if len(words) > 12 else "")
        parts = [f"You asked: {echo}."] if echo else ["You sent an empty message."]
        skills = [line[len("## Skill: ") :] for line in system.splitlines() if line.startswith("## Skill: ")]
        if skills:
            parts.append(f"Applying the skill {', '.join(skills)}.")
        memory = [line[2:] for line in system.splitlines() if line.startswith("- [memory] ")]
        if memory:
            parts.append(f"From memory: {memory[0][len('[memory] ') :]}.")
        parts.append(f"This answer comes from {model}.")
        signature = _SIGNATURE.findall(system)
        if signature:
            parts.append(f"— {signature[-1]}")
        return " ".join(parts)

    async def stream(
        self, model: str, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()
    ) -> AsyncIterator[Chunk]:
        text = self.answer(model, messages)
        tokens = text.split(" ")
        for index, token in enumerate(tokens):
            if self._token_delay:
                await asyncio.sleep(self._token_delay)
            yield TextChunk(token if index == 0 else " " + token)
        yield UsageChunk(tokens_in=sum(count_tokens(m.content) for m in messages), tokens_out=len(tokens))


# The registry


class ProviderConfig(BaseModel):
    """One configured provider endpoint (``SWITCHBOARD_ENGINE_PROVIDERS_JSON``).
    A model of the router's catalog names its provider by ``name``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=64)
    kind: Literal["openai", "anthropic"]
    # OpenAI-compatible: ".../v1" (OpenAI, Ollama, vLLM, llama.cpp server...).
    base_url: str = Field(min_length=1)
    # The environment variable holding the key: keys never sit in config files.
    api_key_env: str = ""
    # Seconds without a byte from the provider before the attempt fails.
    timeout: float = Field(default=60.0, gt=0)
    max_output_tokens: int = Field(default=4096, gt=0)


_CONFIGS = TypeAdapter(list[ProviderConfig])


def parse_provider_configs(text: str) -> list[ProviderConfig]:
    """Parses and checks the configured providers; ValueError when they cannot work."""
    configs = _CONFIGS.validate_json(text or "[]")
    names = [config.name for config in configs]
    if "offline" in names or len(set(names)) != len(names):
        raise ValueError(f"provider names must be unique and not 'offline': {names}")
    return configs


def build_providers(
    configs: Sequence[ProviderConfig], environment: Mapping[str, str], offline_token_delay: float = 0.0
) -> dict[str, LLMProvider]:
    """The offline provider plus one client per configured endpoint."""
    from services.engine.anthropic_provider import AnthropicProvider
    from services.engine.openai_provider import OpenAIProvider

    built: dict[str, LLMProvider] = {"offline": OfflineProvider(offline_token_delay)}
    for config in configs:
        key = environment.get(config.api_key_env, "") if config.api_key_env else ""
        if config.kind == "openai":
            built[config.name] = OpenAIProvider(config, key)
        else:
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
