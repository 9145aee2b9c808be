"""A run's persisted events as an Open Responses response: its streamed
events (`response.created` ... `response.completed`, each with its
`sequence_number`) and the response object they build.

The sequence numbers count the response's events from the start of the
run's log, so the same run read again numbers them the same way: a stream
resumed with `starting_after` reads the log from its start and sends only
the events after that number, with no gap and no duplicate.

- run_started: response.created, response.in_progress;
- delta: response.output_item.added and response.content_part.added (a new
  message), response.output_text.delta;
- action: the message's .done events, then a `function_call` item (added,
  arguments done, done) with the tool's call id, name and arguments;
- final: the message's .done events, response.completed (usage: the run's tokens);
- error: response.failed (the error's code and message).
"""

from __future__ import annotations

import time
from typing import Any

from switchboard.engine.v1 import engine_pb2

RESPONSE_PREFIX = "resp_"
# The run statuses as a response's.
STATUSES = {
    engine_pb2.RUN_STATUS_RUNNING: "in_progress",
    engine_pb2.RUN_STATUS_DONE: "completed",
    engine_pb2.RUN_STATUS_WAITING_APPROVAL: "completed",
    engine_pb2.RUN_STATUS_FAILED: "failed",
    engine_pb2.RUN_STATUS_CANCELLED: "cancelled",
}


def response_id(run_id: str) -> str:
    return RESPONSE_PREFIX + run_id


def run_id_of(response: str) -> str:
    return response.removeprefix(RESPONSE_PREFIX)


class ResponseLog:
    """The response one run's events build, and the events that tell it."""

    def __init__(
        self,
        model: str,
        *,
        previous_response_id: str | None = None,
        instructions: str | None = None,
        background: bool = False,
        starting_after: int = -1,
        conversation: str | None = None,
    ) -> None:
        self.id = ""
        self.model = model
        self.created_at = int(time.time())
        self.completed_at: int | None = None
        self.previous_response_id = previous_response_id
        self.instructions = instructions
        self.background = background
        self.conversation = conversation
        self.starting_after = starting_after
        self.status = "queued"
        self.output: list[dict[str, Any]] = []
        self.usage: dict[str, Any] | None = None
        self.error: dict[str, str] | None = None
        self.metadata: dict[str, str] = {}
        self._message: dict[str, Any] | None = None  # the message item being written
        self._number = -1  # the last event's sequence_number

    # The response object

    def response(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": self.status,
            "background": self.background,
            "model": self.model,
            "output": self.output,
            "output_text": "".join(
                part["text"]
                for item in self.output
                if item["type"] == "message"
                for part in item["content"]
                if part["type"] == "output_text"
            ),
            "previous_response_id": self.previous_response_id,
            "conversation": {"id": self.conversation} if self.conversation else None,
            "instructions": self.instructions,
            "usage": self.usage,
            "error": self.error,
            "incomplete_details": None,
            "metadata": self.metadata,
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": [],
            "text": {"format": {"type": "text"}},
            "completed_at": self.completed_at,
            # Sampling is the model's provider configuration: the API's defaults stand for it.
            "temperature": 1.0,
            "top_p": 1.0,
            "presence_penalty": 0.0,
            "frequency_penalty": 0.0,
            "top_logprobs": 0,
            # Older turns are folded into the conversation's summary to fit the context.
            "truncation": "auto",
            "reasoning": None,
            "max_output_tokens": None,
            "max_tool_calls": None,
            "store": True,
            "service_tier": "default",
            "safety_identifier": None,
            "prompt_cache_key": None,
        }

    # Events

    def encode(self, event: engine_pb2.RunEvent) -> list[dict[str, Any]]:
        """The response's events this run event gives, numbered; those at or
        before ``starting_after`` are not returned (the response still
        follows them)."""
        produced = []
        for item in self._events(event):
            self._number += 1
            item["sequence_number"] = self._number
            if self._number > self.starting_after:
                produced.append(item)
        return produced

    def _events(self, event: engine_pb2.RunEvent) -> list[dict[str, Any]]:
        kind = event.WhichOneof("kind")
        if kind == "run_started":
            self.id = response_id(event.run_id)
            if event.HasField("create_time"):  # the same on every read of the run
                self.created_at = event.create_time.seconds
            self.metadata = {
                "switchboard_run_id": event.run_id,
                "conversation_id": event.run_started.conversation_id,
            }
            self.status = "in_progress"
            return [self._about("response.created"), self._about("response.in_progress")]
        if kind == "delta" and event.delta.text:
            return [*self._open_message(), self._delta(event.delta.text)]
        if kind == "action":
            return [*self._close_message(), *self._function_call(event)]
        if kind == "final":
            final = event.final
            events = self._close_message()
            if final.text and not self.output:  # an answer that came whole, without deltas
                events = [*self._open_message(), self._delta(final.text), *self._close_message()]
            tokens_in, tokens_out = final.usage.tokens_in, final.usage.tokens_out
            self.usage = {
                "input_tokens": tokens_in,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": tokens_out,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": tokens_in + tokens_out,
            }
            self.status = "completed"
            self.completed_at = (
                event.create_time.seconds if event.HasField("create_time") else int(time.time())
            )
            return [*events, self._about("response.completed")]
        if kind == "error":
            events = self._close_message()
            self.status = "cancelled" if event.error.code == "CANCELLED" else "failed"
            self.error = {"code": event.error.code or "server_error", "message": event.error.message}
            return [*events, self._about("response.failed")]
        return []

    def _about(self, kind: str) -> dict[str, Any]:
        return {"type": kind, "response": self.response()}

    def _open_message(self) -> list[dict[str, Any]]:
        if self._message is not None:
            return []
        index = len(self.output)
        self._message = {
            "id": f"msg_{self.id.removeprefix(RESPONSE_PREFIX)}_{index}",
            "type": "message",
            "status": "in_progress",
            "role": "assistant",
            "content": [],
        }
        self.output.append(self._message)
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        self._message["content"].append(part)
        at = {"item_id": self._message["id"], "output_index": index}
        return [
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {**self._message, "content": []},
            },
            {"type": "response.content_part.added", **at, "content_index": 0, "part": dict(part)},
        ]

    def _delta(self, text: str) -> dict[str, Any]:
        assert self._message is not None
        self._message["content"][0]["text"] += text
        return {
            "type": "response.output_text.delta",
            "item_id": self._message["id"],
            "output_index": len(self.output) - 1,
            "content_index": 0,
            "delta": text,
            "logprobs": [],
        }

    def _close_message(self) -> list[dict[str, Any]]:
        message, self._message = self._message, None
        if message is None:
            return []
        message["status"] = "completed"
        index = self.output.index(message)
        part = message["content"][0]
        at = {"item_id": message["id"], "output_index": index, "content_index": 0}
        return [
            {"type": "response.output_text.done", **at, "text": part["text"], "logprobs": []},
            {"type": "response.content_part.done", **at, "part": dict(part)},
            {
                "type": "response.output_item.done",
                "output_index": index,
                "item": _copy(message),
            },
        ]

    def _function_call(self, event: engine_pb2.RunEvent) -> list[dict[str, Any]]:
        action = event.action
        index = len(self.output)
        call_id = action.call_id or f"call_{event.sequence}"
        item = {
            "id": f"fc_{self.id.removeprefix(RESPONSE_PREFIX)}_{index}",
            "type": "function_call",
            "status": "completed" if action.status == "ok" else "incomplete",
            "call_id": call_id,
            "name": action.tool,
            "arguments": action.arguments or "{}",
        }
        self.output.append(item)
        return [
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {**item, "status": "in_progress"},
            },
            {
                "type": "response.function_call_arguments.done",
                "item_id": item["id"],
                "output_index": index,
                "name": action.tool,
                "arguments": item["arguments"],
            },
            {"type": "response.output_item.done", "output_index": index, "item": dict(item)},
        ]


def _copy(message: dict[str, Any]) -> dict[str, Any]:
    return {**message, "content": [dict(part) for part in message["content"]]}
