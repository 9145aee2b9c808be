"""SQL of the agent registry's writes: agents with their owner, members,
and the claim of an unowned agent, each with its audit row in the same
transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, update
from sqlalchemy import select as core_select
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, delete, select

from services.shared.audit import AuditLog, record
from services.shared.db import dialect_insert, is_unique_violation
from services.shared.db_retry import db_retry
from services.shared.time import utcnow
from services.threads.models import Agent, AgentMember, ThreadsAuditEvent, table_of
from services.threads.tables.base import TableRepository


class RegistryTable(TableRepository):
    @property
    def audit(self) -> AuditLog:
        return AuditLog(ThreadsAuditEvent, self._sessions)

    @db_retry
    async def insert_owned_agent(self, agent: Agent, audit: ThreadsAuditEvent) -> bool:
        """The agent with its owner as first member, recorded; False when an
        agent with this id exists already (nothing written)."""
        async with self._sessions() as session:
            session.add(agent)
            try:
                await session.flush()
            except IntegrityError as exc:
                if is_unique_violation(exc):
                    return False
                raise
            await add_member(session, agent.id, agent.owner_id)
            await record(session, audit)
            await session.commit()
            return True

    @db_retry
    async def update_agent_recorded(
        self, agent_id: str, values: dict[str, Any], audit: ThreadsAuditEvent
    ) -> Agent | None:
        async with self._sessions() as session:
            result = await session.exec(
                update(Agent)
                .where(col(Agent.id) == agent_id)
                .values(**values, update_time=utcnow())
                .returning(Agent)
            )
            agent = result.scalar_one_or_none()
            if agent is not None:
                await record(session, audit)
            await session.commit()
            return agent

    @db_retry
    async def claim_agent(
        self, agent_id: str, user_id: str, project_id: str, audit: ThreadsAuditEvent
    ) -> bool:
        """Makes ``user_id`` the owner of an agent that has none, in
        ``project_id`` (a compare-and-set: of concurrent claimers exactly one
        wins)."""
        async with self._sessions() as session:
            result = await session.exec(
                update(Agent)
                .where(col(Agent.id) == agent_id, col(Agent.owner_id) == "")
                .values(owner_id=user_id, project_id=project_id)
            )
            if not result.rowcount:
                await session.rollback()
                return False
            await add_member(session, agent_id, user_id)
            await record(session, audit)
            await session.commit()
            return True

    @db_retry
    async def is_member(self, agent_id: str, user_id: str) -> bool:
        async with self._connect() as connection:
            found = await connection.execute(_MEMBER, {"p_agent": agent_id, "p_user": user_id})
            return found.first() is not None

    @db_retry
    async def members(self, agent_id: str) -> Sequence[str]:
        async with self._sessions() as session:
            query = select(AgentMember.user_id).where(col(AgentMember.agent_id) == agent_id)
            return sorted((await session.exec(query)).all())

    @db_retry
    async def add_member(self, agent_id: str, user_id: str, audit: ThreadsAuditEvent) -> None:
        """Adds (a no-op, unrecorded, for a member already)."""
        async with self._sessions() as session:
            if await session.get(AgentMember, (agent_id, user_id)) is None:
                await add_member(session, agent_id, user_id)
                await record(session, audit)
            await session.commit()

    @db_retry
    async def remove_member(self, agent_id: str, user_id: str, audit: ThreadsAuditEvent) -> None:
        """Removes (a no-op, unrecorded, for a non-member)."""
        async with self._sessions() as session:
            result = await session.exec(
                delete(AgentMember).where(
                    col(AgentMember.agent_id) == agent_id, col(AgentMember.user_id) == user_id
                )
            )
            if result.rowcount:
                await record(session, audit)
            await session.commit()


async def add_member(session: Any, agent_id: str, user_id: str) -> None:
    row = {"agent_id": agent_id, "user_id": user_id, "create_time": utcnow()}
    table: Any = AgentMember.__table__  # type: ignore[attr-defined]
    await session.exec(dialect_insert(session, table).values(**row).on_conflict_do_nothing())


_MEMBERS = table_of(AgentMember)
# Checked on every call to an agent's thread: built once, no ORM loading.
_MEMBER = core_select(_MEMBERS.c.user_id).where(
    _MEMBERS.c.agent_id == bindparam("p_agent"), _MEMBERS.c.user_id == bindparam("p_user")
)
