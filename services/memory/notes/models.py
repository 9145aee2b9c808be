"""The table of durable notes (memory service)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Index, LargeBinary, UniqueConstraint
from sqlmodel import Field, SQLModel

from services.shared.time import utcnow


class Note(SQLModel, table=True):
    """Curated, stable project knowledge (a decision, a preference...), never live state."""

    __tablename__ = "notes"
    __table_args__ = (
        # Idempotency: a retried CreateNote with the same request_id writes nothing.
        UniqueConstraint("author_user_id", "request_id", name="uq_notes_author_request"),
        # Exact duplicates (same normalised text) are refused by the database
        # itself, so two replicas saving the same note at once write it once.
        UniqueConstraint("project_id", "content_hash", name="uq_notes_project_content"),
        # An imported memory file maps to one note: re-import updates it.
        UniqueConstraint("project_id", "source", name="uq_notes_project_source"),
        Index("ix_notes_project_update", "project_id", "update_time"),
        Index("ix_notes_project_create", "project_id", "create_time", "id"),
        Index("ix_notes_embedder", "embedder", "embedding_dimension", "id"),
    )

    id: str = Field(primary_key=True, max_length=36)
    # Notes belong to a project (services/memory/projects): every member
    # reads them, and recall never crosses projects. The author is the user
    # who saved it (directly or through an agent's run).
    author_user_id: str = Field(max_length=128)
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


class NoteProposalRow(SQLModel, table=True):
    """Knowledge an agent proposed for a project's memory, waiting for a
    member's decision (or decided). What it would update is kept as it was
    when proposed: the diff a member reviews, and the check that the note has
    not changed since."""

    __tablename__ = "note_proposals"
    __table_args__ = (
        # Idempotency: a retried ProposeNote with the same request_id writes nothing.
        UniqueConstraint("proposer_user_id", "request_id", name="uq_note_proposals_proposer_request"),
        Index("ix_note_proposals_project_create", "project_id", "create_time", "id"),
        Index("ix_note_proposals_project_state", "project_id", "state"),
    )

    id: str = Field(primary_key=True, max_length=36)
    project_id: str = Field(max_length=128)
    proposer_user_id: str = Field(max_length=128)
    request_id: str | None = Field(default=None, max_length=128)
    run_id: str = Field(default="", max_length=64)
    author_agent_id: str = Field(default="", max_length=128)
    kind: int = 0
    title: str = ""
    body: str = ""
    tags_json: str = "[]"
    reason: str = ""
    # The note it would update ("" for a new one), as it was when proposed.
    target_note_id: str = Field(default="", max_length=36)
    target_kind: int = 0
    target_title: str = ""
    target_body: str = ""
    target_tags_json: str = "[]"
    target_update_time: datetime | None = None
    match_reason: str = ""
    # NoteProposalState of memory.proto.
    state: int = 1
    decided_by_user_id: str = Field(default="", max_length=128)
    # The note written on acceptance; a claim token while it is being written.
    result_note_id: str = Field(default="", max_length=64)
    create_time: datetime = Field(default_factory=utcnow)
    decide_time: datetime | None = None
