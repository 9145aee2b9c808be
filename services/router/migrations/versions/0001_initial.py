"""The skill catalog, seeded with five workspace skills.

Revision ID: router_0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

from services.shared.time import utcnow

revision = "router_0001"
down_revision = None
branch_labels = None
depends_on = None

# The first skills of the catalog; the full catalog (17 migrated presets and
# 6 built-ins) and per-user enablement arrive in a later revision.
SEED_SKILLS = [
    {
        "id": "5f0c1a2e-8d4b-4c3a-9e71-0a6b2d9c4e01",
        "name": "meeting-notes-to-actions",
        "description": (
            "Turn meeting notes into a list of action items, each with an owner and a due date; "
            "extract the decisions and actions of a meeting. Transformer un compte rendu de réunion "
            "en actions avec responsables et échéances."
        ),
        "body": (
            "From the meeting notes, list every action item as: action, owner, due date. Put the "
            "decisions taken in a separate list. Never invent an owner or a date: write 'to be "
            "decided' when the notes do not say. Keep the language of the notes."
        ),
        "builtin": False,
        "auto_use": True,
    },
    {
        "id": "5f0c1a2e-8d4b-4c3a-9e71-0a6b2d9c4e02",
        "name": "weekly-status-report",
        "description": (
            "Write the weekly status report of a project: progress this week, blockers, risks and "
            "next steps. Rédiger le point d'avancement hebdomadaire d'un projet."
        ),
        "body": (
            "Write a weekly status report with four headings: Done this week, In progress, Blockers "
            "and risks, Next week. One line per item, most important first; name the people "
            "involved; flag anything late since the previous report."
        ),
        "builtin": False,
        "auto_use": True,
    },
    {
        "id": "5f0c1a2e-8d4b-4c3a-9e71-0a6b2d9c4e03",
        "name": "email-reply-draft",
        "description": (
            "Draft a reply to an email: answer the sender, address each of their questions, propose "
            "next steps. Rédiger une réponse à un mail ou un courriel."
        ),
        "body": (
            "Draft a reply to the email: greet the sender by name, answer each question in the order "
            "asked, propose a concrete next step and close politely. Match the sender's tone and "
            "language. Do not send it: it is a draft for the user to review."
        ),
        "builtin": False,
        "auto_use": True,
    },
    # Built-ins are only used when forced in this phase,
    # whatever auto_use says.
    {
        "id": "5f0c1a2e-8d4b-4c3a-9e71-0a6b2d9c4e04",
        "name": "translate",
        "description": (
            "Translate a text into another language, keeping its tone and formatting. Traduire un "
            "texte dans une autre langue."
        ),
        "body": (
            "Translate the text into the language asked for (English when none is given, French when "
            "the text is English). Keep the formatting, names and figures; translate meaning, not word "
            "by word. Output only the translation."
        ),
        "builtin": True,
        "auto_use": True,
    },
    {
        "id": "5f0c1a2e-8d4b-4c3a-9e71-0a6b2d9c4e05",
        "name": "summarize",
        "description": (
            "Summarize a document, a page or a long text into its key points. Résumer un texte en "
            "points clés."
        ),
        "body": (
            "Summarize the text in at most five bullet points, most important first, then one "
            "sentence of conclusion. Keep figures and names exact; add nothing the text does not say."
        ),
        "builtin": True,
        "auto_use": True,
    },
]


def upgrade() -> None:
    skills = op.create_table(
        "skills",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("builtin", sa.Boolean(), nullable=False),
        sa.Column("auto_use", sa.Boolean(), nullable=False),
        sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("update_time", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("name", name="uq_skills_name"),
    )
    now = utcnow()
    op.bulk_insert(skills, [{**skill, "create_time": now, "update_time": now} for skill in SEED_SKILLS])


def downgrade() -> None:
    op.drop_table("skills")
