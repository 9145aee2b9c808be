"""Tables of handoff summaries (memory service): one folded summary per agent
thread, and the entries recorded since its last checkpoint."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Column, DateTime, Text
from sqlmodel import Field, SQLModel

from services.shared.time import utcnow


class HandoffSummaryRow(SQLModel, table=True):
    """The summariser's state (sections as data, JSON) as of the last
    checkpoint; the text is rendered from it, bounded, on read."""

    __tablename__ = "handoff_summaries"

    thread_id: str = Field(primary_key=True, max_length=128)
    state_json: str = Field(default="{}", sa_column=Column(Text, nullable=False))
    last_folded_sequence: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    # HandoffCheckpointReason of handoff.proto; 0 before the first checkpoint.
    last_checkpoint_reason: int = 0
    checkpoint_time: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))
    update_time: datetime = Field(default_factory=utcnow)
    # A conversation's summary belongs to its user (None: an agent thread's,
    # shared by the project's agents); another user finds nothing.
    owner_user_id: str | None = Field(default=None, max_length=128)
    # Who folded the last checkpoint ("rules" or "model:<provider>/<model>"),
    # and why the model did not when it was configured.
    summariser: str = ""
    fallback_reason: str = ""


class HandoffPendingEntry(SQLModel, table=True):
    """An entry recorded but not folded yet; deleted by the checkpoint that
    folds it. (thread_id, sequence) is the key, so re-feeding is a no-op."""

    __tablename__ = "handoff_entries"

    thread_id: str = Field(primary_key=True, max_length=128)
    sequence: int = Field(sa_column=Column(BigInteger, primary_key=True, autoincrement=False))
    author_agent_id: str = Field(default="", max_length=128)
    requester: str = Field(default="", max_length=128)
    correlation_id: str = Field(default="", max_length=128)
    kind: int = 0
    text: str = Field(default="", sa_column=Column(Text, nullable=False))
    create_time: datetime = Field(default_factory=utcnow)
