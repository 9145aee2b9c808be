"""Durable notes v2 (embeddings, updates), project context, live state.

Revision ID: memory_0002
Revises: memory_0001
"""

revision = "memory_0002"
down_revision = "memory_0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
