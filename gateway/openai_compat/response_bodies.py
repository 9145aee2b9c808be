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
    instructions: str | None = Field(description="the request's instructions")
    usage: dict[str, Any] | None = Field(description="the run's real tokens, once it has ended")
    error: dict[str, str] | None = Field(description="code and message of a failed run")
    incomplete_details: None = Field(description="always null")
    metadata: dict[str, str] = Field(description="switchboard_run_id and conversation_id")
    parallel_tool_calls: bool = Field(description="always false")
    tool_choice: str = Field(description='"auto": a run calls its own tools')
    tools: list[Any] = Field(description="always empty: client tools are not supported")
    text: dict[str, Any] = Field(description='{"format": {"type": "text"}}')
