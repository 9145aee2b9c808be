"""Tables of the router service. The catalog of skills; per-user enablement
arrives with the full catalog in a later issue (its own table, keyed by
user and skill id)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from services.shared.time import utcnow


class Skill(SQLModel, table=True):
    __tablename__ = "skills"
    __table_args__ = (UniqueConstraint("name", name="uq_skills_name"),)

    id: str = Field(primary_key=True, max_length=36)
    # A slug, what users type after "/" to force the skill.
    name: str = Field(max_length=64)
    # What users would say to ask for it; what the Skill Router scores.
    description: str = Field(default="", sa_column=Column(Text, nullable=False))
    # The instructions the Skill Runner applies.
    body: str = Field(default="", sa_column=Column(Text, nullable=False))
    # Built-in skills are only ever used when forced (seed 002 P2-T13).
    builtin: bool = False
    auto_use: bool = False
    create_time: datetime = Field(default_factory=utcnow)
    update_time: datetime = Field(default_factory=utcnow)
