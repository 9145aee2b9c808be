"""The full skill catalog (17 presets, 6 built-ins), per-user enablement and
auto_use overrides, "not relevant" feedback, and the catalog revision.

Seeding is idempotent: a skill whose id or name is already there is updated
in place to the catalog's text (the five skills of router_0001 keep their ids),
any other is inserted.

Revision ID: router_0002
Revises: router_0001
"""

import sqlalchemy as sa
from alembic import op

from services.router.catalog import CATALOG
from services.shared.time import utcnow

revision = "router_0002"
down_revision = "router_0001"
branch_labels = None
depends_on = None

_FIRST_FIVE = {f"5f0c1a2e-8d4b-4c3a-9e71-0a6b2d9c4e{n:02d}" for n in range(1, 6)}


def upgrade() -> None:
    with op.batch_alter_table("skills") as batch:
        batch.add_column(sa.Column("create_request_id", sa.String(128), nullable=True))
        batch.create_unique_constraint("uq_skills_create_request_id", ["create_request_id"])
    op.create_table(
        "skill_enablements",
        sa.Column("user_id", sa.String(128), primary_key=True),
        sa.Column(
            "skill_id", sa.String(36), sa.ForeignKey("skills.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("auto_use", sa.Boolean(), nullable=True),
        sa.Column("update_time", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "skill_feedback",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("user_id", sa.String(128), nullable=False),
        sa.Column("request_id", sa.String(128), nullable=False),
        sa.Column("skill_id", sa.String(36), nullable=False),
        sa.Column("skill_name", sa.String(64), nullable=False),
        sa.Column("request_text", sa.Text(), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("user_id", "request_id", name="uq_skill_feedback_request"),
    )
    op.create_index("ix_skill_feedback_user_id", "skill_feedback", ["user_id"])
    revisions = op.create_table(
        "catalog_revision",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("revision", sa.BigInteger(), nullable=False),
    )
    op.bulk_insert(revisions, [{"id": 1, "revision": 1}])
    _seed()


def _seed() -> None:
    skills = sa.table(
        "skills",
        sa.column("id", sa.String),
        sa.column("name", sa.String),
        sa.column("description", sa.Text),
        sa.column("body", sa.Text),
        sa.column("builtin", sa.Boolean),
        sa.column("auto_use", sa.Boolean),
        sa.column("create_time", sa.DateTime(timezone=True)),
        sa.column("update_time", sa.DateTime(timezone=True)),
    )
    connection = op.get_bind()
    now = utcnow()
    for skill in CATALOG:
        existing = connection.execute(
            sa.select(skills.c.id).where(sa.or_(skills.c.id == skill["id"], skills.c.name == skill["name"]))
        ).first()
        values = {k: v for k, v in skill.items() if k != "id"}
        if existing is None:
            connection.execute(skills.insert().values(**skill, create_time=now, update_time=now))
        else:
            connection.execute(
                skills.update().where(skills.c.id == existing.id).values(**values, update_time=now)
            )


def downgrade() -> None:
    op.drop_table("catalog_revision")
    op.drop_index("ix_skill_feedback_user_id", "skill_feedback")
    op.drop_table("skill_feedback")
    op.drop_table("skill_enablements")
    with op.batch_alter_table("skills") as batch:
        batch.drop_constraint("uq_skills_create_request_id", type_="unique")
        batch.drop_column("create_request_id")
    # The skills this revision added; the five of router_0001 stay (with this text).
    added = [skill["id"] for skill in CATALOG if skill["id"] not in _FIRST_FIVE]
    op.execute(
        sa.text("DELETE FROM skills WHERE id IN :ids")
        .bindparams(sa.bindparam("ids", expanding=True))
        .params(ids=added)
    )
