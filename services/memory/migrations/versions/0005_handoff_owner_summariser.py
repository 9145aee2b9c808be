"""Handoff summaries serve conversations too: a conversation's summary is
private to its user. Each summary also records who folded it last (the rules
or the summary model) and why the model did not, when it failed.

Revision ID: memory_0005
Revises: memory_0004
"""

import sqlalchemy as sa
from alembic import op

revision = "memory_0005"
down_revision = "memory_0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("handoff_summaries") as batch:
        batch.add_column(sa.Column("owner_user_id", sa.String(128), nullable=True))
        batch.add_column(sa.Column("summariser", sa.String(), nullable=False, server_default=""))
        batch.add_column(sa.Column("fallback_reason", sa.String(), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("handoff_summaries") as batch:
        batch.drop_column("fallback_reason")
        batch.drop_column("summariser")
        batch.drop_column("owner_user_id")
