"""Tables of the engine: runs (`agent_runs`, one row per execution), their
events, and the leases of live engine instances."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import BigInteger, Column, Index, LargeBinary, UniqueConstraint
from sqlmodel import Field, SQLModel

from services.shared.time import utcnow


class RunStatus(StrEnum):
    """A run's status as agent_runs stores it: the short names of the
    contract's engine.v1.RunStatus (runs.outcome.STATUSES maps the two)."""

    RUNNING = "running"
    WAITING_APPROVAL = "waiting_approval"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    BUDGET_EXCEEDED = "budget_exceeded"


class AgentRun(SQLModel, table=True):
    __tablename__ = "agent_runs"
    __table_args__ = (
        UniqueConstraint("user_id", "request_id", name="uq_agent_runs_user_request"),
        Index("ix_agent_runs_conversation", "conversation_id"),
        # An agent's tasks of one A2A context: its thread's runs of one correlation.
        Index("ix_agent_runs_conversation_correlation", "conversation_id", "correlation_id"),
        Index("ix_agent_runs_started_at", "started_at"),
        Index("ix_agent_runs_status_instance", "status", "instance_id"),
        # The run quotas count a user's running runs and recent starts.
        Index("ix_agent_runs_user_status", "user_id", "status"),
        Index("ix_agent_runs_user_created_at", "user_id", "created_at"),
    )

    id: str = Field(primary_key=True, max_length=36)
    agent_id: str | None = None
    user_id: str = Field(max_length=128)
    conversation_id: str | None = Field(default=None, max_length=36)
    parent_run_id: str | None = None
    surface: str = "chat"  # 'chat' | 'editor' (+ future values)
    trigger_id: str | None = None
    trigger_payload_json: str = "{}"
    # A RunStatus (stored as its string).
    status: str = RunStatus.RUNNING
    provider: str | None = None  # provider and model actually used
    model: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    credits: float = 0.0  # always 0 in this phase
    skills_json: str = "[]"  # [{skill_id, name, invocation}]
    # What the run actually read (not the conversation's allowed sources).
    sources_json: str = "[]"
    # The router's decisions (engine.v1.RouterDecision) as JSON.
    router_decision_json: str = "{}"
    layers_json: str = "[]"
    # Who started the run, the page the user was on and the blocks they
    # selected (engine.v1.RunContext) as JSON.
    run_context_json: str = "{}"
    # A run that waited for approval: "accepted" or "refused" once decided.
    approval: str = ""
    error: str | None = None
    started_at: datetime = Field(default_factory=utcnow)
    # When the engine accepted the run, by its own (injectable) clock: the
    # per-minute run quota counts these. started_at is the database's clock
    # on PostgreSQL (the order of a thread's runs).
    created_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None
    request_id: str | None = Field(default=None, max_length=128)
    requested_model: str = ""
    instance_id: str = Field(default="", max_length=64)
    # Set by CancelRun; the engine executing the run polls it (any replica).
    cancel_requested: bool = False
    # Where the run's record is POSTed once it ends (services.engine.webhooks).
    webhook_url: str | None = Field(default=None, max_length=2048)
    # The language of the texts the run writes (services.engine.texts): "en", "fr".
    language: str = Field(default="en", max_length=8)
    # An ask's correlation id (the one it named, else the run's id); None for a chat run.
    correlation_id: str | None = Field(default=None, max_length=128)


class RunEventRow(SQLModel, table=True):
    """One streamed event, kept so a stream can be resumed from any sequence."""

    __tablename__ = "run_events"

    run_id: str = Field(primary_key=True, max_length=36)
    sequence: int = Field(sa_column=Column(BigInteger, primary_key=True))
    payload: bytes = Field(sa_column=Column(LargeBinary, nullable=False))  # a serialized RunEvent


class EngineInstance(SQLModel, table=True):
    __tablename__ = "engine_instances"

    id: str = Field(primary_key=True, max_length=64)
    heartbeat_at: datetime = Field(default_factory=utcnow)


class AgentAction(SQLModel, table=True):
    """The journal of what runs did (`agent_actions`, with run_id):
    one row per tool call."""

    __tablename__ = "agent_actions"
    __table_args__ = (Index("ix_agent_actions_run", "run_id"),)

    id: str = Field(primary_key=True, max_length=36)
    run_id: str = Field(max_length=36)
    user_id: str = Field(max_length=128)
    tool: str = Field(max_length=200)
    family: str = Field(max_length=32)
    status: str = Field(max_length=16)  # "ok" | "error"
    create_time: datetime = Field(default_factory=utcnow)


class SkillRun(SQLModel, table=True):
    """A skill applied in a run (`skill_runs`, run_id always set)."""

    __tablename__ = "skill_runs"
    __table_args__ = (Index("ix_skill_runs_run", "run_id"), Index("ix_skill_runs_skill", "skill_id"))

    id: str = Field(primary_key=True, max_length=36)
    run_id: str = Field(max_length=36)
    user_id: str = Field(max_length=128)
    skill_id: str = Field(max_length=36)
    name: str = Field(max_length=64)
    invocation: str = Field(max_length=16)  # "manual" | "auto"
    create_time: datetime = Field(default_factory=utcnow)
