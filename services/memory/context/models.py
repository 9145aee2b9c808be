"""Tables of project context and live state (memory service)."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Field, SQLModel

from services.shared.time import utcnow


class ProjectContextRow(SQLModel, table=True):
    """A project's shared rules: the `.ideai/CONTEXT.md` equivalent."""

    __tablename__ = "project_contexts"

    project_id: str = Field(primary_key=True, max_length=128)
    body: str = ""
    # Who wrote the current text.
    author_user_id: str = Field(default="", max_length=128)
    update_time: datetime = Field(default_factory=utcnow)


class LiveState(SQLModel, table=True):
    """What one agent is doing in a project, now; gone at ``expire_time``."""

    __tablename__ = "live_state"

    project_id: str = Field(primary_key=True, max_length=128)
    agent_id: str = Field(primary_key=True, max_length=128)
    # Who (or whose run) said it.
    author_user_id: str = Field(default="", max_length=128)
    activity: str = ""
    detail: str = ""
    update_time: datetime = Field(default_factory=utcnow)
    expire_time: datetime = Field(default_factory=utcnow)
