"""threads_leases (work done once per interval across replicas: the
retention prune of archived conversations).

Revision ID: threads_0006_retention
Revises: threads_0005_roles
"""

import sqlalchemy as sa
from alembic import op

revision = "threads_0006_retention"
down_revision = "threads_0005_roles"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "threads_leases",
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("holder", sa.String(64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("threads_leases")
