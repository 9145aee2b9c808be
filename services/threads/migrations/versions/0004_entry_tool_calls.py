"""Entries keep the tool calls of an assistant turn and the call id of a tool
result, so a conversation's later runs replay tool turns to the model.

Revision ID: threads_0004
Revises: threads_0003
"""

import sqlalchemy as sa
from alembic import op

revision = "threads_0004"
down_revision = "threads_0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("entries") as batch:
        batch.add_column(sa.Column("tool_calls_json", sa.String(), nullable=False, server_default="[]"))
        batch.add_column(sa.Column("tool_call_id", sa.String(), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("entries") as batch:
        batch.drop_column("tool_call_id")
        batch.drop_column("tool_calls_json")
