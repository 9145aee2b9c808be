"""Runs recorded before the router decision was a typed record keep their
decision: the migration rewrites either old JSON shape (a chat run's Skill
Router record, an ask's model route) into engine.v1.RouterDecision, on
SQLite and PostgreSQL, and back on downgrade."""

from __future__ import annotations

import json
import uuid

from alembic import command
from sqlalchemy import Connection, text

from services.engine.models import AgentRun
from services.engine.runs import run_to_proto
from services.engine.server import MIGRATIONS
from services.shared.db import create_engine, session_factory
from services.shared.migrations import alembic_config
from switchboard.router.v1 import router_pb2

CHAT_DECISION = {
    "candidates": [{"skill_id": "s1", "name": "meeting-notes", "fused_score": 0.9}],
    "high_threshold": 0.45,
    "branch": "ROUTE_BRANCH_HIGH",
}
ASK_ROUTE = {
    "model": {"id": "m1", "provider": "offline", "model": "switchboard-offline-fast"},
    "reason": "agent model",
    "notices": ["ignored"],
}


async def migrate(url: str, revision: str, *, down: bool = False) -> None:
    engine = create_engine(url)
    config = alembic_config(MIGRATIONS, "engine")

    def run(connection: Connection) -> None:
        config.attributes["connection"] = connection
        (command.downgrade if down else command.upgrade)(config, revision)

    try:
        async with engine.begin() as connection:
            await connection.run_sync(run)
    finally:
        await engine.dispose()


async def test_old_router_decisions_become_typed_records(db_url: str) -> None:
    await migrate(db_url, "engine_0004")
    engine = create_engine(db_url)
    chat, ask, bare = (str(uuid.uuid4()) for _ in range(3))
    insert = text(
        "INSERT INTO agent_runs (id, agent_id, user_id, surface, trigger_payload_json, status, provider,"
        " model, tokens_in, tokens_out, credits, skills_json, sources_json, router_decision_json,"
        " layers_json, approval, started_at, requested_model, instance_id, cancel_requested)"
        " VALUES (:id, :agent, 'alice', 'chat', '{}', 'done', :provider, :model, 0, 0, 0, '[]', '[]',"
        " :decision, '[]', '', CURRENT_TIMESTAMP, '', 'i1', false)"
    )
    try:
        async with engine.begin() as connection:
            await connection.execute(
                insert,
                [
                    {
                        "id": chat,
                        "agent": None,
                        "provider": "remote",
                        "model": "model-x",
                        "decision": json.dumps(CHAT_DECISION),
                    },
                    {
                        "id": ask,
                        "agent": "qa",
                        "provider": "offline",
                        "model": "switchboard-offline-fast",
                        "decision": json.dumps(ASK_ROUTE),
                    },
                    {"id": bare, "agent": None, "provider": None, "model": None, "decision": "{}"},
                ],
            )
        await migrate(db_url, "head")
        async with session_factory(engine)() as session:
            runs = {run_id: run_to_proto(await session.get(AgentRun, run_id)) for run_id in (chat, ask, bare)}
        decision = runs[chat].router_decision
        assert decision.skills.branch == router_pb2.ROUTE_BRANCH_HIGH
        assert [c.name for c in decision.skills.candidates] == ["meeting-notes"]
        assert (decision.model.model.provider, decision.model.model.model) == ("remote", "model-x")
        decision = runs[ask].router_decision
        assert not decision.HasField("skills")
        assert decision.model.model.model == "switchboard-offline-fast"
        assert decision.model.reason == "agent model"
        assert not runs[bare].HasField("router_decision")

        await migrate(db_url, "engine_0004", down=True)
        async with engine.connect() as connection:
            rows = dict(
                (await connection.execute(text("SELECT id, router_decision_json FROM agent_runs"))).all()
            )
        assert json.loads(rows[chat]) == CHAT_DECISION
        assert json.loads(rows[ask])["reason"] == "agent model"
        assert json.loads(rows[bare]) == {}
    finally:
        await engine.dispose()
