"""Agents, threads (conversations and agent threads) and entries.

Revision ID: threads_0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "threads_0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "agents",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("display_name", sa.String(), nullable=False),
        sa.Column("persona", sa.String(), nullable=False),
        sa.Column("provider_id", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("injection_strategy", sa.Integer(), nullable=False),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("update_time", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "threads",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=True),
        sa.Column("agent_id", sa.String(64), nullable=True),
        sa.Column("request_id", sa.String(128), nullable=True),
        sa.Column("title", sa.String(), nullable=False),
        sa.Column("title_auto", sa.Boolean(), nullable=False),
        sa.Column("pinned", sa.Boolean(), nullable=False),
        sa.Column("sources_json", sa.String(), nullable=False),
        sa.Column("last_sequence", sa.BigInteger(), nullable=False),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("update_time", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("user_id", "request_id", name="uq_threads_user_request"),
    )
    op.create_index("ix_threads_user_pinned_update", "threads", ["user_id", "pinned", "update_time"])
    op.create_table(
        "entries",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("thread_id", sa.String(36), sa.ForeignKey("threads.id"), nullable=False),
        sa.Column("sequence", sa.BigInteger(), nullable=False),
        sa.Column("requester", sa.String(), nullable=False),
        sa.Column("target", sa.String(), nullable=False),
        sa.Column("correlation_id", sa.String(), nullable=False),
        sa.Column("role", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("request_id", sa.String(128), nullable=True),
        sa.Column("request_index", sa.Integer(), nullable=False),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("thread_id", "sequence", name="uq_entries_thread_sequence"),
        sa.UniqueConstraint("thread_id", "request_id", "request_index", name="uq_entries_thread_request"),
    )
    op.create_index(
        "ix_entries_thread_correlation_sequence", "entries", ["thread_id", "correlation_id", "sequence"]
    )


def downgrade() -> None:
    op.drop_table("entries")
    op.drop_table("threads")
    op.drop_table("agents")
