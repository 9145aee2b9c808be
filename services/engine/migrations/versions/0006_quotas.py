"""Indexes for the per-user run quotas: a user's running runs, and the runs
they started in the last minute, are counted before every new run.

Revision ID: engine_0006_quotas
Revises: engine_0005
"""

from alembic import op

revision = "engine_0006_quotas"
down_revision = "engine_0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_agent_runs_user_status", "agent_runs", ["user_id", "status"])
    op.create_index("ix_agent_runs_user_started_at", "agent_runs", ["user_id", "started_at"])


def downgrade() -> None:
    op.drop_index("ix_agent_runs_user_started_at", table_name="agent_runs")
    op.drop_index("ix_agent_runs_user_status", table_name="agent_runs")
