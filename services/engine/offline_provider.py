"""The offline model: deterministic, no network. Tests, demos and the
benchmarks run on it."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Sequence

from services.engine.providers import ChatMessage, Chunk, TextChunk, ToolSpec, UsageChunk, count_tokens

# A directive the offline model follows wherever it appears in the system
# layers (an instruction page, typically): "Signature: Your QA bot" ends every
# answer with "— Your QA bot". French too ("Signature :", "Signe : ...").
_SIGNATURE = re.compile(r"^\s*[-*]?\s*(?:signature|sign as|signe)\s*:\s*(\S.*?)\s*$", re.I | re.M)


def _thread_fact(system: str, request: str) -> str:
    """The most recent line of the agent's thread (the "- [thread] " lines the
    engine puts in an ask's context) that shares a word of four letters or
    more with the request: how the offline model "answers from facts in its
    context" in the inter-agent tests (seed 000, test 6)."""
    wanted = {w.strip("?.!,:;").lower() for w in request.split() if len(w.strip("?.!,:;")) >= 4}
    lines = [line[len("- [thread] ") :] for line in system.splitlines() if line.startswith("- [thread] ")]
    for line in reversed(lines):
        if wanted & {w.strip("?.!,:;").lower() for w in line.split()}:
            return line
    return ""


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
        thread_fact = _thread_fact(system, request)
        if thread_fact:
            parts.append(f"From the thread: {thread_fact}")
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
