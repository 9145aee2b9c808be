"""Note proposals: what agents propose to promote into a project's memory,
waiting for a member's review.

Revision ID: memory_0008
Revises: memory_0007
"""

import sqlalchemy as sa
from alembic import op

revision = "memory_0008"
down_revision = "memory_0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "note_proposals",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("project_id", sa.String(128), nullable=False),
        sa.Column("proposer_user_id", sa.String(128), nullable=False),
        sa.Column("request_id", sa.String(128), nullable=True),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("author_agent_id", sa.String(128), nullable=False),
        sa.Column("kind", sa.Integer(), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("tags_json", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("target_note_id", sa.String(36), nullable=False),
        sa.Column("target_kind", sa.Integer(), nullable=False),
        sa.Column("target_title", sa.Text(), nullable=False),
        sa.Column("target_body", sa.Text(), nullable=False),
        sa.Column("target_tags_json", sa.Text(), nullable=False),
        sa.Column("target_update_time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("match_reason", sa.Text(), nullable=False),
        sa.Column("state", sa.Integer(), nullable=False),
        sa.Column("decided_by_user_id", sa.String(128), nullable=False),
        sa.Column("result_note_id", sa.String(64), nullable=False),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decide_time", sa.DateTime(timezone=True), nullable=True),
        sa.UniqueConstraint("proposer_user_id", "request_id", name="uq_note_proposals_proposer_request"),
    )
    op.create_index("ix_note_proposals_project_create", "note_proposals", ["project_id", "create_time", "id"])
    op.create_index("ix_note_proposals_project_state", "note_proposals", ["project_id", "state"])


def downgrade() -> None:
    op.drop_table("note_proposals")
