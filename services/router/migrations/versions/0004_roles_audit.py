"""The audit log of catalog writes (admins only since roles exist).

Revision ID: router_0004_roles
Revises: router_0003
"""

import sqlalchemy as sa
from alembic import op

revision = "router_0004_roles"
down_revision = "router_0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "router_audit_events",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("actor", sa.String(128), nullable=False),
        sa.Column("actor_role", sa.String(16), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("target", sa.String(128), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_router_audit_events_time_id", "router_audit_events", ["create_time", "id"])


def downgrade() -> None:
    op.drop_table("router_audit_events")
