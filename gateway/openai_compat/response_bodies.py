"""The Open Responses response object, as /openapi.json describes it."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from gateway.responses import Body


class OpenResponse(Body):
    """A run as an Open Responses response."""

    id: str = Field(description="resp_<run id>")
    object: str = Field(description='"response"')
    created_at: int = Field(description="Unix seconds")
    status: str = Field(description="queued, in_progress, completed, failed or cancelled")
    background: bool = Field(description="whether it was started in the background")
    model: str = Field(description="the model as requested")
    output: list[dict[str, Any]] = Field(
        description="the output items: assistant messages (output_text parts) and the run's tool calls "
        "(function_call items, with their call id, name and arguments)"
    )
    output_text: str = Field(description="the text of every output message, joined")
    previous_response_id: str | None = Field(description="the response this one continues")
    conversation: dict[str, str] | None = Field(
        description='{"id": "conv_<conversation id>"} when the request named a conversation'
    )
    instructions: str | None = Field(description="the request's instructions")
    usage: dict[str, Any] | None = Field(description="the run's real tokens, once it has ended")
    error: dict[str, str] | None = Field(description="code and message of a failed run")
    incomplete_details: None = Field(description="always null")
    metadata: dict[str, str] = Field(description="switchboard_run_id and conversation_id")
    parallel_tool_calls: bool = Field(description="always false")
    tool_choice: str = Field(description='"auto": a run calls its own tools')
    tools: list[Any] = Field(description="always empty: client tools are not supported")
    text: dict[str, Any] = Field(description='{"format": {"type": "text"}}')
    completed_at: int | None = Field(description="Unix seconds when it completed, else null")
    temperature: float = Field(description="always 1: sampling is the model's provider configuration")
    top_p: float = Field(description="always 1, likewise")
    presence_penalty: float = Field(description="always 0, likewise")
    frequency_penalty: float = Field(description="always 0, likewise")
    top_logprobs: int = Field(description="always 0: no log probabilities")
    truncation: str = Field(description='"auto": older turns are folded into the conversation\'s summary')
    reasoning: None = Field(description="always null")
    max_output_tokens: None = Field(description="always null: the run's budget bounds it")
    max_tool_calls: None = Field(description="always null")
    store: bool = Field(description="always true: GET /v1/responses/{id} reads it again")
    service_tier: str = Field(description='"default"')
    safety_identifier: None = Field(description="always null")
    prompt_cache_key: None = Field(description="always null")


class OpenConversation(Body):
    """A Switchboard conversation as an OpenAI conversation."""

    id: str = Field(description="conv_<conversation id>")
    object: str = Field(description='"conversation"')
    created_at: int = Field(description="Unix seconds")
    metadata: dict[str, str] = Field(description="the client's labels (at most 16 pairs)")


class DeletedConversation(Body):
    """A conversation deleted: archived, out of the /v1 API (docs/protocols.md)."""

    id: str = Field(description="conv_<conversation id>")
    object: str = Field(description='"conversation.deleted"')
    deleted: bool = Field(description="always true")


class ConversationItem(Body):
    """One item of a conversation, with the fields of its type only."""

    id: str = Field(description="msg_<entry id>, fc_<entry id>_<n> or fco_<entry id>")
    type: str = Field(description="message, function_call or function_call_output")
    status: str = Field(description='"completed"')
    role: str | None = Field(default=None, description="a message's: user, assistant or system")
    content: list[dict[str, Any]] | None = Field(
        default=None, description="a message's parts: input_text (user, system) or output_text (assistant)"
    )
    call_id: str | None = Field(default=None, description="a function call's id, and its output's")
    name: str | None = Field(default=None, description="the function a function_call called")
    arguments: str | None = Field(default=None, description="a function_call's arguments, JSON")
    output: str | None = Field(default=None, description="a function_call_output's result")


class ConversationItems(Body):
    """A page of a conversation's items."""

    object: str = Field(description='"list"')
    data: list[ConversationItem] = Field(
        description="message items (user input_text, assistant output_text), the runs' function_call "
        "and function_call_output items"
    )
    first_id: str | None = Field(description="the first item's id, null when empty")
    last_id: str | None = Field(description="the last item's id: the after of the next page")
    has_more: bool = Field(description="whether items follow this page")
