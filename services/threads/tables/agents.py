"""SQL of the ``agents`` table: the agent registry's reads (its writes,
each recorded in the audit log, are in ``registry.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlmodel import col, select

from services.shared.db_retry import db_retry
from services.threads.models import Agent
from services.threads.tables.base import TableRepository


class AgentsTable(TableRepository):
    @db_retry
    async def get_agent(self, agent_id: str) -> Agent | None:
        async with self._sessions() as session:
            return await session.get(Agent, agent_id)

    @db_retry
    async def list_agents(self, after_id: str, limit: int) -> Sequence[Agent]:
        async with self._sessions() as session:
            query = select(Agent).where(col(Agent.id) > after_id).order_by(col(Agent.id)).limit(limit)
            return (await session.exec(query)).all()
