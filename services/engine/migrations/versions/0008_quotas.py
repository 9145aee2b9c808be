"""The per-user run quotas: each run's creation time by the engine's clock
(`created_at`; a run's `started_at` is the database's clock on PostgreSQL),
and indexes to count a user's running runs and the runs they created in the
last minute before every new run. Existing runs take their start time.

Revision ID: engine_0008_quotas
Revises: engine_0007_webhooks
"""

import sqlalchemy as sa
from alembic import op

revision = "engine_0008_quotas"
down_revision = "engine_0007_webhooks"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("agent_runs") as batch:
        batch.add_column(sa.Column("created_at", sa.DateTime(timezone=True), nullable=True))
    op.execute("UPDATE agent_runs SET created_at = started_at")
    with op.batch_alter_table("agent_runs") as batch:
        batch.alter_column("created_at", existing_type=sa.DateTime(timezone=True), nullable=False)
    op.create_index("ix_agent_runs_user_status", "agent_runs", ["user_id", "status"])
    op.create_index("ix_agent_runs_user_created_at", "agent_runs", ["user_id", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_agent_runs_user_created_at", table_name="agent_runs")
    op.drop_index("ix_agent_runs_user_status", table_name="agent_runs")
    with op.batch_alter_table("agent_runs") as batch:
        batch.drop_column("created_at")
