"""Tables of the memory service: durable notes and personal settings."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, UniqueConstraint
from sqlmodel import Field, SQLModel

from services.shared.time import utcnow

# ChatMode.CHAT_MODE_SIDEBAR of memory.proto; the default of a user without a row.
CHAT_MODE_SIDEBAR = 1


class Note(SQLModel, table=True):
    """Curated, stable project knowledge (a decision, a preference...), never live state."""

    __tablename__ = "notes"
    __table_args__ = (
        # Idempotency: a retried CreateNote with the same request_id writes nothing.
        UniqueConstraint("owner_user_id", "request_id", name="uq_notes_owner_request"),
        Index("ix_notes_owner_project_update", "owner_user_id", "project_id", "update_time"),
    )

    id: str = Field(primary_key=True, max_length=36)
    # Notes belong to the user who saved them (directly or through their
    # agents); recall never crosses users. Sharing across users comes with
    # project membership.
    owner_user_id: str = Field(max_length=128)
    project_id: str = Field(max_length=128)
    kind: int = 0
    title: str = ""
    body: str = ""
    tags_json: str = "[]"
    author_agent_id: str = ""
    request_id: str | None = Field(default=None, max_length=128)
    create_time: datetime = Field(default_factory=utcnow)
    update_time: datetime = Field(default_factory=utcnow)


class PersonalSettings(SQLModel, table=True):
    """One row per user who changed something; the others get the defaults below."""

    __tablename__ = "personal_settings"

    user_id: str = Field(primary_key=True, max_length=128)
    display_name: str = ""
    avatar_json: str = "{}"
    instruction_page_ids_json: str = "[]"
    active_instruction_page_id: str = ""
    chat_mode: int = CHAT_MODE_SIDEBAR
    # "" = Auto.
    default_model: str = ""
