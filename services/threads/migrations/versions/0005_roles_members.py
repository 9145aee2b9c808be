"""Agents gain an owner and members (only members ask an agent or read its
thread), and the registry's writes an audit log. Agents registered before
have no recorded user: their owner stays "" until their next caller claims
them (services/threads/access.py).

Revision ID: threads_0005_roles
Revises: threads_0004
"""

import sqlalchemy as sa
from alembic import op

revision = "threads_0005_roles"
down_revision = "threads_0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("agents") as batch:
        batch.add_column(sa.Column("owner_id", sa.String(128), nullable=False, server_default=""))
    op.create_table(
        "agent_members",
        sa.Column("agent_id", sa.String(64), primary_key=True),
        sa.Column("user_id", sa.String(128), primary_key=True),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "threads_audit_events",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("actor", sa.String(128), nullable=False),
        sa.Column("actor_role", sa.String(16), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("target", sa.String(128), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_threads_audit_events_time_id", "threads_audit_events", ["create_time", "id"])


def downgrade() -> None:
    op.drop_table("threads_audit_events")
    op.drop_table("agent_members")
    with op.batch_alter_table("agents") as batch:
        batch.drop_column("owner_id")
