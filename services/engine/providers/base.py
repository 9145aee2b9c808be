"""The streaming interface every LLM provider implements, and the messages,
chunks and errors that cross it. A leaf: it imports no other engine module,
so the run, the tools, the token counters and each provider build on it.

A provider yields text chunks as they arrive, tool calls once complete, and
the usage last. It raises :class:`ProviderError` for anything that went
wrong on the provider's side, saying whether trying again may help; the run
decides whether it still may (only before any text reached the client)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from services.shared.errors import DependencyUnavailable


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

    async def close(self) -> None:
        """Releases what it holds between calls (an SDK's pooled
        connections); at engine shutdown."""
        ...


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
