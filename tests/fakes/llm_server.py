"""A local HTTP server that speaks the real wire formats of the OpenAI chat
completions API and the Anthropic Messages API (streamed Server-Sent Events),
with scripted faults, so the engine's providers are tested through the
official SDKs and a real socket, not by mocking a client object.

Each request takes the next step of the script (then "ok" once it is empty):

* ``"ok"``: the answer ``ANSWER``, one word per chunk, then usage;
* ``"say:TEXT"``: the answer TEXT instead (a conversation whose turns differ);
* ``"status:429"`` / ``"status:500"`` / ``"status:400"``: that HTTP error, with
  the API's own error body;
* ``"cut:N"``: N words, then the connection drops mid-stream;
* ``"slow:SECONDS"`` (OpenAI): the answer with SECONDS between two words, a
  slow model to act on mid-stream (``"slow:SECONDS:TEXT"``: TEXT, so);
* ``"overloaded"`` / ``"overloaded:N"`` (Anthropic): a 200 stream whose
  ``error`` event (``overloaded_error``) comes after N words (default 0);
* ``"tool:NAME:{json}"``: a tool call of NAME with those arguments, streamed
  in fragments, instead of text;
* ``"tools:[{"name": NAME, "arguments": {...}}, ...]"``: several tool calls
  in one answer (arguments an object or a JSON string);
* ``"think"``: the model's reasoning (``THOUGHT``) streamed first, then the answer.

A request that does not ask to stream (a one-shot completion: summaries,
arbitration) gets the whole answer as one JSON body; ``"slow:SECONDS"``
then delays it.

A step may also be a function of the request's JSON body returning one of
the above: a scripted model that reacts to what it was sent (the prompt
injection tests' "compromised" model obeys what it read).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from services.launcher import free_ports

ANSWER = "The deploy window is Tuesday at noon."
THOUGHT = "The calendar says Tuesday."
INPUT_TOKENS = 42


class CutConnection(Exception):
    """Raised inside a streaming body: uvicorn drops the connection."""


Step = str | Callable[[dict[str, Any]], str]


@dataclass
class Script:
    steps: list[Step] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    # The Authorization (OpenAI) or x-api-key (Anthropic) header of each request.
    keys: list[str] = field(default_factory=list)

    def reset(self) -> None:
        """Nothing scripted or recorded: a server shared by tests starts each one so."""
        self.steps.clear()
        self.requests.clear()
        self.keys.clear()

    def next(self, body: dict[str, Any]) -> str:
        self.requests.append(body)
        step = self.steps.pop(0) if self.steps else "ok"
        return step(body) if callable(step) else step


def _tool_calls(step: str) -> list[tuple[str, str]]:
    """The (name, arguments JSON) of a "tool:" or "tools:" step."""
    if step.startswith("tools:"):
        calls = json.loads(step[len("tools:") :])
        return [
            (c["name"], c["arguments"] if isinstance(c["arguments"], str) else json.dumps(c["arguments"]))
            for c in calls
        ]
    _, name, arguments = step.split(":", 2)
    return [(name, arguments)]


def _sse(data: dict[str, Any], event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def _words(count: int | None = None, answer: str = ANSWER) -> list[str]:
    words = answer.split(" ")
    words = words if count is None else words[:count]
    return [word if i == 0 else " " + word for i, word in enumerate(words)]


def _answer(step: str) -> str:
    """The text of a "say:<text>" step, or of a "slow:<pause>:<text>" one; ANSWER otherwise."""
    if step.startswith("say:"):
        return step[len("say:") :]
    if step.startswith("slow:") and step.count(":") >= 2:
        return step.split(":", 2)[2]
    return ANSWER


def _status(step: str) -> int | None:
    return int(step.split(":")[1]) if step.startswith("status:") else None


# OpenAI chat completions


async def _openai_body(step: str, model: str) -> AsyncIterator[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None, usage: Any = None) -> bytes:
        choices = [{"index": 0, "delta": delta, "finish_reason": finish}] if delta or finish else []
        data = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": model}
        return _sse({**data, "choices": choices, "usage": usage})

    yield chunk({"role": "assistant", "content": ""})
    if step == "think":  # vLLM / DeepSeek style
        yield chunk({"reasoning_content": THOUGHT})
    if step.startswith(("tool:", "tools:")):
        for n, (name, arguments) in enumerate(_tool_calls(step)):
            yield chunk({"tool_calls": [{"index": n, "id": f"call_{n + 1}", "type": "function",
                                         "function": {"name": name, "arguments": ""}}]})  # fmt: skip
            for i in range(0, len(arguments), 5):
                yield chunk({"tool_calls": [{"index": n, "function": {"arguments": arguments[i : i + 5]}}]})
        yield chunk({}, finish="tool_calls")
    else:
        cut = int(step.split(":")[1]) if step.startswith("cut:") else None
        pause = float(step.split(":")[1]) if step.startswith("slow:") else 0.0
        for word in _words(cut, _answer(step)):
            yield chunk({"content": word})
            await asyncio.sleep(pause)
        if cut is not None:
            raise CutConnection
        yield chunk({}, finish="stop")
    usage = {"prompt_tokens": INPUT_TOKENS, "completion_tokens": len(_words()), "total_tokens": 0}
    yield chunk({}, usage=usage)
    yield b"data: [DONE]\n\n"


def openai_app(script: Script) -> Starlette:
    async def completions(request: Request) -> Response:
        body = await request.json()
        script.keys.append(request.headers.get("authorization", ""))
        step = script.next(body)
        if (status := _status(step)) is not None:
            error = {"message": f"scripted {status}", "type": "server_error", "code": None}
            return JSONResponse({"error": error}, status_code=status)
        if not body.get("stream"):
            text = await _whole_answer(step)
            usage = {"prompt_tokens": INPUT_TOKENS, "completion_tokens": len(text.split()), "total_tokens": 0}
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            return JSONResponse(
                {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body["model"],
                 "choices": [choice], "usage": usage}
            )  # fmt: skip
        return StreamingResponse(_openai_body(step, body["model"]), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


async def _whole_answer(step: str) -> str:
    if step.startswith("slow:"):
        await asyncio.sleep(float(step.split(":")[1]))
    return _answer(step)


# Anthropic messages


async def _anthropic_body(step: str, model: str) -> AsyncIterator[bytes]:
    message = {
        "id": "msg_1", "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": 1},
    }  # fmt: skip
    yield _sse({"type": "message_start", "message": message}, "message_start")
    yield _sse({"type": "ping"}, "ping")
    index = 0
    if step == "think":  # extended thinking: a thinking block before the text
        block = {"type": "thinking", "thinking": "", "signature": ""}
        yield _sse({"type": "content_block_start", "index": 0, "content_block": block}, "content_block_start")
        delta = {"type": "thinking_delta", "thinking": THOUGHT}
        yield _sse({"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta")
        yield _sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
        index = 1
    if step.startswith(("tool:", "tools:")):
        for n, (name, arguments) in enumerate(_tool_calls(step)):
            if n:  # each call is a block of its own
                yield _sse({"type": "content_block_stop", "index": index}, "content_block_stop")
                index += 1
            block = {"type": "tool_use", "id": f"toolu_{n + 1}", "name": name, "input": {}}
            yield _sse(
                {"type": "content_block_start", "index": index, "content_block": block}, "content_block_start"
            )
            for i in range(0, len(arguments), 5):
                delta = {"type": "input_json_delta", "partial_json": arguments[i : i + 5]}
                yield _sse(
                    {"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta"
                )
        stop_reason = "tool_use"
    else:
        overloaded = step.startswith("overloaded")
        limit = int(step.split(":")[1]) if ":" in step and not step.startswith("say:") else None
        limit = 0 if overloaded and limit is None else limit
        block = {"type": "text", "text": ""}
        yield _sse(
            {"type": "content_block_start", "index": index, "content_block": block}, "content_block_start"
        )
        for word in _words(limit, _answer(step)):
            delta = {"type": "text_delta", "text": word}
            yield _sse({"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta")
            await asyncio.sleep(0)
        if overloaded:
            error = {"type": "overloaded_error", "message": "Overloaded"}
            yield _sse({"type": "error", "error": error}, "error")
            return
        if step.startswith("cut:"):
            raise CutConnection
        stop_reason = "end_turn"
    yield _sse({"type": "content_block_stop", "index": index}, "content_block_stop")
    delta = {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
             "usage": {"output_tokens": len(_words())}}  # fmt: skip
    yield _sse(delta, "message_delta")
    yield _sse({"type": "message_stop"}, "message_stop")


def anthropic_app(script: Script) -> Starlette:
    async def messages(request: Request) -> Response:
        body = await request.json()
        script.keys.append(request.headers.get("x-api-key", ""))
        step = script.next(body)
        if (status := _status(step)) is not None:
            kind = {429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
            if status == 400:
                kind = "invalid_request_error"
            return JSONResponse({"type": "error", "error": {"type": kind, "message": "scripted"}}, status)
        if not body.get("stream"):
            text = await _whole_answer(step)
            return JSONResponse(
                {"id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
                 "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                 "stop_sequence": None,
                 "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": len(text.split())}}
            )  # fmt: skip
        return StreamingResponse(_anthropic_body(step, body["model"]), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/messages", messages, methods=["POST"])])


@dataclass
class FakeServer:
    url: str
    script: Script


@contextmanager
def serve(app_factory: Any) -> Iterator[FakeServer]:
    """Runs the app under uvicorn on a free port, in a thread, for the block."""
    script = Script()
    port = free_ports(1)[0]
    with serve_app(app_factory(script), port):
        yield FakeServer(f"http://127.0.0.1:{port}", script)


@contextmanager
def serve_app(app: Any, port: int) -> Iterator[None]:
    """Runs an ASGI app under uvicorn on ``port`` of 127.0.0.1, in a thread, for the block."""
    # asyncio's loop, not uvloop: a uvloop object left in a reference cycle
    # may be freed by the garbage collector of another thread (the test's),
    # which touches libuv from the wrong thread; a pytest worker once died
    # of a segfault while collecting garbage beside these servers.
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", lifespan="off", loop="asyncio"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the fake server did not start")
        threading.Event().wait(0.01)
    try:
        yield
    finally:
        # Without waiting out a request still in flight (a "slow:" answer its
        # client gave up on): nobody is left to read it.
        server.should_exit = server.force_exit = True
        thread.join(10)
