"""The chat-completions request: its body as the client sends it, and what
it becomes (:class:`Exchange`): the client's instructions, its earlier
turns and the message the run answers. Client tools and non-text content
are refused."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gateway.openai_compat.errors import OpenAIError

# Messages of one request; a longer history is the conversation's to keep.
MAX_MESSAGES = 1000


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: str = Field(max_length=50)
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    tool_calls: list[Any] | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatCompletionBody(BaseModel):
    """OpenAI's request. Sampling and length settings (temperature, top_p,
    max_tokens, stop, seed, user...) are accepted and not used: a model's
    settings are its provider's configuration (docs/clients.md)."""

    model_config = ConfigDict(extra="allow")

    model: str = Field(min_length=1, max_length=200)
    messages: list[ChatMessage] = Field(min_length=1, max_length=MAX_MESSAGES)
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int | None = Field(default=None, ge=1, le=1)
    tools: list[Any] | None = None
    functions: list[Any] | None = None


@dataclass(frozen=True)
class Exchange:
    """A request read: the client's instructions, its earlier turns
    (role, text), and the message the run is posted with."""

    instructions: str
    earlier: list[tuple[str, str]]
    message: str


def _text(message: ChatMessage, index: int) -> str:
    if isinstance(message.content, str):
        return message.content
    if message.content is None:
        if message.tool_calls:
            raise OpenAIError(
                400,
                "unsupported_tool_calls",
                "client tools are not supported: Switchboard's runs call their own tools",
                f"messages[{index}].tool_calls",
            )
        raise OpenAIError(400, "invalid_request", "a message needs content", f"messages[{index}].content")
    texts = []
    for number, part in enumerate(message.content):
        if part.type != "text" or part.text is None:
            raise OpenAIError(
                400,
                "unsupported_content",
                f"only text content is supported, not {part.type!r}",
                f"messages[{index}].content[{number}]",
            )
        texts.append(part.text)
    return "\n".join(texts)


def read_exchange(body: ChatCompletionBody) -> Exchange:
    if body.tools or body.functions:
        raise OpenAIError(
            400,
            "unsupported_tools",
            "client tools are not supported: Switchboard's runs call their own tools",
            "tools" if body.tools else "functions",
        )
    instructions: list[str] = []
    turns: list[tuple[str, str]] = []
    for index, message in enumerate(body.messages):
        if message.role in ("tool", "function"):
            raise OpenAIError(
                400,
                "unsupported_tool_calls",
                f"{message.role} messages are not supported: Switchboard's runs call their own tools",
                f"messages[{index}].role",
            )
        text = _text(message, index)
        if message.role in ("system", "developer"):
            if text.strip():
                instructions.append(text.strip())
        else:
            turns.append((message.role, text))
    if not turns or body.messages[-1].role != "user":
        raise OpenAIError(
            400,
            "invalid_request",
            "the last message must be the user's: it is the one the run answers",
            f"messages[{len(body.messages) - 1}].role",
        )
    return Exchange("\n\n".join(instructions), turns[:-1], turns[-1][1])
