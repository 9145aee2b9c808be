"""Run webhooks: the URL a run names (agent_runs.webhook_url), the outbox
of ended runs whose record is to be POSTed there (written with the run's
end, claimed by a lease), the journal of delivery attempts, and users'
default webhooks of conversations and agents.

Revision ID: engine_0007_webhooks
Revises: engine_0006_schedules
"""

import sqlalchemy as sa
from alembic import op

revision = "engine_0007_webhooks"
down_revision = "engine_0006_schedules"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("agent_runs") as batch:
        batch.add_column(sa.Column("webhook_url", sa.String(length=2048), nullable=True))
    op.create_table(
        "webhook_outbox",
        sa.Column("run_id", sa.String(length=36), primary_key=True),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("webhook_id", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("lease_owner", sa.String(length=64), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_webhook_outbox_due", "webhook_outbox", ["state", "next_attempt_at"])
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.String(length=36), primary_key=True),
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=False),
        sa.Column("error", sa.String(), nullable=False),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
    )
    op.create_index("ix_webhook_deliveries_run", "webhook_deliveries", ["run_id", "attempt"])
    op.create_table(
        "webhook_defaults",
        sa.Column("user_id", sa.String(length=128), primary_key=True),
        sa.Column("target_kind", sa.String(length=16), primary_key=True),
        sa.Column("target_id", sa.String(length=64), primary_key=True),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("update_time", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("webhook_defaults")
    op.drop_index("ix_webhook_deliveries_run", table_name="webhook_deliveries")
    op.drop_table("webhook_deliveries")
    op.drop_index("ix_webhook_outbox_due", table_name="webhook_outbox")
    op.drop_table("webhook_outbox")
    with op.batch_alter_table("agent_runs") as batch:
        batch.drop_column("webhook_url")
