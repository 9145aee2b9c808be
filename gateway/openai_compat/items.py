"""Open Responses' items both ways: the input items a client sends (to
`/v1/responses` or a conversation), read as turns, and a conversation's
entries shown as items.

An entry is one or more items, each id naming its entry: a user or
assistant text is `msg_<entry id>`, the n-th tool call of an assistant
entry `fc_<entry id>_<n>`, a tool result `fco_<entry id>`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from gateway.openai_compat.errors import OpenAIError
from gateway.openai_compat.exchange import ContentPart
from switchboard.threads.v1 import threads_pb2

MESSAGE, CALL, CALL_OUTPUT = "msg_", "fc_", "fco_"
TEXT_PARTS = ("input_text", "output_text", "text")


class InputItem(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: str | list[ContentPart]


def item_text(item: InputItem, param: str) -> str:
    """The item's text; other content (images, files) is refused."""
    if isinstance(item.content, str):
        return item.content
    texts = []
    for number, part in enumerate(item.content):
        if part.type not in TEXT_PARTS or part.text is None:
            raise OpenAIError(
                400, "unsupported_content", f"only text content is supported, not {part.type!r}",
                f"{param}.content[{number}]",
            )  # fmt: skip
        texts.append(part.text)
    return "\n".join(texts)


@dataclass(frozen=True)
class ItemId:
    """An item id read: its entry, and which of the entry's items it is."""

    entry_id: str
    item_id: str


def read_item_id(item_id: str) -> ItemId | None:
    """None for an id no entry's item has."""
    for prefix in (CALL_OUTPUT, CALL, MESSAGE):
        if item_id.startswith(prefix):
            entry_id = item_id.removeprefix(prefix)
            if prefix == CALL:
                entry_id, _, number = entry_id.rpartition("_")
                if not number.isdigit():
                    return None
            return ItemId(entry_id, item_id) if entry_id else None
    return None


ROLES = {
    threads_pb2.ROLE_USER: "user",
    threads_pb2.ROLE_ASSISTANT: "assistant",
    threads_pb2.ROLE_SYSTEM: "system",
}


def entry_items(entry: threads_pb2.Entry) -> list[dict[str, Any]]:
    """The items of one entry, in the order they were written."""
    if entry.role == threads_pb2.ROLE_TOOL:
        return [
            {
                "id": f"{CALL_OUTPUT}{entry.id}",
                "type": "function_call_output",
                "call_id": entry.tool_call_id,
                "output": entry.content,
                "status": "completed",
            }
        ]
    role = ROLES.get(entry.role)
    if role is None:
        return []
    items: list[dict[str, Any]] = []
    if entry.content or not entry.tool_calls:
        part: dict[str, Any] = {"type": "input_text", "text": entry.content}
        if role == "assistant":
            part = {"type": "output_text", "text": entry.content, "annotations": [], "logprobs": []}
        items.append(
            {
                "id": f"{MESSAGE}{entry.id}",
                "type": "message",
                "role": role,
                "status": "completed",
                "content": [part],
            }
        )
    items += [
        {
            "id": f"{CALL}{entry.id}_{number}",
            "type": "function_call",
            "call_id": call.id,
            "name": call.name,
            "arguments": call.arguments or "{}",
            "status": "completed",
        }
        for number, call in enumerate(entry.tool_calls)
    ]
    return items
