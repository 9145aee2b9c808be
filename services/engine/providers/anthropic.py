"""The Anthropic Messages API through the official SDK: streamed text, tool
use (input JSON reassembled from its deltas), usage from ``message_start``
and ``message_delta``, and ``error`` events inside a 200 stream (an
``overloaded_error`` mid-answer is a retryable failure, not a crash).

System messages go to the ``system`` parameter, as the API wants. The SDK's
own retries are off: the run retries, and only before the first token."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import anthropic
import httpx2  # the SDK's HTTP client

from services.engine.providers.base import (
    ChatMessage,
    Chunk,
    ProviderError,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    ToolSpec,
    UsageChunk,
    tool_arguments,
)
from services.engine.providers.config import ProviderConfig, sdk_client_options

# Error types of the API's error objects that another attempt may get past.
_RETRYABLE_TYPES = ("overloaded_error", "rate_limit_error", "api_error", "timeout_error")


def _error_type(body: object) -> str:
    """The ``type`` of an API error object: {"type": "error", "error": {"type": ...}}."""
    if not isinstance(body, dict):
        return ""
    error = body.get("error", body)
    return str(error.get("type", "")) if isinstance(error, dict) else ""


def _error(name: str, exc: anthropic.AnthropicError) -> ProviderError:
    if isinstance(exc, anthropic.APIStatusError):
        kind = _error_type(exc.body)
        status = exc.status_code
        retryable = status in (408, 409, 429) or status >= 500 or kind in _RETRYABLE_TYPES
        return ProviderError(name, f"HTTP {status} {kind}: {exc.message}", retryable=retryable)
    if isinstance(exc, anthropic.APIConnectionError):
        return ProviderError(name, f"connection failed: {exc}", retryable=True)
    if isinstance(exc, anthropic.APIError):
        # An `error` event inside a 200 stream (overloaded_error...) surfaces here.
        kind = _error_type(exc.body)
        message = f"{kind or 'stream error'}: {exc.message}"
        return ProviderError(name, message, retryable=kind in _RETRYABLE_TYPES)
    return ProviderError(name, str(exc), retryable=False)


def _messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    """The non-system messages in the Messages API format: tool calls become
    tool_use blocks of the assistant turn, and tool results tool_result
    blocks of one user turn (consecutive results share it)."""
    converted: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "tool":
            block = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}
            previous = converted[-1] if converted else None
            if previous and previous["role"] == "user" and isinstance(previous["content"], list):
                previous["content"].append(block)
            else:
                converted.append({"role": "user", "content": [block]})
        elif m.tool_calls:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
            blocks += [
                {"type": "tool_use", "id": c.call_id, "name": c.name, "input": tool_arguments(c)}
                for c in m.tool_calls
            ]
            converted.append({"role": m.role, "content": blocks})
        else:
            converted.append({"role": m.role, "content": m.content})
    return converted


class AnthropicProvider:
    def __init__(self, config: ProviderConfig, api_key: str) -> None:
        self.name = config.name
        self.kind = "anthropic"
        self.max_output_tokens = config.max_output_tokens
        self._config = config
        self._client = anthropic.AsyncAnthropic(
            **sdk_client_options(config, api_key, anthropic.DefaultAsyncHttpxClient)
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
            "max_tokens": self._config.max_output_tokens,
            "messages": _messages(messages),
            "stream": True,
        }
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        if system:
            request["system"] = system
        if tools:
            request["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
                for t in tools
            ]
        tokens_in = tokens_out = 0
        # Content blocks by index: a tool_use block's input arrives as JSON fragments.
        tool_blocks: dict[int, dict[str, str]] = {}
        try:
            stream = await self._client.messages.create(**request)
            async for event in stream:
                if event.type == "message_start":
                    tokens_in = event.message.usage.input_tokens
                    tokens_out = event.message.usage.output_tokens
                elif event.type == "content_block_start" and event.content_block.type == "tool_use":
                    block = event.content_block
                    tool_blocks[event.index] = {"id": block.id, "name": block.name, "input": ""}
                elif event.type == "content_block_delta":
                    if event.delta.type == "text_delta":
                        yield TextChunk(event.delta.text)
                    elif event.delta.type == "thinking_delta":
                        yield ReasoningChunk(event.delta.thinking)
                    elif event.delta.type == "input_json_delta" and event.index in tool_blocks:
                        tool_blocks[event.index]["input"] += event.delta.partial_json
                elif event.type == "content_block_stop" and event.index in tool_blocks:
                    block = tool_blocks.pop(event.index)
                    yield ToolCallChunk(block["id"], block["name"], block["input"] or "{}")
                elif event.type == "message_delta":
                    tokens_out = event.usage.output_tokens
        except anthropic.AnthropicError as exc:
            raise _error(self.name, exc) from exc
        except httpx2.TransportError as exc:
            # The SDK does not wrap a connection lost mid-stream.
            raise ProviderError(self.name, f"connection lost mid-stream: {exc}", retryable=True) from exc
        yield UsageChunk(tokens_in, tokens_out)
