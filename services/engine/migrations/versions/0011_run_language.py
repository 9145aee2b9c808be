"""The language a run writes its texts in (notices, proposals, refusals, the
conversation's title): "en" or "fr". Existing runs were all written in
English.

Revision ID: engine_0011_run_language
Revises: engine_0010_run_context
"""

import sqlalchemy as sa
from alembic import op

revision = "engine_0011_run_language"
down_revision = "engine_0010_run_context"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("agent_runs") as batch:
        batch.add_column(sa.Column("language", sa.String(length=8), nullable=False, server_default="en"))


def downgrade() -> None:
    with op.batch_alter_table("agent_runs") as batch:
        batch.drop_column("language")
