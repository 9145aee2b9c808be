"""Tables of the memory service: durable notes, project context, live state,
revision counters, and personal settings."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Index, LargeBinary, UniqueConstraint
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
        # Exact duplicates (same normalised text) are refused by the database
        # itself, so two replicas saving the same note at once write it once.
        UniqueConstraint(
            "owner_user_id", "project_id", "content_hash", name="uq_notes_owner_project_content"
        ),
        # An imported memory file maps to one note: re-import updates it.
        UniqueConstraint("owner_user_id", "project_id", "source", name="uq_notes_owner_project_source"),
        Index("ix_notes_owner_project_update", "owner_user_id", "project_id", "update_time"),
        Index("ix_notes_owner_create", "owner_user_id", "create_time", "id"),
        Index("ix_notes_embedder", "embedder", "embedding_dimension", "id"),
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
    # sha256 of the normalised title and body (see notes.content_hash).
    content_hash: str = Field(default="", max_length=64)
    # float32 row of ``embedder``'s vector of the note, ``embedding_dimension``
    # long; recomputed (services/memory/reembed.py) when the configured
    # embedder differs, and never compared with another embedder's.
    embedding: bytes | None = Field(default=None, sa_column=Column(LargeBinary, nullable=True))
    embedder: str = Field(default="", max_length=32)
    embedding_dimension: int = 0
    # The memory file an imported note came from; None for saved notes.
    source: str | None = Field(default=None, max_length=256)
    # sha256 of the imported file's content: an unchanged file is skipped.
    source_hash: str = Field(default="", max_length=64)
    create_time: datetime = Field(default_factory=utcnow)
    update_time: datetime = Field(default_factory=utcnow)


class Revision(SQLModel, table=True):
    """A counter per (owner, project, scope), bumped in the same transaction as
    every write of that scope ("notes", "live"). Replicas compare it with what
    they cached instead of trusting process memory."""

    __tablename__ = "memory_revisions"

    owner_user_id: str = Field(primary_key=True, max_length=128)
    project_id: str = Field(primary_key=True, max_length=128)
    scope: str = Field(primary_key=True, max_length=16)
    revision: int = 0


class ProjectContextRow(SQLModel, table=True):
    """A project's shared rules: the `.ideai/CONTEXT.md` equivalent."""

    __tablename__ = "project_contexts"

    owner_user_id: str = Field(primary_key=True, max_length=128)
    project_id: str = Field(primary_key=True, max_length=128)
    body: str = ""
    update_time: datetime = Field(default_factory=utcnow)


class LiveState(SQLModel, table=True):
    """What one agent is doing in a project, now; gone at ``expire_time``."""

    __tablename__ = "live_state"

    owner_user_id: str = Field(primary_key=True, max_length=128)
    project_id: str = Field(primary_key=True, max_length=128)
    agent_id: str = Field(primary_key=True, max_length=128)
    activity: str = ""
    detail: str = ""
    update_time: datetime = Field(default_factory=utcnow)
    expire_time: datetime = Field(default_factory=utcnow)


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
