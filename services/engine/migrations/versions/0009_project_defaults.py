"""What is attached to an agent of a shared project belongs to the project.

Schedules: an index to list one agent's schedules (its project's members see
them all, not only their own). No data changes: a schedule keeps its creator,
as whom it runs.

Webhook defaults: an agent's default is now stored once per agent, with
user_id "" (the project's), for agents of shared projects; agents of
personal projects (the registry every user sees) keep one default per user.
Existing per-user defaults of agents: the newest per agent (latest
update_time, ties broken by the greater user id) is copied as the agent's
project default; the per-user rows stay, since they remain the defaults of
agents of personal projects. The engine cannot tell the two kinds of agent
apart here (agents live in the threads service's database), and it reads the
copied row only while the agent belongs to a shared project.

Revision ID: engine_0009_project_defaults
Revises: engine_0008_quotas
"""

from alembic import op

revision = "engine_0009_project_defaults"
down_revision = "engine_0008_quotas"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_schedules_agent_created", "schedules", ["agent_id", "create_time", "id"])
    op.execute(
        """
        INSERT INTO webhook_defaults (user_id, target_kind, target_id, url, update_time)
        SELECT '', d.target_kind, d.target_id, d.url, d.update_time
        FROM webhook_defaults d
        WHERE d.target_kind = 'agent' AND d.user_id <> ''
          AND NOT EXISTS (
            SELECT 1 FROM webhook_defaults n
            WHERE n.target_kind = d.target_kind AND n.target_id = d.target_id AND n.user_id <> ''
              AND (n.update_time > d.update_time
                   OR (n.update_time = d.update_time AND n.user_id > d.user_id))
          )
          AND NOT EXISTS (
            SELECT 1 FROM webhook_defaults e
            WHERE e.user_id = '' AND e.target_kind = d.target_kind AND e.target_id = d.target_id
          )
        """
    )


def downgrade() -> None:
    op.execute("DELETE FROM webhook_defaults WHERE user_id = ''")
    op.drop_index("ix_schedules_agent_created", table_name="schedules")
