"""LLM providers behind one streaming interface. This skeleton ships the
offline deterministic provider (tests, demos, benchmarks); real providers
plug in here."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ChatMessage:
    role: str  # "system" | "user" | "assistant"
    content: str


@dataclass(frozen=True)
class TextChunk:
    text: str


@dataclass(frozen=True)
class UsageChunk:
    tokens_in: int
    tokens_out: int


Chunk = TextChunk | UsageChunk


class LLMProvider(Protocol):
    name: str

    def stream(self, model: str, messages: Sequence[ChatMessage]) -> AsyncIterator[Chunk]: ...


def count_tokens(text: str) -> int:
    """The offline model's tokenizer: whitespace-separated words."""
    return len(text.split())


class OfflineProvider:
    """Deterministic: the same messages give the same answer, token by token.
    It answers from what its context holds (the request, recalled memory,
    applied skills), so tests can observe that context reached the model."""

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
        return " ".join(parts)

    async def stream(self, model: str, messages: Sequence[ChatMessage]) -> AsyncIterator[Chunk]:
        text = self.answer(model, messages)
        tokens = text.split(" ")
        for index, token in enumerate(tokens):
            if self._token_delay:
                await asyncio.sleep(self._token_delay)
            yield TextChunk(token if index == 0 else " " + token)
        yield UsageChunk(tokens_in=sum(count_tokens(m.content) for m in messages), tokens_out=len(tokens))
