"""SQL of the memory service, through SQLModel async sessions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from services.memory.models import Note, PersonalSettings
from services.shared.db import is_unique_violation


class MemoryRepository:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    # Notes

    async def insert_note(self, note: Note) -> Note:
        """Inserts, or returns the note created earlier with the same
        (owner, request_id): a retried create writes once, concurrent or not."""
        async with self._sessions() as session:
            session.add(note)
            try:
                await session.commit()
                return note
            except IntegrityError as exc:
                if not (note.request_id and is_unique_violation(exc)):
                    raise
            await session.rollback()
            query = select(Note).where(
                Note.owner_user_id == note.owner_user_id, Note.request_id == note.request_id
            )
            return (await session.exec(query)).one()

    async def project_notes(self, user_id: str, project_id: str) -> Sequence[Note]:
        """A user's notes in a project, newest first (index ix_notes_owner_project_update).
        One indexed query that returns nothing when the project has no notes."""
        async with self._sessions() as session:
            query = (
                select(Note)
                .where(Note.owner_user_id == user_id, Note.project_id == project_id)
                .order_by(col(Note.update_time).desc(), col(Note.id))
            )
            return (await session.exec(query)).all()

    # Personal settings

    async def get_settings(self, user_id: str) -> PersonalSettings | None:
        async with self._sessions() as session:
            return await session.get(PersonalSettings, user_id)

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
            dialect = session.bind.dialect.name if session.bind is not None else ""
            if dialect == "postgresql":
                statement: Any = postgresql.insert(PersonalSettings).values(**row)
            elif dialect == "sqlite":
                statement = sqlite.insert(PersonalSettings).values(**row)
            else:
                raise RuntimeError(f"Switchboard runs on SQLite or PostgreSQL, not {dialect!r}")
            statement = statement.on_conflict_do_update(
                index_elements=[col(PersonalSettings.user_id)],
                set_={name: statement.excluded[name] for name in changes},
            )
            await session.exec(statement)
            await session.commit()
            saved = await session.get(PersonalSettings, user_id, populate_existing=True)
            assert saved is not None
            return saved
