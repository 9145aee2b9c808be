"""SQL of the ``provider_sessions`` table: native sessions of providers,
one live per (agent thread, provider). Their writes are not retried."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import tuple_, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from services.shared.db import is_unique_violation
from services.shared.db_retry import db_retry
from services.shared.time import utcnow
from services.threads.models import ProviderSession
from services.threads.tables.base import TableRepository


class ProviderSessionsTable(TableRepository):
    @db_retry
    async def live_provider_session(self, thread_id: str, provider_id: str) -> ProviderSession | None:
        async with self._sessions() as session:
            query = select(ProviderSession).where(
                ProviderSession.agent_thread_id == thread_id,
                ProviderSession.provider_id == provider_id,
                col(ProviderSession.release_time).is_(None),
            )
            return (await session.exec(query)).one_or_none()

    async def bind_provider_session(self, row: ProviderSession, replace: bool) -> bool:
        """Inserts ``row`` as the live session of its key, first releasing a live
        one when ``replace``, in one transaction. False when another live
        session holds the key (the partial unique index refused the insert)."""
        async with self._sessions() as session:
            try:
                if replace:
                    await session.exec(
                        update(ProviderSession)
                        .where(
                            col(ProviderSession.agent_thread_id) == row.agent_thread_id,
                            col(ProviderSession.provider_id) == row.provider_id,
                            col(ProviderSession.release_time).is_(None),
                        )
                        .values(release_time=row.create_time)
                    )
                session.add(row)
                await session.commit()
                return True
            except IntegrityError as exc:
                if is_unique_violation(exc):
                    return False
                raise

    async def release_provider_session(self, thread_id: str, provider_id: str) -> ProviderSession | None:
        async with self._sessions() as session:
            result = await session.exec(
                update(ProviderSession)
                .where(
                    col(ProviderSession.agent_thread_id) == thread_id,
                    col(ProviderSession.provider_id) == provider_id,
                    col(ProviderSession.release_time).is_(None),
                )
                .values(release_time=utcnow())
                .returning(ProviderSession)
            )
            released = result.scalar_one_or_none()
            await session.commit()
            return released

    @db_retry
    async def list_provider_sessions(
        self, thread_id: str, include_released: bool, after: tuple[str, str] | None, limit: int
    ) -> Sequence[ProviderSession]:
        """By provider, then id; keyset-paginated."""
        async with self._sessions() as session:
            query = select(ProviderSession).where(ProviderSession.agent_thread_id == thread_id)
            if not include_released:
                query = query.where(col(ProviderSession.release_time).is_(None))
            if after is not None:
                query = query.where(
                    tuple_(col(ProviderSession.provider_id), col(ProviderSession.id)) > tuple_(*after)
                )
            query = query.order_by(col(ProviderSession.provider_id), col(ProviderSession.id)).limit(limit)
            return (await session.exec(query)).all()

    @db_retry
    async def all_provider_sessions(self, thread_id: str) -> Sequence[ProviderSession]:
        async with self._sessions() as session:
            query = (
                select(ProviderSession)
                .where(ProviderSession.agent_thread_id == thread_id)
                .order_by(col(ProviderSession.create_time), col(ProviderSession.id))
            )
            return (await session.exec(query)).all()
