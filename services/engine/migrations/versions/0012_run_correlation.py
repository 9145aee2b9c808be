"""An ask's correlation id on its run, so a run is found by the correlation
it answers (an A2A task by its contextId) without reading the thread's
entries. Existing asks keep none: their correlation stays on their entries.

Revision ID: engine_0012_run_correlation
Revises: engine_0011_run_language
"""

import sqlalchemy as sa
from alembic import op

revision = "engine_0012_run_correlation"
down_revision = "engine_0011_run_language"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("agent_runs") as batch:
        batch.add_column(sa.Column("correlation_id", sa.String(length=128), nullable=True))
        batch.create_index("ix_agent_runs_conversation_correlation", ["conversation_id", "correlation_id"])


def downgrade() -> None:
    with op.batch_alter_table("agent_runs") as batch:
        batch.drop_index("ix_agent_runs_conversation_correlation")
        batch.drop_column("correlation_id")
