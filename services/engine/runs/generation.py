"""The model call, which chat and ask work both make: the engine's providers,
one streamed generation with its retries before the first token, its token
budget and its GenAI span."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

from opentelemetry import trace
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from services.engine.budget import BudgetExceeded
from services.engine.providers.base import (
    ChatMessage,
    LLMProvider,
    ProviderError,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
    ToolSpec,
    UsageChunk,
    count_tokens,
)
from services.engine.runs.recorder import Recorder
from services.engine.runs.requests import RunLimits
from services.engine.runs.scope import RunScope
from services.engine.tokens import Counter, TokenCounters, prompt_tokens
from services.shared.errors import FailedPrecondition
from services.shared.metrics import LLM_TOKENS
from switchboard.engine.v1 import engine_pb2
from switchboard.router.v1 import router_pb2

tracer = trace.get_tracer("switchboard.engine")


@dataclass(frozen=True)
class Generation:
    """What one model call produced."""

    text: str
    tokens_in: int
    tokens_out: int
    tool_calls: tuple[ToolCallChunk, ...] = ()


@dataclass(frozen=True, slots=True)
class ModelCall:
    """The model a run calls and how: on which provider, counting its
    tokens with which counter, with which tools, under which session key
    ("": none) and way of giving a CLI its context."""

    provider: LLMProvider
    model: router_pb2.ModelOption
    counter: Counter
    tools: Sequence[ToolSpec] = ()
    session_key: str = ""
    context_strategy: str = ""


class DeltaStream:
    """Coalesces a model's text into delta events: the first piece at once,
    then at most one event per flush interval or size."""

    def __init__(self, rec: Recorder, limits: RunLimits) -> None:
        self._rec, self._limits = rec, limits
        self._parts: list[str] = []
        self._buffer: list[str] = []
        self._buffered = 0
        self._last_flush = 0.0
        self.sent_any = False
        self.tokens = 0  # estimated (count_tokens), for the token budget

    @property
    def text(self) -> str:
        return "".join(self._parts)

    def add(self, text: str) -> None:
        self.tokens += count_tokens(text)
        self._parts.append(text)
        self._buffer.append(text)
        self._buffered += len(text)
        now = time.monotonic()
        if (
            not self.sent_any
            or now - self._last_flush >= self._limits.delta_flush_seconds
            or self._buffered >= self._limits.delta_flush_chars
        ):
            self.flush()
            self._last_flush = now

    def flush(self) -> None:
        if self._buffer:
            self._rec.emit(delta=engine_pb2.Delta(text="".join(self._buffer)))
            self._buffer, self._buffered, self.sent_any = [], 0, True


def messages_json(messages: Sequence[ChatMessage]) -> str:
    """Messages in the GenAI semantic conventions' JSON shape (role + parts)."""
    return json.dumps(
        [{"role": m.role, "parts": [{"type": "text", "content": m.content}]} for m in messages],
        ensure_ascii=False,
    )


class Models:
    """The providers this engine has, and one model call on any of them."""

    def __init__(self, providers: dict[str, LLMProvider], limits: RunLimits) -> None:
        self.providers = providers
        self._limits = limits
        self.counters = TokenCounters()

    @property
    def limits(self) -> RunLimits:
        return self._limits

    @property
    def offline(self) -> bool:
        """No real provider configured: Auto picks the deterministic test
        models and the Skill Router never asks an LLM to arbitrate."""
        return set(self.providers) == {"offline"}

    @property
    def fallback_model(self) -> router_pb2.ModelOption:
        """The model that answers when the router cannot be reached."""
        provider, _, model = self._limits.fallback_model.partition("/")
        return router_pb2.ModelOption(id=f"fallback-{model}", provider=provider, model=model)

    def provider(self, name: str) -> LLMProvider:
        provider = self.providers.get(name)
        if provider is None:
            raise FailedPrecondition(f"model provider {name!r} is not available in this engine")
        return provider

    async def generate(
        self, scope: RunScope, call: ModelCall, messages: list[ChatMessage], corrects_count: bool = False
    ) -> Generation:
        """One model call: streams its text as coalesced deltas (the first
        piece at once, then at most one event per flush interval or size) and
        collects the tool calls it makes. With ``corrects_count``, the
        provider's count of the prompt corrects the call's counter's estimate."""
        rec, budget, model, tools, counter = scope.rec, scope.budget, call.model, call.tools, call.counter
        with tracer.start_as_current_span(f"chat {model.model}") as span:
            span.set_attribute("gen_ai.operation.name", "chat")
            span.set_attribute("gen_ai.provider.name", model.provider)
            span.set_attribute("gen_ai.request.model", model.model)
            span.set_attribute("gen_ai.conversation.id", scope.thread)
            if self._limits.capture_message_content:
                span.set_attribute("gen_ai.input.messages", messages_json(messages))
            stream = DeltaStream(rec, self._limits)
            tokens_in = tokens_out = 0
            calls: list[ToolCallChunk] = []
            # The token budget is checked on an estimate while streaming (the
            # provider's own count arrives last) and stops the answer there.
            estimate_in = sum(count_tokens(m.content) for m in messages)
            if budget.max_tokens and estimate_in > budget.max_tokens:
                raise BudgetExceeded("tokens_prompt", budget.max_tokens)
            # A provider failure is retried only while no text has reached the
            # client: after that a retry would show the answer twice.
            attempts = AsyncRetrying(
                stop=stop_after_attempt(self._limits.provider_attempts),
                wait=wait_exponential_jitter(multiplier=0.2, max=4.0),
                retry=retry_if_exception(
                    lambda exc: isinstance(exc, ProviderError) and exc.retryable and not stream.sent_any
                ),
                reraise=True,
            )
            async for attempt in attempts:
                with attempt:
                    calls = []  # a retried attempt starts over (no text was shown)
                    try:
                        chunks = call.provider.stream(
                            model.model,
                            messages,
                            tools,
                            session_key=call.session_key,
                            context_strategy=call.context_strategy,
                        )
                        async for chunk in chunks:
                            if isinstance(chunk, UsageChunk):
                                tokens_in, tokens_out = chunk.tokens_in, chunk.tokens_out
                            elif isinstance(chunk, ToolCallChunk):
                                calls.append(chunk)
                            elif isinstance(chunk, ReasoningChunk):
                                stream.flush()  # keep the order the model produced
                                rec.emit(reasoning=engine_pb2.Reasoning(text=chunk.text))
                                stream.sent_any = True  # shown: a retry would repeat it
                            elif isinstance(chunk, TextChunk):
                                stream.add(chunk.text)
                                if budget.max_tokens and estimate_in + stream.tokens > budget.max_tokens:
                                    raise BudgetExceeded("tokens", budget.max_tokens)
                    finally:
                        stream.flush()  # what did arrive is shown, even before a failure
            if corrects_count and self.counters.corrects(counter):
                estimated = prompt_tokens(counter, messages, tools)
                self.counters.observe(counter, model.model, estimated, tokens_in)
            span.set_attribute("gen_ai.response.model", model.model)
            span.set_attribute("gen_ai.usage.input_tokens", tokens_in)
            span.set_attribute("gen_ai.usage.output_tokens", tokens_out)
            LLM_TOKENS.labels(model.provider, model.model, "input").inc(tokens_in)
            LLM_TOKENS.labels(model.provider, model.model, "output").inc(tokens_out)
            answer = stream.text
            if self._limits.capture_message_content:
                output = messages_json([ChatMessage("assistant", answer, tool_calls=tuple(calls))])
                span.set_attribute("gen_ai.output.messages", output)
            return Generation(answer, tokens_in, tokens_out, tuple(calls))
