"""A proposal names the run that made it, so that the user's decision
settles that run (waiting_approval -> done, with the decision).

Revision ID: memory_0006
Revises: memory_0005
"""

import sqlalchemy as sa
from alembic import op

revision = "memory_0006"
down_revision = "memory_0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("proposals") as batch:
        batch.add_column(sa.Column("run_id", sa.String(64), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("proposals") as batch:
        batch.drop_column("run_id")
