"""Each note's vector records its dimension beside its embedder, so that a
search never compares vectors of two embedders or two dimensions; an index
lets the re-embedding find the notes of another embedder without a scan.

Revision ID: memory_0004
Revises: memory_0003
"""

import sqlalchemy as sa
from alembic import op

revision = "memory_0004"
down_revision = "memory_0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("notes") as batch:
        batch.add_column(sa.Column("embedding_dimension", sa.Integer(), nullable=False, server_default="0"))
    op.create_index("ix_notes_embedder", "notes", ["embedder", "embedding_dimension", "id"])


def downgrade() -> None:
    op.drop_index("ix_notes_embedder", table_name="notes")
    with op.batch_alter_table("notes") as batch:
        batch.drop_column("embedding_dimension")
