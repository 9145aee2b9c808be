"""Tables of the threads service. Views over entries are filters (indexes
below), never copies."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Column, Index, UniqueConstraint
from sqlmodel import Field, SQLModel

from services.shared.time import utcnow


class Agent(SQLModel, table=True):
    __tablename__ = "agents"

    id: str = Field(primary_key=True, max_length=64)
    display_name: str = ""
    persona: str = ""
    provider_id: str = ""
    model: str = ""
    injection_strategy: int = 0
    create_time: datetime = Field(default_factory=utcnow)
    update_time: datetime = Field(default_factory=utcnow)


class Thread(SQLModel, table=True):
    """A conversation (a user's chat) or an agent thread (one live per agent)."""

    __tablename__ = "threads"
    __table_args__ = (
        UniqueConstraint("user_id", "request_id", name="uq_threads_user_request"),
        Index("ix_threads_user_pinned_update", "user_id", "pinned", "update_time"),
    )

    id: str = Field(primary_key=True, max_length=36)
    kind: str = Field(max_length=16)  # "conversation" | "agent"
    user_id: str | None = Field(default=None, max_length=128)
    agent_id: str | None = Field(default=None, max_length=64)
    request_id: str | None = Field(default=None, max_length=128)
    title: str = ""
    title_auto: bool = False
    pinned: bool = False
    # The conversation's *allowed* sources (not a run's read sources).
    sources_json: str = "{}"
    last_sequence: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    create_time: datetime = Field(default_factory=utcnow)
    update_time: datetime = Field(default_factory=utcnow)


class Entry(SQLModel, table=True):
    __tablename__ = "entries"
    __table_args__ = (
        UniqueConstraint("thread_id", "sequence", name="uq_entries_thread_sequence"),
        UniqueConstraint("thread_id", "request_id", "request_index", name="uq_entries_thread_request"),
        Index("ix_entries_thread_correlation_sequence", "thread_id", "correlation_id", "sequence"),
    )

    id: str = Field(primary_key=True, max_length=36)
    thread_id: str = Field(foreign_key="threads.id", max_length=36)
    sequence: int = Field(sa_column=Column(BigInteger, nullable=False))
    requester: str = ""
    target: str = ""
    correlation_id: str = ""
    role: int = 0
    source: str = ""
    run_id: str = ""
    content: str = ""
    # Idempotency: a retried AppendEntries with the same request_id writes nothing.
    request_id: str | None = Field(default=None, max_length=128)
    request_index: int = 0
    create_time: datetime = Field(default_factory=utcnow)
