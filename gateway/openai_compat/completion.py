"""A run's events, as the HTTP API's SSE clients get them, turned into
OpenAI's answer: ``chat.completion.chunk`` events for a stream, or one
``chat.completion``. A run that fails after it started ends the stream with
an error in OpenAI's shape, or is the non-streamed request's error."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
from fastapi.responses import JSONResponse

from gateway.errors import HTTP_STATUS
from gateway.openai_compat.errors import OpenAIError, openai_error
from gateway.streams import Relay

# A run that fails after it started: its error event's code -> HTTP status.
RUN_ERROR_STATUS = {"BUDGET_EXCEEDED": 429, "CANCELLED": 499, "INTERRUPTED": 503}


class Completion:
    """The shapes of one run's answer: its chunks, or its one completion."""

    def __init__(self, run_id: str, model: str) -> None:
        self.id = f"chatcmpl-{run_id}"
        self.model = model
        self.created = int(time.time())

    def _base(self, kind: str) -> dict[str, Any]:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}

    def chunk(self, delta: dict[str, str], finish: str | None = None) -> dict[str, str]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return {"data": json.dumps({**self._base("chat.completion.chunk"), "choices": [choice]})}

    def usage_chunk(self, usage: dict[str, int]) -> dict[str, str]:
        return {"data": json.dumps({**self._base("chat.completion.chunk"), "choices": [], "usage": usage})}

    def whole(self, text: str, usage: dict[str, int]) -> dict[str, Any]:
        message = {"role": "assistant", "content": text, "refusal": None}
        choice = {"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}
        return {**self._base("chat.completion"), "choices": [choice], "usage": usage}


def _usage(final: dict[str, Any]) -> dict[str, int]:
    tokens = final.get("usage") or {}
    prompt, completion = int(tokens.get("tokens_in", 0)), int(tokens.get("tokens_out", 0))
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def run_error(data: dict[str, Any]) -> OpenAIError:
    code = str(data.get("code", "")) or "INTERNAL"
    known = grpc.StatusCode.__members__.get(code)
    # A gRPC status keeps the HTTP API's mapping; anything else (a provider's
    # error) is the upstream model's failure.
    status = RUN_ERROR_STATUS.get(code) or (HTTP_STATUS.get(known, 500) if known is not None else 502)
    name = code.removeprefix("ERROR_REASON_").lower()
    return OpenAIError(status, name, str(data.get("message", "")) or "the run failed")


async def _events(relay: Relay) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    async for item in relay.events():
        yield item.get("event", ""), json.loads(item["data"])


async def stream_chunks(
    relay: Relay, completion: Completion, include_usage: bool
) -> AsyncIterator[dict[str, str]]:
    yield completion.chunk({"role": "assistant", "content": ""})
    streamed = False
    async for kind, data in _events(relay):
        if kind == "delta":
            streamed = True
            yield completion.chunk({"content": data.get("text", "")})
        elif kind == "reasoning":
            # DeepSeek's field for a model's visible reasoning, which several clients show.
            yield completion.chunk({"reasoning_content": data.get("text", "")})
        elif kind == "final":
            if data.get("text") and not streamed:
                yield completion.chunk({"content": data["text"]})
            yield completion.chunk({}, "stop")
            if include_usage:
                yield completion.usage_chunk(_usage(data))
        elif kind == "error":
            error = run_error(data)
            yield {"data": json.dumps(openai_error(error.status, error.message, error.code))}
    yield {"data": "[DONE]"}


async def whole_completion(relay: Relay, completion: Completion, headers: dict[str, str]) -> JSONResponse:
    parts: list[str] = []
    async for kind, data in _events(relay):
        if kind == "delta":
            parts.append(data.get("text", ""))
        elif kind == "final":
            text = "".join(parts) or str(data.get("text", ""))
            return JSONResponse(completion.whole(text, _usage(data)), headers=headers)
        elif kind == "error":
            error = run_error(data)
            error.headers = headers
            raise error
    raise OpenAIError(502, "stream_ended", "the run's stream ended without an outcome", headers=headers)
