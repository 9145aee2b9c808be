"""The table every part of the memory service shares: revision counters
(services.memory.revisions reads and bumps them). Each concept's own tables
are in its package's ``models`` module."""

from __future__ import annotations

from sqlmodel import Field, SQLModel


class Revision(SQLModel, table=True):
    """A counter per (project, scope), bumped in the same transaction as
    every write of that scope ("notes", "live"). Replicas compare it with what
    they cached instead of trusting process memory."""

    __tablename__ = "memory_revisions"

    project_id: str = Field(primary_key=True, max_length=128)
    scope: str = Field(primary_key=True, max_length=16)
    revision: int = 0
