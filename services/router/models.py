"""Tables of the router service: the skill catalog, per-user enablement and
auto_use overrides, "not relevant" feedback (counter-examples), and the
catalog revision that keeps every replica's in-memory index current, and
the audit log of catalog writes."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, ForeignKey, Index, LargeBinary, String, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from services.shared.audit import AuditColumns
from services.shared.time import utcnow


class Skill(SQLModel, table=True):
    __tablename__ = "skills"
    __table_args__ = (
        UniqueConstraint("name", name="uq_skills_name"),
        UniqueConstraint("create_request_id", name="uq_skills_create_request_id"),
    )

    id: str = Field(primary_key=True, max_length=36)
    # A slug, what users type after "/" to force the skill.
    name: str = Field(max_length=64)
    # What users would say to ask for it; what the Skill Router scores.
    description: str = Field(default="", sa_column=Column(Text, nullable=False))
    # The instructions the Skill Runner applies.
    body: str = Field(default="", sa_column=Column(Text, nullable=False))
    # Built-in skills are only ever used when forced (by name or from the menu).
    builtin: bool = False
    auto_use: bool = False
    # The request_id of CreateSkill, for idempotent retries (seeded: none).
    create_request_id: str | None = Field(default=None, max_length=128)
    create_time: datetime = Field(default_factory=utcnow)
    update_time: datetime = Field(default_factory=utcnow)


class SkillEnablement(SQLModel, table=True):
    """A user's departure from the defaults (enabled, catalog auto_use); no
    row means both defaults."""

    __tablename__ = "skill_enablements"

    user_id: str = Field(primary_key=True, max_length=128)
    skill_id: str = Field(
        sa_column=Column(String(36), ForeignKey("skills.id", ondelete="CASCADE"), primary_key=True)
    )
    enabled: bool = True
    # None: the catalog's auto_use.
    auto_use: bool | None = None
    update_time: datetime = Field(default_factory=utcnow)


class SkillFeedback(SQLModel, table=True):
    """ "This skill was not relevant" for a request: a counter-example. Keeps the
    skill's name: the skill may be renamed or deleted later."""

    __tablename__ = "skill_feedback"
    __table_args__ = (UniqueConstraint("user_id", "request_id", name="uq_skill_feedback_request"),)

    id: str = Field(primary_key=True, max_length=36)
    user_id: str = Field(max_length=128, index=True)
    request_id: str = Field(max_length=128)
    skill_id: str = Field(max_length=36)
    skill_name: str = Field(max_length=64)
    request_text: str = Field(sa_column=Column(Text, nullable=False))
    run_id: str = Field(default="", max_length=64)
    create_time: datetime = Field(default_factory=utcnow)


class SkillVector(SQLModel, table=True):
    """A skill's embedding under one embedder: what the router's index loads
    at start-up instead of embedding the catalog again. Only rows of the
    configured embedder and dimension, of the skill's current text, are used,
    so two embedders' vectors are never compared."""

    __tablename__ = "skill_vectors"

    skill_id: str = Field(
        sa_column=Column(String(36), ForeignKey("skills.id", ondelete="CASCADE"), primary_key=True)
    )
    embedder: str = Field(primary_key=True, max_length=32)
    dimension: int
    # sha256 of the embedded text (skill_router.embedding_text): an edited
    # description makes the row stale.
    text_hash: str = Field(max_length=64)
    vector: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    update_time: datetime = Field(default_factory=utcnow)


class CatalogRevision(SQLModel, table=True):
    """One row, bumped in the transaction of every catalog write: a replica
    compares it with its index's before routing."""

    __tablename__ = "catalog_revision"

    id: int = Field(default=1, primary_key=True)
    revision: int = 0


class RouterAuditEvent(AuditColumns, table=True):
    """A catalog write by an admin (skill.create, skill.update, skill.delete),
    written in the write's transaction."""

    __tablename__ = "router_audit_events"
    __table_args__ = (Index("ix_router_audit_events_time_id", "create_time", "id"),)
