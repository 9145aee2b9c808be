"""Remote A2A agents: an agent registered by the URL of its agent card
(``agents.remote_card_url``, "" for an agent that runs here) keeps what its
card said: its name, description and whether it streams.

Revision ID: threads_0008_remote_agents
Revises: threads_0007_agent_projects
"""

import sqlalchemy as sa
from alembic import op

revision = "threads_0008_remote_agents"
down_revision = "threads_0007_agent_projects"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("agents") as batch:
        batch.add_column(sa.Column("remote_card_url", sa.String(2048), nullable=False, server_default=""))
        batch.add_column(sa.Column("remote_card_name", sa.String(), nullable=False, server_default=""))
        batch.add_column(sa.Column("remote_description", sa.String(), nullable=False, server_default=""))
        batch.add_column(
            sa.Column("remote_streaming", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("agents") as batch:
        for column in ("remote_streaming", "remote_description", "remote_card_name", "remote_card_url"):
            batch.drop_column(column)
