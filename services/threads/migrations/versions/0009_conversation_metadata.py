"""threads.metadata_json: a conversation's client labels (Conversation.metadata).

Revision ID: threads_0009_conv_metadata
Revises: threads_0008_remote_agents
"""

import sqlalchemy as sa
from alembic import op

revision = "threads_0009_conv_metadata"
down_revision = "threads_0008_remote_agents"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("threads") as batch:
        batch.add_column(sa.Column("metadata_json", sa.String(), nullable=False, server_default="{}"))


def downgrade() -> None:
    with op.batch_alter_table("threads") as batch:
        batch.drop_column("metadata_json")
