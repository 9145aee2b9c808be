"""SQL of the ``agents`` table: the agent registry."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from services.shared.db import is_unique_violation
from services.shared.db_retry import db_retry
from services.shared.time import utcnow
from services.threads.models import Agent
from services.threads.tables.base import TableRepository


class AgentsTable(TableRepository):
    @db_retry
    async def insert_agent(self, agent: Agent) -> bool:
        """False when an agent with this id exists already."""
        async with self._sessions() as session:
            session.add(agent)
            try:
                await session.commit()
            except IntegrityError as exc:
                if is_unique_violation(exc):
                    return False
                raise
            return True

    @db_retry
    async def get_agent(self, agent_id: str) -> Agent | None:
        async with self._sessions() as session:
            return await session.get(Agent, agent_id)

    @db_retry
    async def list_agents(self, after_id: str, limit: int) -> Sequence[Agent]:
        async with self._sessions() as session:
            query = select(Agent).where(col(Agent.id) > after_id).order_by(col(Agent.id)).limit(limit)
            return (await session.exec(query)).all()

    @db_retry
    async def update_agent(self, agent_id: str, values: dict[str, Any]) -> Agent | None:
        async with self._sessions() as session:
            result = await session.exec(
                update(Agent)
                .where(col(Agent.id) == agent_id)
                .values(**values, update_time=utcnow())
                .returning(Agent)
            )
            agent = result.scalar_one_or_none()
            await session.commit()
            return agent
