"""Pages with versions and ACLs, instruction pages, proposals, handoff summaries.

Revision ID: memory_0003
Revises: memory_0002
"""

import sqlalchemy as sa
from alembic import op

revision = "memory_0003"
down_revision = "memory_0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pages",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("owner_user_id", sa.String(128), nullable=False),
        sa.Column("title", sa.String(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("request_id", sa.String(128), nullable=True),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("update_time", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("owner_user_id", "request_id", name="uq_pages_owner_request"),
    )
    op.create_index("ix_pages_owner_update", "pages", ["owner_user_id", "update_time"])
    op.create_table(
        "page_versions",
        sa.Column("page_id", sa.String(36), primary_key=True),
        sa.Column("version", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("title", sa.String(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("author_user_id", sa.String(128), nullable=False),
        sa.Column("restored_from_version", sa.Integer(), nullable=False),
        sa.Column("proposal_id", sa.String(36), nullable=False),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "page_acl",
        sa.Column("page_id", sa.String(36), primary_key=True),
        sa.Column("user_id", sa.String(128), primary_key=True),
        sa.Column("role", sa.String(16), nullable=False),
    )
    op.create_index("ix_page_acl_user", "page_acl", ["user_id", "page_id"])
    op.create_table(
        "proposals",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("page_id", sa.String(36), nullable=False),
        sa.Column("page_owner_user_id", sa.String(128), nullable=False),
        sa.Column("proposer_user_id", sa.String(128), nullable=False),
        sa.Column("proposer_agent_id", sa.String(128), nullable=False),
        sa.Column("base_version", sa.Integer(), nullable=False),
        sa.Column("proposed_body", sa.Text(), nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("state", sa.Integer(), nullable=False),
        sa.Column("accepted_version", sa.Integer(), nullable=False),
        sa.Column("decision_reason", sa.String(), nullable=False),
        sa.Column("request_id", sa.String(128), nullable=True),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decide_time", sa.DateTime(timezone=True), nullable=True),
        sa.UniqueConstraint("proposer_user_id", "request_id", name="uq_proposals_proposer_request"),
    )
    op.create_index("ix_proposals_page_create", "proposals", ["page_id", "create_time"])
    op.create_index("ix_proposals_proposer_create", "proposals", ["proposer_user_id", "create_time"])
    op.create_table(
        "handoff_summaries",
        sa.Column("thread_id", sa.String(128), primary_key=True),
        sa.Column("state_json", sa.Text(), nullable=False),
        sa.Column("last_folded_sequence", sa.BigInteger(), nullable=False),
        sa.Column("last_checkpoint_reason", sa.Integer(), nullable=False),
        sa.Column("checkpoint_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("update_time", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "handoff_entries",
        sa.Column("thread_id", sa.String(128), primary_key=True),
        sa.Column("sequence", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("author_agent_id", sa.String(128), nullable=False),
        sa.Column("requester", sa.String(128), nullable=False),
        sa.Column("correlation_id", sa.String(128), nullable=False),
        sa.Column("kind", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("handoff_entries")
    op.drop_table("handoff_summaries")
    op.drop_index("ix_proposals_proposer_create", table_name="proposals")
    op.drop_index("ix_proposals_page_create", table_name="proposals")
    op.drop_table("proposals")
    op.drop_index("ix_page_acl_user", table_name="page_acl")
    op.drop_table("page_acl")
    op.drop_table("page_versions")
    op.drop_index("ix_pages_owner_update", table_name="pages")
    op.drop_table("pages")
