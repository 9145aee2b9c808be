"""Projects as resources: every (owner, project name) of the previous
schema becomes a project owned by that user, and notes, project context,
live state and revision counters move from (owner, project) to the project.

A user's "default" project becomes their personal project. A name used by
one user keeps its id; a name used by several users gets one project each,
with an id suffixed by a digest of the owner, and each owner keeps reaching
theirs by the old name (project_aliases). Nobody gains access to anything:
each project has exactly one member, the user whose data it holds.

Revision ID: memory_0007
Revises: memory_0006
"""

import hashlib
import re
from collections import defaultdict

import sqlalchemy as sa
from alembic import op

revision = "memory_0007"
down_revision = "memory_0006"
branch_labels = None
depends_on = None

# Frozen copies of services.shared.projects at this revision: migrations must
# not change when the service's code does.
_PROJECT_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
_PERSONAL_PREFIX = "personal-"


def _digest(text: str, size: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:size]


def _personal_id(user: str) -> str:
    return _PERSONAL_PREFIX + _digest(user, 20)


def _mapping(pairs: set[tuple[str, str]]) -> dict[tuple[str, str], tuple[str, bool]]:
    """(owner, old name) -> (project id, whether the old name needs an alias)."""
    owners_of: defaultdict[str, set[str]] = defaultdict(set)
    for owner, name in pairs:
        if name != "default":
            owners_of[name].add(owner)
    result: dict[tuple[str, str], tuple[str, bool]] = {}
    for owner, name in pairs:
        if name == "default":
            result[(owner, name)] = (_personal_id(owner), False)
        elif len(owners_of[name]) == 1 and _PROJECT_ID.match(name) and not name.startswith(_PERSONAL_PREFIX):
            result[(owner, name)] = (name, False)
        else:
            stem = re.sub(r"[^A-Za-z0-9._-]", "-", name)[:100].strip("-") or "project"
            if stem.startswith(_PERSONAL_PREFIX):
                stem = "p-" + stem
            result[(owner, name)] = (f"{stem}-{_digest(owner + chr(0) + name, 12)}", True)
    return result


def upgrade() -> None:
    op.create_table(
        "projects",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("display_name", sa.String(200), nullable=False),
        sa.Column("owner_user_id", sa.String(128), nullable=False),
        sa.Column("personal", sa.Boolean(), nullable=False),
        sa.Column("note_policy", sa.Integer(), nullable=False),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("update_time", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "project_members",
        sa.Column("project_id", sa.String(128), primary_key=True),
        sa.Column("user_id", sa.String(128), primary_key=True),
        sa.Column("role", sa.Integer(), nullable=False),
        sa.Column("update_time", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_project_members_user", "project_members", ["user_id", "project_id"])
    op.create_table(
        "project_aliases",
        sa.Column("user_id", sa.String(128), primary_key=True),
        sa.Column("alias", sa.String(128), primary_key=True),
        sa.Column("project_id", sa.String(128), nullable=False),
    )
    op.create_table(
        "memory_audit_events",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("actor", sa.String(128), nullable=False),
        sa.Column("actor_role", sa.String(16), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("target", sa.String(128), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_memory_audit_events_time_id", "memory_audit_events", ["create_time", "id"])

    connection = op.get_bind()
    notes = sa.table(
        "notes",
        sa.column("id", sa.String),
        sa.column("owner_user_id", sa.String),
        sa.column("project_id", sa.String),
    )
    old_contexts = sa.table(
        "project_contexts",
        sa.column("owner_user_id", sa.String),
        sa.column("project_id", sa.String),
        sa.column("body", sa.Text),
        sa.column("update_time", sa.DateTime(timezone=True)),
    )
    old_live = sa.table(
        "live_state",
        sa.column("owner_user_id", sa.String),
        sa.column("project_id", sa.String),
        sa.column("agent_id", sa.String),
        sa.column("activity", sa.Text),
        sa.column("detail", sa.Text),
        sa.column("update_time", sa.DateTime(timezone=True)),
        sa.column("expire_time", sa.DateTime(timezone=True)),
    )
    old_revisions = sa.table(
        "memory_revisions",
        sa.column("owner_user_id", sa.String),
        sa.column("project_id", sa.String),
        sa.column("scope", sa.String),
        sa.column("revision", sa.BigInteger),
    )
    pairs: set[tuple[str, str]] = set()
    for table in (notes, old_contexts, old_live, old_revisions):
        rows = connection.execute(sa.select(table.c.owner_user_id, table.c.project_id).distinct()).all()
        pairs.update((owner, project) for owner, project in rows)
    mapping = _mapping(pairs)
    now = sa.func.now() if connection.dialect.name == "postgresql" else sa.func.current_timestamp()
    projects = sa.table(
        "projects",
        sa.column("id", sa.String),
        sa.column("display_name", sa.String),
        sa.column("owner_user_id", sa.String),
        sa.column("personal", sa.Boolean),
        sa.column("note_policy", sa.Integer),
        sa.column("create_time", sa.DateTime(timezone=True)),
        sa.column("update_time", sa.DateTime(timezone=True)),
    )
    members = sa.table(
        "project_members",
        sa.column("project_id", sa.String),
        sa.column("user_id", sa.String),
        sa.column("role", sa.Integer),
        sa.column("update_time", sa.DateTime(timezone=True)),
    )
    aliases = sa.table(
        "project_aliases",
        sa.column("user_id", sa.String),
        sa.column("alias", sa.String),
        sa.column("project_id", sa.String),
    )
    for (owner, name), (project_id, aliased) in sorted(mapping.items()):
        personal = name == "default"
        connection.execute(
            projects.insert().values(
                id=project_id,
                display_name="Personal" if personal else name[:200],
                owner_user_id=owner,
                personal=personal,
                note_policy=1,
                create_time=now,
                update_time=now,
            )
        )
        connection.execute(
            members.insert().values(project_id=project_id, user_id=owner, role=3, update_time=now)
        )
        if aliased:
            connection.execute(
                aliases.insert().values(user_id=owner, alias=name[:128], project_id=project_id)
            )
        connection.execute(
            notes.update()
            .where(notes.c.owner_user_id == owner, notes.c.project_id == name)
            .values(project_id=project_id)
        )

    # Notes: the owner becomes the author; uniqueness is per project.
    with op.batch_alter_table("notes") as batch:
        batch.drop_constraint("uq_notes_owner_project_content", type_="unique")
        batch.drop_constraint("uq_notes_owner_project_source", type_="unique")
        batch.drop_constraint("uq_notes_owner_request", type_="unique")
        batch.drop_index("ix_notes_owner_project_update")
        batch.drop_index("ix_notes_owner_create")
        batch.alter_column("owner_user_id", new_column_name="author_user_id", existing_type=sa.String(128))
    with op.batch_alter_table("notes") as batch:
        batch.create_unique_constraint("uq_notes_author_request", ["author_user_id", "request_id"])
        batch.create_unique_constraint("uq_notes_project_content", ["project_id", "content_hash"])
        batch.create_unique_constraint("uq_notes_project_source", ["project_id", "source"])
        batch.create_index("ix_notes_project_update", ["project_id", "update_time"])
        batch.create_index("ix_notes_project_create", ["project_id", "create_time", "id"])

    # Context, live state and revisions are keyed by the project alone:
    # new tables, filled through the mapping, then renamed into place.
    op.create_table(
        "project_contexts_v7",
        sa.Column("project_id", sa.String(128), primary_key=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("author_user_id", sa.String(128), nullable=False),
        sa.Column("update_time", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "live_state_v7",
        sa.Column("project_id", sa.String(128), primary_key=True),
        sa.Column("agent_id", sa.String(128), primary_key=True),
        sa.Column("author_user_id", sa.String(128), nullable=False),
        sa.Column("activity", sa.Text(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("update_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expire_time", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "memory_revisions_v7",
        sa.Column("project_id", sa.String(128), primary_key=True),
        sa.Column("scope", sa.String(16), primary_key=True),
        sa.Column("revision", sa.BigInteger(), nullable=False),
    )
    new_contexts = sa.table(
        "project_contexts_v7",
        sa.column("project_id", sa.String),
        sa.column("body", sa.Text),
        sa.column("author_user_id", sa.String),
        sa.column("update_time", sa.DateTime(timezone=True)),
    )
    for owner, name, body, update_time in connection.execute(
        sa.select(
            old_contexts.c.owner_user_id,
            old_contexts.c.project_id,
            old_contexts.c.body,
            old_contexts.c.update_time,
        )
    ).all():
        connection.execute(
            new_contexts.insert().values(
                project_id=mapping[(owner, name)][0], body=body, author_user_id=owner, update_time=update_time
            )
        )
    new_live = sa.table(
        "live_state_v7",
        sa.column("project_id", sa.String),
        sa.column("agent_id", sa.String),
        sa.column("author_user_id", sa.String),
        sa.column("activity", sa.Text),
        sa.column("detail", sa.Text),
        sa.column("update_time", sa.DateTime(timezone=True)),
        sa.column("expire_time", sa.DateTime(timezone=True)),
    )
    for row in connection.execute(sa.select(old_live)).mappings().all():
        values = dict(row)
        owner, name = values.pop("owner_user_id"), values.pop("project_id")
        connection.execute(
            new_live.insert().values(project_id=mapping[(owner, name)][0], author_user_id=owner, **values)
        )
    new_revisions = sa.table(
        "memory_revisions_v7",
        sa.column("project_id", sa.String),
        sa.column("scope", sa.String),
        sa.column("revision", sa.BigInteger),
    )
    for owner, name, scope, count in connection.execute(sa.select(old_revisions)).all():
        connection.execute(
            new_revisions.insert().values(project_id=mapping[(owner, name)][0], scope=scope, revision=count)
        )
    for name in ("project_contexts", "live_state", "memory_revisions"):
        op.drop_table(name)
        op.rename_table(f"{name}_v7", name)


def downgrade() -> None:
    raise NotImplementedError("projects cannot be folded back into per-user names without losing sharing")
