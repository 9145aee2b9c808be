"""Rotation: the segments of agent threads, one open per thread; existing agent
threads get their open segment 1 covering the entries they hold.

Revision ID: threads_0003
Revises: threads_0002
"""

import sqlalchemy as sa
from alembic import op

revision = "threads_0003"
down_revision = "threads_0002"
branch_labels = None
depends_on = None

OPEN = "status = 'open'"


def upgrade() -> None:
    op.create_table(
        "segments",
        sa.Column("thread_id", sa.String(36), sa.ForeignKey("threads.id"), primary_key=True),
        sa.Column("number", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("first_sequence", sa.BigInteger(), nullable=False),
        sa.Column("last_sequence", sa.BigInteger(), nullable=False),
        sa.Column("entry_count", sa.Integer(), nullable=False),
        sa.Column("char_count", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(8), nullable=False),
        sa.Column("handoff_status", sa.String(8), nullable=False),
        sa.Column("handoff_summary", sa.String(), nullable=True),
        sa.Column("open_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("close_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("handoff_time", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index(
        "uq_segments_open",
        "segments",
        ["thread_id"],
        unique=True,
        sqlite_where=sa.text(OPEN),
        postgresql_where=sa.text(OPEN),
    )
    # Agent threads written before rotation: one open segment holding all
    # their entries; the first append after the upgrade closes it if it is
    # past the thresholds.
    op.execute(
        """
        INSERT INTO segments (thread_id, number, first_sequence, last_sequence, entry_count,
                              char_count, status, handoff_status, open_time)
        SELECT t.id, 1, 1, t.last_sequence, COUNT(e.id), COALESCE(SUM(LENGTH(e.content)), 0),
               'open', 'none', t.create_time
        FROM threads t LEFT JOIN entries e ON e.thread_id = t.id
        WHERE t.kind = 'agent'
        GROUP BY t.id, t.last_sequence, t.create_time
        """
    )


def downgrade() -> None:
    op.drop_index("uq_segments_open", table_name="segments")
    op.drop_table("segments")
