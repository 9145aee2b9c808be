"""schedules (scheduled runs: cron, time zone, target, next tick, counts)
and engine_leases (work done once per interval across replicas).

Revision ID: engine_0006_schedules
Revises: engine_0005
"""

import sqlalchemy as sa
from alembic import op

revision = "engine_0006_schedules"
down_revision = "engine_0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("request_id", sa.String(128), nullable=True),
        sa.Column("cron", sa.String(200), nullable=False),
        sa.Column("time_zone", sa.String(64), nullable=False),
        sa.Column("message", sa.String(), nullable=False),
        sa.Column("conversation_id", sa.String(36), nullable=True),
        sa.Column("agent_id", sa.String(128), nullable=True),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("next_run_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("run_count", sa.Integer(), nullable=False),
        sa.Column("last_run_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_run_id", sa.String(36), nullable=True),
        sa.Column("last_error", sa.String(), nullable=False),
        sa.Column("missed_count", sa.Integer(), nullable=False),
        sa.Column("last_missed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("pending_tick_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("pending_since", sa.DateTime(timezone=True), nullable=True),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("user_id", "request_id", name="uq_schedules_user_request"),
    )
    op.create_index("ix_schedules_user_created", "schedules", ["user_id", "create_time", "id"])
    op.create_index("ix_schedules_due", "schedules", ["paused", "next_run_at"])
    op.create_table(
        "engine_leases",
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("holder", sa.String(64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("engine_leases")
    op.drop_table("schedules")
