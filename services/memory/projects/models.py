"""Tables of projects, their members, the names an upgrade kept for each
user, and the memory service's audit log."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index
from sqlmodel import Field, SQLModel

from services.shared.audit import AuditColumns
from services.shared.time import utcnow


class ProjectRow(SQLModel, table=True):
    """A project: the unit of sharing of memory, context, live state and agents."""

    __tablename__ = "projects"

    id: str = Field(primary_key=True, max_length=128)
    display_name: str = Field(default="", max_length=200)
    owner_user_id: str = Field(max_length=128)
    personal: bool = False
    # NotePolicy of projects.proto (1 = review, 2 = auto).
    note_policy: int = 1
    create_time: datetime = Field(default_factory=utcnow)
    update_time: datetime = Field(default_factory=utcnow)


class ProjectMemberRow(SQLModel, table=True):
    """A user's role in a project (ProjectRole of projects.proto)."""

    __tablename__ = "project_members"
    __table_args__ = (Index("ix_project_members_user", "user_id", "project_id"),)

    project_id: str = Field(primary_key=True, max_length=128)
    user_id: str = Field(primary_key=True, max_length=128)
    role: int = 1
    update_time: datetime = Field(default_factory=utcnow)


class ProjectAlias(SQLModel, table=True):
    """The name a user used for a project before projects were shared, when
    that name went to another user's project at the upgrade: the user's
    requests naming it still reach their own project."""

    __tablename__ = "project_aliases"

    user_id: str = Field(primary_key=True, max_length=128)
    alias: str = Field(primary_key=True, max_length=128)
    project_id: str = Field(max_length=128)


class MemoryAuditEvent(AuditColumns, table=True):
    """A project's creation, change or membership change, written in the
    write's transaction."""

    __tablename__ = "memory_audit_events"
    __table_args__ = (Index("ix_memory_audit_events_time_id", "create_time", "id"),)
