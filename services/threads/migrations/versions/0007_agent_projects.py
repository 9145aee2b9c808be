"""Agents belong to a project: ``agents.project_id``. An existing agent
moves into its owner's personal project (whose id every service derives
from the user: services.shared.projects), where its owner is the only
project member, so its agent members keep their access through
``agent_members``. An agent with no owner yet keeps "" until its next
caller claims it (services/threads/access.py).

Revision ID: threads_0007_agent_projects
Revises: threads_0006_retention
"""

import sqlalchemy as sa
from alembic import op

from services.shared.projects import personal_project_id

revision = "threads_0007_agent_projects"
down_revision = "threads_0006_retention"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("agents") as batch:
        batch.add_column(sa.Column("project_id", sa.String(128), nullable=False, server_default=""))
    op.create_index("ix_agents_project_id_id", "agents", ["project_id", "id"])
    connection = op.get_bind()
    owners = connection.execute(sa.text("SELECT DISTINCT owner_id FROM agents WHERE owner_id <> ''"))
    move = sa.text("UPDATE agents SET project_id = :project WHERE owner_id = :owner")
    for (owner,) in owners.fetchall():
        connection.execute(move, {"project": personal_project_id(owner), "owner": owner})


def downgrade() -> None:
    op.drop_index("ix_agents_project_id_id", table_name="agents")
    with op.batch_alter_table("agents") as batch:
        batch.drop_column("project_id")
