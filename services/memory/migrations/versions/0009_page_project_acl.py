"""Pages shared with projects: a project whose members may read a page, or
whose editors and owners may edit it. Membership itself stays in
project_members and is read at each call.

Revision ID: memory_0009
Revises: memory_0008
"""

import sqlalchemy as sa
from alembic import op

revision = "memory_0009"
down_revision = "memory_0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "page_project_acl",
        sa.Column("page_id", sa.String(36), primary_key=True),
        sa.Column("project_id", sa.String(128), primary_key=True),
        sa.Column("role", sa.String(16), nullable=False),
    )
    op.create_index("ix_page_project_acl_project", "page_project_acl", ["project_id", "page_id"])


def downgrade() -> None:
    op.drop_table("page_project_acl")
