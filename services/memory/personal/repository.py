"""SQL of personal settings, through SQLModel async sessions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col
from sqlmodel.ext.asyncio.session import AsyncSession

from services.memory.personal.models import PersonalSettings
from services.shared.db import dialect_insert
from services.shared.db_retry import db_retry
from services.shared.driver_rows import Loader
from services.shared.gathered_reads import driver_of


class PersonalSettingsRepository:
    """Reads and the upsert are retried when the database connection drops
    (services.shared.db_retry): the upsert writes the same values again."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions
        # Every chat run reads the settings: straight on the driver.
        self._driver = driver_of(sessions)
        self._settings = Loader(self._driver, PersonalSettings)
        self._get = f"SELECT {self._settings.select} FROM personal_settings WHERE user_id = $1"

    # Personal settings

    @db_retry
    async def get_settings(self, user_id: str) -> PersonalSettings | None:
        row = await self._driver.fetchrow(self._get, user_id)
        return self._settings(row) if row is not None else None

    @db_retry
    async def upsert_settings(self, user_id: str, changes: Mapping[str, Any]) -> PersonalSettings:
        """Writes ``changes`` (column -> value) into the user's row, creating the
        row with the defaults for the other columns. One atomic statement
        (INSERT ... ON CONFLICT (user_id) DO UPDATE), so two concurrent updates
        of different fields of one user both land and never hit a unique violation."""
        if not changes:
            raise ValueError("upsert_settings needs at least one column to write")
        row = PersonalSettings(user_id=user_id).model_dump()
        row.update(changes)
        async with self._sessions() as session:
            statement = dialect_insert(session, PersonalSettings).values(**row)
            statement = statement.on_conflict_do_update(
                index_elements=[col(PersonalSettings.user_id)],
                set_={name: statement.excluded[name] for name in changes},
            )
            await session.exec(statement)
            await session.commit()
            saved = await session.get(PersonalSettings, user_id, populate_existing=True)
            assert saved is not None
            return saved
