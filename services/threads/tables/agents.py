"""SQL of the ``agents`` table: the agent registry's reads (its writes,
each recorded in the audit log, are in ``registry.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import bindparam
from sqlalchemy import select as core_select
from sqlmodel import col, select

from services.shared.db_retry import db_retry
from services.threads.models import Agent, table_of
from services.threads.tables.base import TableRepository


class AgentsTable(TableRepository):
    @db_retry
    async def get_agent(self, agent_id: str) -> Agent | None:
        async with self._connect() as connection:
            row = (await connection.execute(_AGENT, {"p_agent": agent_id})).one_or_none()
        return None if row is None else Agent(**row._mapping)

    @db_retry
    async def list_agents(self, after_id: str, limit: int, project_id: str = "") -> Sequence[Agent]:
        """Agents by id after ``after_id``; only ``project_id``'s when given."""
        async with self._sessions() as session:
            query = select(Agent).where(col(Agent.id) > after_id)
            if project_id:
                query = query.where(col(Agent.project_id) == project_id)
            return (await session.exec(query.order_by(col(Agent.id)).limit(limit))).all()


_AGENTS = table_of(Agent)
# Read on every call that checks membership: built once, no ORM loading.
_AGENT = core_select(_AGENTS).where(_AGENTS.c.id == bindparam("p_agent"))
