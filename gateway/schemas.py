"""Request bodies, validated before any RPC (a bad body never reaches a service)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class AllowedSourcesBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workspace: bool = True
    connectors: list[str] = Field(default_factory=list, max_length=100)
    mcp_servers: list[str] = Field(default_factory=list, max_length=100)


class CreateConversationBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(default="", max_length=200)
    allowed_sources: AllowedSourcesBody | None = None
    request_id: str = Field(default="", max_length=128)


class UpdateConversationBody(BaseModel):
    """Only the fields present are changed. Renaming makes the title manual:
    automatic titling never overwrites it afterwards."""

    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(default=None, min_length=1, max_length=200)
    pinned: bool | None = None


class MessageBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Length is checked by the route (413 rather than 400 beyond the limit).
    message: str = Field(min_length=1)
    # "" = the user's default model (personal settings; Auto when unset),
    # "auto" = let the model router choose, otherwise a configured model id.
    model: str = Field(default="", max_length=100)
    forced_skills: list[str] = Field(default_factory=list, max_length=10)
    # Idempotency key: a retried POST streams the same run.
    request_id: str = Field(default="", max_length=128)
