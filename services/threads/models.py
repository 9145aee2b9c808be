"""Tables of the threads service. Views over entries are filters (indexes
below), never copies."""

from __future__ import annotations

from datetime import datetime
from typing import cast

from sqlalchemy import BigInteger, Column, DateTime, Index, Table, UniqueConstraint, text
from sqlmodel import Field, SQLModel

from services.shared.audit import AuditColumns
from services.shared.time import utcnow


class Agent(SQLModel, table=True):
    __tablename__ = "agents"
    __table_args__ = (Index("ix_agents_project_id_id", "project_id", "id"),)

    id: str = Field(primary_key=True, max_length=64)
    display_name: str = ""
    persona: str = ""
    provider_id: str = ""
    model: str = ""
    injection_strategy: int = 0
    # The user who registered it; "" for an agent registered before agents
    # had owners, until its next caller claims it (services/threads/access.py).
    owner_id: str = Field(default="", max_length=128)
    # The project it belongs to (its asks read that project's memory; the
    # project's members read its thread and ask it): its creator's personal
    # project unless created in another. "" only while it has no owner: the
    # claim puts it in its new owner's personal project.
    project_id: str = Field(default="", max_length=128)
    # A remote A2A agent: the URL of its agent card ("" for an agent that
    # runs here), and what its card said when it was registered.
    remote_card_url: str = Field(default="", max_length=2048)
    remote_card_name: str = ""
    remote_description: str = ""
    remote_streaming: bool = False
    create_time: datetime = Field(default_factory=utcnow)
    update_time: datetime = Field(default_factory=utcnow)


class AgentMember(SQLModel, table=True):
    """A user who may ask the agent and read its thread (the owner is one)."""

    __tablename__ = "agent_members"

    agent_id: str = Field(primary_key=True, max_length=64)
    user_id: str = Field(primary_key=True, max_length=128)
    create_time: datetime = Field(default_factory=utcnow)


class ThreadsAuditEvent(AuditColumns, table=True):
    """A write to the agent registry (agent.create, agent.update,
    agent.member_add, agent.member_remove, agent.claim), written in the
    write's transaction."""

    __tablename__ = "threads_audit_events"
    __table_args__ = (Index("ix_threads_audit_events_time_id", "create_time", "id"),)


class Thread(SQLModel, table=True):
    """A conversation (a user's chat) or an agent thread (one live per agent)."""

    __tablename__ = "threads"
    __table_args__ = (
        UniqueConstraint("user_id", "request_id", name="uq_threads_user_request"),
        Index("ix_threads_user_pinned_update", "user_id", "pinned", "update_time"),
        # At most one live agent thread per target agent, whatever the number
        # of processes racing to create it.
        Index(
            "uq_threads_live_agent",
            "agent_id",
            unique=True,
            sqlite_where=text("kind = 'agent' AND archive_time IS NULL"),
            postgresql_where=text("kind = 'agent' AND archive_time IS NULL"),
        ),
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
    # The client's labels (Conversation.metadata), a JSON object of strings.
    metadata_json: str = "{}"
    last_sequence: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    create_time: datetime = Field(default_factory=utcnow)
    update_time: datetime = Field(default_factory=utcnow)
    # Set when archived (a conversation) or retired (an agent thread): no
    # longer live.
    archive_time: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))


class Entry(SQLModel, table=True):
    __tablename__ = "entries"
    __table_args__ = (
        UniqueConstraint("thread_id", "sequence", name="uq_entries_thread_sequence"),
        UniqueConstraint("thread_id", "request_id", "request_index", name="uq_entries_thread_request"),
        Index("ix_entries_thread_correlation_sequence", "thread_id", "correlation_id", "sequence"),
        # The ForPair view.
        Index("ix_entries_thread_pair_sequence", "thread_id", "requester", "target", "sequence"),
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
    # An assistant turn's tool calls ([{id, name, arguments}]), and a tool
    # result's call id: a later run replays them in the provider's format.
    tool_calls_json: str = "[]"
    tool_call_id: str = ""
    # Idempotency: a retried AppendEntries with the same request_id writes nothing.
    request_id: str | None = Field(default=None, max_length=128)
    request_index: int = 0
    create_time: datetime = Field(default_factory=utcnow)


class ProviderSession(SQLModel, table=True):
    """A provider's native session bound to an agent thread, keyed by
    (agent thread, provider), not by (requester, target) pair."""

    __tablename__ = "provider_sessions"
    __table_args__ = (
        Index(
            "uq_provider_sessions_live",
            "agent_thread_id",
            "provider_id",
            unique=True,
            sqlite_where=text("release_time IS NULL"),
            postgresql_where=text("release_time IS NULL"),
        ),
        Index("ix_provider_sessions_thread_provider", "agent_thread_id", "provider_id", "create_time"),
    )

    id: str = Field(primary_key=True, max_length=36)
    agent_thread_id: str = Field(foreign_key="threads.id", max_length=36)
    provider_id: str = Field(max_length=64)
    native_session_id: str = Field(max_length=256)
    create_time: datetime = Field(default_factory=utcnow)
    release_time: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))


class Segment(SQLModel, table=True):
    """A segment of an agent thread's log (rotation). Sequences stay global per
    thread: a segment is the range [first_sequence, last_sequence] of its
    entries, never a copy. At most one open segment per thread."""

    __tablename__ = "segments"
    __table_args__ = (
        Index(
            "uq_segments_open",
            "thread_id",
            unique=True,
            sqlite_where=text("status = 'open'"),
            postgresql_where=text("status = 'open'"),
        ),
    )

    thread_id: str = Field(foreign_key="threads.id", primary_key=True, max_length=36)
    number: int = Field(primary_key=True)  # from 1
    first_sequence: int = Field(sa_column=Column(BigInteger, nullable=False))
    # first_sequence - 1 while the segment is empty.
    last_sequence: int = Field(sa_column=Column(BigInteger, nullable=False))
    entry_count: int = 0
    char_count: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    status: str = Field(max_length=8)  # "open" | "closed"
    # "none" (open), "pending" (closed, no summary yet), "ready".
    handoff_status: str = Field(default="none", max_length=8)
    handoff_summary: str | None = None
    open_time: datetime = Field(default_factory=utcnow)
    close_time: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))
    handoff_time: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))


def table_of(model: type[SQLModel]) -> Table:
    """A model's Core table, for hot-path statements that skip the ORM."""
    return cast(Table, model.__table__)  # type: ignore[attr-defined]
