"""Durable notes v2 (content hash, embeddings, import source), project
context, live state, revision counters.

Revision ID: memory_0002
Revises: memory_0001
"""

import hashlib
import re
import unicodedata

import sqlalchemy as sa
from alembic import op

revision = "memory_0002"
down_revision = "memory_0001"
branch_labels = None
depends_on = None


def _content_hash(title: str, body: str) -> str:
    # A frozen copy of services.memory.notes.content_hash at this revision:
    # migrations must not change when the service's code does.
    parts = []
    for text in (title, body):
        decomposed = unicodedata.normalize("NFKD", text.casefold())
        bare = "".join(c for c in decomposed if not unicodedata.combining(c))
        parts.append(" ".join(re.findall(r"[^\W_]+", bare)))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def upgrade() -> None:
    with op.batch_alter_table("notes") as batch:
        batch.add_column(sa.Column("content_hash", sa.String(64), nullable=False, server_default=""))
        batch.add_column(sa.Column("embedding", sa.LargeBinary(), nullable=True))
        batch.add_column(sa.Column("embedder", sa.String(32), nullable=False, server_default=""))
        batch.add_column(sa.Column("source", sa.String(256), nullable=True))
        batch.add_column(sa.Column("source_hash", sa.String(64), nullable=False, server_default=""))
    # Existing notes get their hash; duplicates saved before the rule keep
    # distinct hashes (salted with their id) rather than failing the upgrade.
    connection = op.get_bind()
    notes = sa.table(
        "notes",
        sa.column("id", sa.String),
        sa.column("owner_user_id", sa.String),
        sa.column("project_id", sa.String),
        sa.column("title", sa.String),
        sa.column("body", sa.Text),
        sa.column("content_hash", sa.String),
    )
    seen: set[tuple[str, str, str]] = set()
    rows = connection.execute(
        sa.select(
            notes.c.id, notes.c.owner_user_id, notes.c.project_id, notes.c.title, notes.c.body
        ).order_by(notes.c.id)
    ).all()
    for note_id, owner, project, title, body in rows:
        digest = _content_hash(title, body)
        if (owner, project, digest) in seen:
            digest = hashlib.sha256(f"{digest}:{note_id}".encode()).hexdigest()
        seen.add((owner, project, digest))
        connection.execute(notes.update().where(notes.c.id == note_id).values(content_hash=digest))
    with op.batch_alter_table("notes") as batch:
        batch.create_unique_constraint(
            "uq_notes_owner_project_content", ["owner_user_id", "project_id", "content_hash"]
        )
        batch.create_unique_constraint(
            "uq_notes_owner_project_source", ["owner_user_id", "project_id", "source"]
        )
        batch.create_index("ix_notes_owner_create", ["owner_user_id", "create_time", "id"])
    op.create_table(
        "memory_revisions",
        sa.Column("owner_user_id", sa.String(128), primary_key=True),
        sa.Column("project_id", sa.String(128), primary_key=True),
        sa.Column("scope", sa.String(16), primary_key=True),
        sa.Column("revision", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "project_contexts",
        sa.Column("owner_user_id", sa.String(128), primary_key=True),
        sa.Column("project_id", sa.String(128), primary_key=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("update_time", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "live_state",
        sa.Column("owner_user_id", sa.String(128), primary_key=True),
        sa.Column("project_id", sa.String(128), primary_key=True),
        sa.Column("agent_id", sa.String(128), primary_key=True),
        sa.Column("activity", sa.Text(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("update_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expire_time", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("live_state")
    op.drop_table("project_contexts")
    op.drop_table("memory_revisions")
    with op.batch_alter_table("notes") as batch:
        batch.drop_index("ix_notes_owner_create")
        batch.drop_constraint("uq_notes_owner_project_source", type_="unique")
        batch.drop_constraint("uq_notes_owner_project_content", type_="unique")
        batch.drop_column("source_hash")
        batch.drop_column("source")
        batch.drop_column("embedder")
        batch.drop_column("embedding")
        batch.drop_column("content_hash")
