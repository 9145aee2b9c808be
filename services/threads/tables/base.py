"""What every table's repository of the threads service starts from."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar, cast

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, async_sessionmaker
from sqlalchemy.orm import configure_mappers
from sqlmodel import SQLModel
from sqlmodel.ext.asyncio.session import AsyncSession

from services.shared.driver import Driver

M = TypeVar("M", bound=SQLModel)


def detached(model: type[M], names: Sequence[str], values: Sequence[Any]) -> M:
    """A model from a driver row (``values`` of the columns ``names``), read
    already: no validation, no ORM state; for callers that read its fields."""
    return cast(M, model.model_construct(**dict(zip(names, values, strict=True))))


class TableRepository:
    """SQL over one table (or one transaction that spans several), through
    SQLModel async sessions, or the driver for the statements every run
    makes (services.shared.driver). Reads and idempotent writes are retried
    when the database connection drops (services.shared.db_retry)."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions
        self._engine = cast(AsyncEngine, sessions.kw["bind"])
        self._driver = Driver(self._engine)
        # Models built from the driver's rows (``model_construct``) read their
        # fields through the mappers, which must be set up by then.
        configure_mappers()

    def _connect(self) -> AsyncConnection:
        """A connection without an ORM session (no identity map, no unit of
        work), for the hot path's Core reads: ``async with self._connect()``."""
        return self._engine.connect()
