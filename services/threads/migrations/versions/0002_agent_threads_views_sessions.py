"""Live agent threads (one per agent), archived conversations, the ForPair
index, provider sessions.

Revision ID: threads_0002
Revises: threads_0001
"""

import sqlalchemy as sa
from alembic import op

revision = "threads_0002"
down_revision = "threads_0001"
branch_labels = None
depends_on = None

LIVE_AGENT = "kind = 'agent' AND archive_time IS NULL"
LIVE_SESSION = "release_time IS NULL"


def upgrade() -> None:
    # A nullable column: a plain ALTER TABLE ADD COLUMN on both databases.
    op.add_column("threads", sa.Column("archive_time", sa.DateTime(timezone=True), nullable=True))
    op.create_index(
        "uq_threads_live_agent",
        "threads",
        ["agent_id"],
        unique=True,
        sqlite_where=sa.text(LIVE_AGENT),
        postgresql_where=sa.text(LIVE_AGENT),
    )
    op.create_index(
        "ix_entries_thread_pair_sequence", "entries", ["thread_id", "requester", "target", "sequence"]
    )
    op.create_table(
        "provider_sessions",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("agent_thread_id", sa.String(36), sa.ForeignKey("threads.id"), nullable=False),
        sa.Column("provider_id", sa.String(64), nullable=False),
        sa.Column("native_session_id", sa.String(256), nullable=False),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("release_time", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index(
        "uq_provider_sessions_live",
        "provider_sessions",
        ["agent_thread_id", "provider_id"],
        unique=True,
        sqlite_where=sa.text(LIVE_SESSION),
        postgresql_where=sa.text(LIVE_SESSION),
    )
    op.create_index(
        "ix_provider_sessions_thread_provider",
        "provider_sessions",
        ["agent_thread_id", "provider_id", "create_time"],
    )


def downgrade() -> None:
    op.drop_table("provider_sessions")
    op.drop_index("ix_entries_thread_pair_sequence", table_name="entries")
    op.drop_index("uq_threads_live_agent", table_name="threads")
    with op.batch_alter_table("threads") as batch:
        batch.drop_column("archive_time")
