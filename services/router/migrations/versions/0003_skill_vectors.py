"""Stored skill embeddings, each with its embedder and dimension: the index
loads them at start-up and only what has none for the configured embedder
is embedded (``python -m services.router reindex``, or in the background).

Revision ID: router_0003
Revises: router_0002
"""

import sqlalchemy as sa
from alembic import op

revision = "router_0003"
down_revision = "router_0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "skill_vectors",
        sa.Column(
            "skill_id", sa.String(36), sa.ForeignKey("skills.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("embedder", sa.String(32), primary_key=True),
        sa.Column("dimension", sa.Integer(), nullable=False),
        sa.Column("text_hash", sa.String(64), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.Column("update_time", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("skill_vectors")
