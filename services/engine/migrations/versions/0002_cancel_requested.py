"""agent_runs.cancel_requested: CancelRun on one replica stops a run that
executes on another (its engine polls the flag).

Revision ID: engine_0002
Revises: engine_0001
"""

import sqlalchemy as sa
from alembic import op

revision = "engine_0002"
down_revision = "engine_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("agent_runs") as batch:
        batch.add_column(
            sa.Column("cancel_requested", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("agent_runs") as batch:
        batch.drop_column("cancel_requested")
