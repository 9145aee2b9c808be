"""LLM providers behind one streaming interface (``base``), built from the
settings by ``registry``. Each kind has its own module: ``offline`` (the
deterministic model of tests, demos and benchmarks), ``openai``
(OpenAI-compatible chat completions), ``anthropic`` (the Messages API) and
``cli`` (headless agent CLIs). Importing this package imports no SDK: each is
loaded when a provider of its kind is built."""

from services.engine.providers.base import (
    ChatMessage,
    Chunk,
    LLMProvider,
    ProviderError,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    ToolSpec,
    UsageChunk,
    count_tokens,
    tool_arguments,
)
from services.engine.providers.config import CliEvents, ProviderConfig, parse_provider_configs
from services.engine.providers.registry import build_providers

__all__ = [
    "ChatMessage",
    "Chunk",
    "CliEvents",
    "LLMProvider",
    "ProviderConfig",
    "ProviderError",
    "ReasoningChunk",
    "TextChunk",
    "ToolCallChunk",
    "ToolSpec",
    "UsageChunk",
    "build_providers",
    "count_tokens",
    "parse_provider_configs",
    "tool_arguments",
]
