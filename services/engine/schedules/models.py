"""The ``schedules`` table: one row per schedule, holding its next tick (the
claim point every replica compares and sets) and what its ticks did."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, DateTime, Index, UniqueConstraint
from sqlmodel import Field, SQLModel

from services.shared.time import utcnow


class Schedule(SQLModel, table=True):
    __tablename__ = "schedules"
    __table_args__ = (
        UniqueConstraint("user_id", "request_id", name="uq_schedules_user_request"),
        Index("ix_schedules_user_created", "user_id", "create_time", "id"),
        Index("ix_schedules_due", "paused", "next_run_at"),
        # An agent's schedules, listed to its shared project's members.
        Index("ix_schedules_agent_created", "agent_id", "create_time", "id"),
    )

    id: str = Field(primary_key=True, max_length=36)
    user_id: str = Field(max_length=128)
    request_id: str | None = Field(default=None, max_length=128)
    cron: str = Field(max_length=200)
    time_zone: str = Field(default="", max_length=64)
    message: str
    # Exactly one target: a conversation of the user's, or an agent's thread.
    conversation_id: str | None = Field(default=None, max_length=36)
    agent_id: str | None = Field(default=None, max_length=128)
    paused: bool = False
    # The next tick (UTC); NULL while paused. Claiming a tick moves it on.
    next_run_at: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))
    # Ticks claimed: counted, and the last one, in the claim's transaction.
    run_count: int = 0
    last_run_at: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))
    last_run_id: str | None = Field(default=None, max_length=36)
    # Why the last claimed tick could not start its run ("" = it did).
    last_error: str = ""
    # Ticks nobody ran within the misfire grace (never replayed).
    missed_count: int = 0
    last_missed_at: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))
    # A claimed tick whose run is not known to be started yet, and when it
    # was claimed: a replica that finds it stale starts it (idempotently).
    pending_tick_at: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))
    pending_since: datetime | None = Field(default=None, sa_column=Column(DateTime(timezone=True)))
    create_time: datetime = Field(
        default_factory=utcnow, sa_column=Column(DateTime(timezone=True), nullable=False)
    )
