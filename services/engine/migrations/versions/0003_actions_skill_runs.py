"""agent_actions (the journal of tool calls, with run_id) and skill_runs
(the skills applied in each run, with their invocation): what a run did,
kept beside the run for its Sources panel and audit.

Revision ID: engine_0003
Revises: engine_0002
"""

import sqlalchemy as sa
from alembic import op

revision = "engine_0003"
down_revision = "engine_0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "agent_actions",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("run_id", sa.String(36), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("tool", sa.String(200), nullable=False),
        sa.Column("family", sa.String(32), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_agent_actions_run", "agent_actions", ["run_id"])
    op.create_table(
        "skill_runs",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("run_id", sa.String(36), nullable=False),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("skill_id", sa.String(36), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("invocation", sa.String(16), nullable=False),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_skill_runs_run", "skill_runs", ["run_id"])
    op.create_index("ix_skill_runs_skill", "skill_runs", ["skill_id"])


def downgrade() -> None:
    op.drop_table("skill_runs")
    op.drop_table("agent_actions")
