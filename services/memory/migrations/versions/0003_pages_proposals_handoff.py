"""Pages with versions and ACLs, instruction pages, proposals, handoff summaries.

Revision ID: memory_0003
Revises: memory_0002
"""

revision = "memory_0003"
down_revision = "memory_0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
