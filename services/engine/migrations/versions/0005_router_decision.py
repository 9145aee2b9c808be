"""A run's router decision is one typed record (engine.v1.RouterDecision:
the Skill Router's decision under `skills`, the model's under `model`)
instead of either of two JSON shapes. The column keeps its name; its rows
are rewritten into the new shape.

Revision ID: engine_0005
Revises: engine_0004
"""

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "engine_0005"
down_revision = "engine_0004"
branch_labels = None
depends_on = None

# What a RouteModelResponse held that a ModelDecision keeps.
MODEL_FIELDS = ("model", "reason", "routed", "request_profile", "web_only")


def _upgraded(old: dict[str, Any], run: Any) -> dict[str, Any]:
    if run.agent_id or isinstance(old.get("model"), dict):  # AskAgent: the model router's response
        return {"model": {key: old[key] for key in MODEL_FIELDS if key in old}} if old else {}
    new: dict[str, Any] = {"skills": old} if old else {}
    if run.provider or run.model:  # a chat run: its model is in its columns
        new["model"] = {"model": {"provider": run.provider or "", "model": run.model or ""}}
    return new


def _downgraded(new: dict[str, Any], run: Any) -> dict[str, Any]:
    if run.agent_id:
        return {key: value for key, value in new.get("model", {}).items() if key != "fallback"}
    return dict(new.get("skills", {}))


def _rewrite(change: Any) -> None:
    connection = op.get_bind()
    runs = connection.execute(
        sa.text("SELECT id, agent_id, provider, model, router_decision_json FROM agent_runs")
    ).fetchall()
    update = sa.text("UPDATE agent_runs SET router_decision_json = :value WHERE id = :id")
    for run in runs:
        try:
            old = json.loads(run.router_decision_json or "{}")
        except ValueError:
            old = {}
        new = change(old if isinstance(old, dict) else {}, run)
        connection.execute(update, {"id": run.id, "value": json.dumps(new)})


def upgrade() -> None:
    _rewrite(_upgraded)


def downgrade() -> None:
    _rewrite(_downgraded)
