"""Tables of run webhooks: the outbox (one row per ended run that names a
webhook, written in the transaction that ends the run), the journal of
delivery attempts, and users' default webhooks of conversations and agents."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index
from sqlmodel import Field, SQLModel

from services.shared.time import utcnow

PENDING, DELIVERED, FAILED = "pending", "delivered", "failed"


class WebhookOutbox(SQLModel, table=True):
    """A run's record waiting to be (or once) delivered. Its key is the run:
    a run ends once, so it is delivered by one row, whichever replica or
    restart picks it up. A worker claims a row by setting its lease; a lease
    that expires (the worker died mid-attempt) frees the row for another."""

    __tablename__ = "webhook_outbox"
    __table_args__ = (Index("ix_webhook_outbox_due", "state", "next_attempt_at"),)

    run_id: str = Field(primary_key=True, max_length=36)
    url: str = Field(max_length=2048)
    # The `webhook-id` of every attempt: receivers dedupe on it.
    webhook_id: str = Field(max_length=64)
    state: str = Field(default=PENDING, max_length=16)  # pending | delivered | failed
    attempts: int = 0
    created_at: datetime = Field(default_factory=utcnow)
    next_attempt_at: datetime = Field(default_factory=utcnow)
    lease_owner: str | None = Field(default=None, max_length=64)
    lease_until: datetime | None = None
    finished_at: datetime | None = None


class WebhookDelivery(SQLModel, table=True):
    """One attempt at POSTing a run's record."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (Index("ix_webhook_deliveries_run", "run_id", "attempt"),)

    id: str = Field(primary_key=True, max_length=36)
    run_id: str = Field(max_length=36)
    attempt: int
    status_code: int = 0  # 0: no HTTP answer
    error: str = ""
    create_time: datetime = Field(default_factory=utcnow)
    duration_ms: int = 0


class WebhookDefault(SQLModel, table=True):
    """A user's default webhook for the runs of one conversation or agent
    that name none; user_id "" for an agent's default that belongs to its
    shared project (see webhooks.service). Kept in the engine (not on the threads service's
    conversations and agents): the engine alone checks webhook URLs against
    its address policy, and reads the default where it starts the run."""

    __tablename__ = "webhook_defaults"

    user_id: str = Field(primary_key=True, max_length=128)
    target_kind: str = Field(primary_key=True, max_length=16)  # conversation | agent
    target_id: str = Field(primary_key=True, max_length=64)
    url: str = Field(max_length=2048)
    update_time: datetime = Field(default_factory=utcnow)
