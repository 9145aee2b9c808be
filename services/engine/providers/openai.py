"""OpenAI-compatible chat completions (OpenAI, Ollama, vLLM, llama.cpp
server, LiteLLM...) through the official SDK: streamed text, tool calls
reassembled from their deltas, and usage (``stream_options.include_usage``).

The SDK's own retries are off (``max_retries=0``): the run retries, and only
while no text has reached the client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import openai

from services.engine.providers.base import (
    ChatMessage,
    Chunk,
    ProviderError,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    ToolSpec,
    UsageChunk,
)
from services.engine.providers.config import ProviderConfig, sdk_client_options


def _error(name: str, exc: openai.OpenAIError) -> ProviderError:
    if isinstance(exc, openai.APIStatusError):
        # 408 timeout, 409 lock, 429 rate limit, 5xx: worth another try.
        retryable = exc.status_code in (408, 409, 429) or exc.status_code >= 500
        return ProviderError(name, f"HTTP {exc.status_code}: {exc.message}", retryable=retryable)
    if isinstance(exc, openai.APIConnectionError):  # includes timeouts
        return ProviderError(name, f"connection failed: {exc}", retryable=True)
    return ProviderError(name, str(exc), retryable=False)


def _message(message: ChatMessage) -> dict[str, Any]:
    """A message in the chat completions format, tool calls and results included."""
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    data: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        data["content"] = message.content or None
        data["tool_calls"] = [
            {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    return data


class OpenAIProvider:
    def __init__(self, config: ProviderConfig, api_key: str) -> None:
        self.name = config.name
        self.kind = "openai"
        self.max_output_tokens = config.max_output_tokens
        self._config = config
        self._client = openai.AsyncOpenAI(
            **sdk_client_options(config, api_key, openai.DefaultAsyncHttpxClient)
        )

    async def close(self) -> None:
        await self._client.close()

    async def stream(
        self,
        model: str,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] = (),
        *,
        session_key: str = "",
        context_strategy: str = "",
    ) -> AsyncIterator[Chunk]:
        request: dict[str, Any] = {
            "model": model,
            "messages": [_message(m) for m in messages],
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": self._config.max_output_tokens,
        }
        if tools:
            request["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": dict(t.parameters),
                    },
                }
                for t in tools
            ]
        # Tool calls arrive in pieces keyed by index: id and name first, then
        # the arguments' JSON text in fragments.
        calls: dict[int, dict[str, str]] = {}
        usage: UsageChunk | None = None
        try:
            stream = await self._client.chat.completions.create(**request)
            async for chunk in stream:
                if chunk.usage is not None:
                    usage = UsageChunk(chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
                for choice in chunk.choices:
                    delta = choice.delta
                    # Reasoning models behind OpenAI-compatible servers (vLLM,
                    # DeepSeek...) stream their thinking in a field of their own.
                    reasoning = getattr(delta, "reasoning_content", None)
                    if reasoning:
                        yield ReasoningChunk(str(reasoning))
                    if delta.content:
                        yield TextChunk(delta.content)
                    for call in delta.tool_calls or []:
                        slot = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                        slot["id"] = call.id or slot["id"]
                        if call.function is not None:
                            slot["name"] = call.function.name or slot["name"]
                            slot["arguments"] += call.function.arguments or ""
        except openai.OpenAIError as exc:
            raise _error(self.name, exc) from exc
        for _, call in sorted(calls.items()):
            yield ToolCallChunk(call["id"], call["name"], call["arguments"])
        yield usage or UsageChunk(0, 0)
