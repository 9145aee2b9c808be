"""Tables of pages, their versions and ACL, and proposals (memory service)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Index, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from services.shared.time import utcnow

# ProposalState of pages.proto.
PROPOSAL_PENDING = 1
PROPOSAL_ACCEPTED = 2
PROPOSAL_REFUSED = 3

# PageAcl.role values.
ROLE_READER = "reader"
ROLE_EDITOR = "editor"


class Page(SQLModel, table=True):
    """The head of a page: its current title, body and version number. The
    versions table holds every version, this row's included."""

    __tablename__ = "pages"
    __table_args__ = (
        # Idempotency: a retried create with the same request_id writes nothing.
        UniqueConstraint("owner_user_id", "request_id", name="uq_pages_owner_request"),
        Index("ix_pages_owner_update", "owner_user_id", "update_time"),
    )

    id: str = Field(primary_key=True, max_length=36)
    owner_user_id: str = Field(max_length=128)
    title: str = ""
    body: str = Field(default="", sa_column=Column(Text, nullable=False))
    version: int = 1
    request_id: str | None = Field(default=None, max_length=128)
    create_time: datetime = Field(default_factory=utcnow)
    update_time: datetime = Field(default_factory=utcnow)


class PageVersion(SQLModel, table=True):
    """One immutable version; (page_id, version) is unique, so two concurrent
    edits of the same version cannot both land."""

    __tablename__ = "page_versions"

    page_id: str = Field(primary_key=True, max_length=36)
    version: int = Field(primary_key=True)
    title: str = ""
    body: str = Field(default="", sa_column=Column(Text, nullable=False))
    author_user_id: str = Field(max_length=128)
    # 0 unless RestorePageVersion wrote it.
    restored_from_version: int = 0
    # "" unless AcceptProposal wrote it.
    proposal_id: str = Field(default="", max_length=36)
    create_time: datetime = Field(default_factory=utcnow)


class PageAcl(SQLModel, table=True):
    """Who besides the owner may read (reader) or read and edit (editor)."""

    __tablename__ = "page_acl"
    __table_args__ = (Index("ix_page_acl_user", "user_id", "page_id"),)

    page_id: str = Field(primary_key=True, max_length=36)
    user_id: str = Field(primary_key=True, max_length=128)
    role: str = Field(max_length=16)


class PageProjectAcl(SQLModel, table=True):
    """A project whose members may read (reader) or whose editors and owners
    may edit (editor) the page. The project id is the resolved one; who is a
    member is read from ``project_members`` at each call, never copied here."""

    __tablename__ = "page_project_acl"
    __table_args__ = (Index("ix_page_project_acl_project", "project_id", "page_id"),)

    page_id: str = Field(primary_key=True, max_length=36)
    project_id: str = Field(primary_key=True, max_length=128)
    role: str = Field(max_length=16)


class Proposal(SQLModel, table=True):
    """A proposed new body for a page, against the version current when made."""

    __tablename__ = "proposals"
    __table_args__ = (
        UniqueConstraint("proposer_user_id", "request_id", name="uq_proposals_proposer_request"),
        Index("ix_proposals_page_create", "page_id", "create_time"),
        Index("ix_proposals_proposer_create", "proposer_user_id", "create_time"),
    )

    id: str = Field(primary_key=True, max_length=36)
    page_id: str = Field(max_length=36)
    # Denormalised from the page so the owner's list needs no join; pages
    # never change owner.
    page_owner_user_id: str = Field(max_length=128)
    proposer_user_id: str = Field(max_length=128)
    proposer_agent_id: str = Field(default="", max_length=128)
    # The run that made it: the gateway settles that run with the decision.
    run_id: str = Field(default="", max_length=64)
    base_version: int
    proposed_body: str = Field(default="", sa_column=Column(Text, nullable=False))
    reason: str = ""
    state: int = PROPOSAL_PENDING
    accepted_version: int = 0
    decision_reason: str = ""
    request_id: str | None = Field(default=None, max_length=128)
    create_time: datetime = Field(default_factory=utcnow)
    decide_time: datetime | None = None
