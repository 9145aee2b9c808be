"""agent_runs (one row per run: status, model, usage), run_events (its
streamed events, the resume point of every stream), engine_instances.

Revision ID: engine_0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "engine_0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "agent_runs",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("agent_id", sa.String(), nullable=True),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("conversation_id", sa.String(36), nullable=True),
        sa.Column("parent_run_id", sa.String(), nullable=True),
        sa.Column("surface", sa.String(), nullable=False),
        sa.Column("trigger_id", sa.String(), nullable=True),
        sa.Column("trigger_payload_json", sa.Text(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("provider", sa.String(), nullable=True),
        sa.Column("model", sa.String(), nullable=True),
        sa.Column("tokens_in", sa.Integer(), nullable=False),
        sa.Column("tokens_out", sa.Integer(), nullable=False),
        sa.Column("credits", sa.Float(), nullable=False),
        sa.Column("skills_json", sa.Text(), nullable=False),
        sa.Column("sources_json", sa.Text(), nullable=False),
        sa.Column("router_decision_json", sa.Text(), nullable=False),
        sa.Column("layers_json", sa.Text(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("request_id", sa.String(128), nullable=True),
        sa.Column("requested_model", sa.String(), nullable=False),
        sa.Column("instance_id", sa.String(64), nullable=False),
        sa.UniqueConstraint("user_id", "request_id", name="uq_agent_runs_user_request"),
    )
    op.create_index("ix_agent_runs_conversation", "agent_runs", ["conversation_id"])
    op.create_index("ix_agent_runs_started_at", "agent_runs", ["started_at"])
    op.create_index("ix_agent_runs_status_instance", "agent_runs", ["status", "instance_id"])
    op.create_table(
        "run_events",
        sa.Column("run_id", sa.String(36), primary_key=True),
        sa.Column("sequence", sa.BigInteger(), primary_key=True),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
    )
    op.create_table(
        "engine_instances",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("engine_instances")
    op.drop_table("run_events")
    op.drop_table("agent_runs")
