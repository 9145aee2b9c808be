"""What every table's repository of the threads service starts from."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession


class TableRepository:
    """SQL over one table (or one transaction that spans several), through
    SQLModel async sessions. Reads and idempotent writes are retried when the
    database connection drops (services.shared.db_retry)."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions
