"""Notes and personal settings.

Revision ID: memory_0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "memory_0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "notes",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("owner_user_id", sa.String(128), nullable=False),
        sa.Column("project_id", sa.String(128), nullable=False),
        sa.Column("kind", sa.Integer(), nullable=False),
        sa.Column("title", sa.String(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("tags_json", sa.String(), nullable=False),
        sa.Column("author_agent_id", sa.String(), nullable=False),
        sa.Column("request_id", sa.String(128), nullable=True),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("update_time", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("owner_user_id", "request_id", name="uq_notes_owner_request"),
    )
    op.create_index("ix_notes_owner_project_update", "notes", ["owner_user_id", "project_id", "update_time"])
    op.create_table(
        "personal_settings",
        sa.Column("user_id", sa.String(128), primary_key=True),
        sa.Column("display_name", sa.String(), nullable=False),
        sa.Column("avatar_json", sa.Text(), nullable=False, server_default="{}"),
        sa.Column("instruction_page_ids_json", sa.Text(), nullable=False, server_default="[]"),
        sa.Column("active_instruction_page_id", sa.String(), nullable=False),
        sa.Column("chat_mode", sa.Integer(), nullable=False),
        sa.Column("default_model", sa.String(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("personal_settings")
    op.drop_index("ix_notes_owner_project_update", table_name="notes")
    op.drop_table("notes")
