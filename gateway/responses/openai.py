"""The OpenAI-compatible routes (gateway.openai_compat): OpenAI's own shapes."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from gateway.responses.base import Body, error_responses


# OpenAI-compatible routes (gateway.openai_compat): OpenAI's own shapes.
class OpenAIErrorDetail(Body):
    """What went wrong, as OpenAI's API says it."""

    message: str = Field(description="for a person")
    type: str = Field(
        description="invalid_request_error, authentication_error, not_found_error, server_error..."
    )
    param: str | None = Field(description="the request field at fault (messages, model...), or null")
    code: str | None = Field(description="a stable code (unknown_model, payload_too_large...), or null")


class OpenAIErrorResponse(Body):
    """Every error body of the /v1 routes, with this API's status codes."""

    error: OpenAIErrorDetail = Field(description="the error")


OPENAI_ERROR_RESPONSES = error_responses(OpenAIErrorResponse, "OpenAI's shape")


class OpenAIModel(Body):
    """A model a chat-completions request may name."""

    id: str = Field(description='"auto", a configured model id, or agent:<id> to ask an agent')
    object: str = Field(description='"model"')
    created: int = Field(description="always 0")
    owned_by: str = Field(description='the model\'s provider, or "switchboard"')


class OpenAIModelList(Body):
    """The models of GET /v1/models: auto, the configured ones, then one per agent."""

    object: str = Field(description='"list"')
    data: list[OpenAIModel] = Field(description="the models")


class CompletionUsage(Body):
    """The run's tokens (its final event)."""

    prompt_tokens: int = Field(description="input tokens of the run's model calls")
    completion_tokens: int = Field(description="output tokens of the run's model calls")
    total_tokens: int = Field(description="their sum")


class ChatCompletionMessage(Body):
    """The answer."""

    role: str = Field(description='"assistant"')
    content: str = Field(description="the whole answer")
    refusal: str | None = Field(description="always null")


class ChatCompletionChoice(Body):
    """The one choice (n is 1)."""

    index: int = Field(description="0")
    message: ChatCompletionMessage = Field(description="the answer")
    finish_reason: str = Field(description='"stop"')
    logprobs: dict[str, Any] | None = Field(description="always null")


class ChatCompletion(Body):
    """A run's answer as one chat.completion (stream false)."""

    id: str = Field(description="chatcmpl-<run id>")
    object: str = Field(description='"chat.completion"')
    created: int = Field(description="Unix seconds")
    model: str = Field(description="the model as requested")
    choices: list[ChatCompletionChoice] = Field(description="one choice")
    usage: CompletionUsage = Field(description="the run's tokens")


class ChatCompletionChunkChoice(Body):
    """The one choice of a chunk."""

    index: int = Field(description="0")
    delta: dict[str, str] = Field(
        description="role (first chunk), content (a piece of the answer) or reasoning_content; {} on the last"
    )
    finish_reason: str | None = Field(description='"stop" on the last chunk, else null')
    logprobs: dict[str, Any] | None = Field(description="always null")


class ChatCompletionChunk(Body):
    """One `data:` event of a streamed answer (stream true); the stream ends with `data: [DONE]`."""

    id: str = Field(description="chatcmpl-<run id>")
    object: str = Field(description='"chat.completion.chunk"')
    created: int = Field(description="Unix seconds")
    model: str = Field(description="the model as requested")
    choices: list[ChatCompletionChunkChoice] = Field(description="one choice; none in the usage chunk")
    usage: CompletionUsage | None = Field(
        default=None, description="only in the last chunk, with stream_options.include_usage"
    )
