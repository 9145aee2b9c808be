"""A run that waited for approval records the user's decision on its
proposal ("accepted" or "refused") and is then done.

Revision ID: engine_0004
Revises: engine_0003
"""

import sqlalchemy as sa
from alembic import op

revision = "engine_0004"
down_revision = "engine_0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("agent_runs") as batch:
        batch.add_column(sa.Column("approval", sa.String(16), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("agent_runs") as batch:
        batch.drop_column("approval")
