"""A run's context: who started it, the page the user was on and the blocks
they selected (engine.v1.RunContext as JSON). Existing runs keep "{}": their
regime follows from their surface when they are read.

Revision ID: engine_0010_run_context
Revises: engine_0009_project_defaults
"""

import sqlalchemy as sa
from alembic import op

revision = "engine_0010_run_context"
down_revision = "engine_0009_project_defaults"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("agent_runs") as batch:
        batch.add_column(sa.Column("run_context_json", sa.Text(), nullable=False, server_default="{}"))


def downgrade() -> None:
    with op.batch_alter_table("agent_runs") as batch:
        batch.drop_column("run_context_json")
