"""SQL of the memory service, through SQLModel async sessions.

Every write of notes or live state bumps that scope's per-(owner, project)
revision in the same transaction, so a replica can tell from one primary-key
read whether what it cached is still current."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, tuple_, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import SQLModel, col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from services.memory.models import LiveState, Note, PersonalSettings, ProjectContextRow, Revision
from services.shared.db import is_unique_violation

NOTES = "notes"
LIVE = "live"


class ContentConflict(Exception):
    """The write would give the owner two notes with the same normalised text
    in one project (uq_notes_owner_project_content); ``existing`` is the other."""

    def __init__(self, existing: Note) -> None:
        super().__init__(existing.id)
        self.existing = existing


@dataclass(frozen=True)
class NoteFilter:
    owner_user_id: str
    project_id: str = ""  # "" = every project
    kind: int = 0  # 0 = every kind
    tag: str = ""  # "" = any tag


def _insert(session: AsyncSession, table: type[SQLModel]) -> Any:
    """INSERT for the session's dialect, with on_conflict_do_update."""
    dialect = session.bind.dialect.name if session.bind is not None else ""
    if dialect == "postgresql":
        return postgresql.insert(table)
    if dialect == "sqlite":
        return sqlite.insert(table)
    raise RuntimeError(f"Switchboard runs on SQLite or PostgreSQL, not {dialect!r}")


async def _bump(session: AsyncSession, owner: str, project: str, scope: str) -> None:
    statement = _insert(session, Revision).values(
        owner_user_id=owner, project_id=project, scope=scope, revision=1
    )
    statement = statement.on_conflict_do_update(
        index_elements=[col(Revision.owner_user_id), col(Revision.project_id), col(Revision.scope)],
        set_={"revision": Revision.revision + 1},
    )
    await session.exec(statement)


class MemoryRepository:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    # Revisions

    async def revision(self, owner: str, project: str, scope: str) -> int:
        async with self._sessions() as session:
            row = await session.get(Revision, (owner, project, scope))
            return row.revision if row is not None else 0

    # Notes

    async def _conflict(self, session: AsyncSession, note: Note) -> ContentConflict | None:
        query = select(Note).where(
            Note.owner_user_id == note.owner_user_id,
            Note.project_id == note.project_id,
            Note.content_hash == note.content_hash,
            Note.id != note.id,
        )
        existing = (await session.exec(query)).first()
        return ContentConflict(existing) if existing is not None else None

    async def insert_note(self, note: Note) -> Note:
        """Inserts, or returns the note created earlier with the same
        (owner, request_id): a retried create writes once, concurrent or not.
        Raises ContentConflict when the project already has the same text."""
        async with self._sessions() as session:
            session.add(note)
            try:
                # The bump's statement flushes the insert: both inside the try.
                await _bump(session, note.owner_user_id, note.project_id, NOTES)
                await session.commit()
                return note
            except IntegrityError as exc:
                if not is_unique_violation(exc):
                    raise
            await session.rollback()
            if note.request_id:
                query = select(Note).where(
                    Note.owner_user_id == note.owner_user_id, Note.request_id == note.request_id
                )
                earlier = (await session.exec(query)).first()
                if earlier is not None:
                    return earlier
            conflict = await self._conflict(session, note)
            if conflict is not None:
                raise conflict
            raise RuntimeError(f"note {note.id} hit an unexpected unique constraint")

    async def note_by_request(self, owner: str, request_id: str) -> Note | None:
        async with self._sessions() as session:
            query = select(Note).where(Note.owner_user_id == owner, Note.request_id == request_id)
            return (await session.exec(query)).first()

    async def get_note(self, owner: str, note_id: str) -> Note | None:
        async with self._sessions() as session:
            note = await session.get(Note, note_id)
            return note if note is not None and note.owner_user_id == owner else None

    async def note_by_source(self, owner: str, project: str, source: str) -> Note | None:
        async with self._sessions() as session:
            query = select(Note).where(
                Note.owner_user_id == owner, Note.project_id == project, Note.source == source
            )
            return (await session.exec(query)).first()

    async def save_note(self, note: Note) -> Note:
        """Writes an existing note's changed columns (the caller loaded it).
        Raises ContentConflict when another note of the project has the same text."""
        async with self._sessions() as session:
            merged = await session.merge(note)
            try:
                await _bump(session, note.owner_user_id, note.project_id, NOTES)
                await session.commit()
                return merged
            except IntegrityError as exc:
                if not is_unique_violation(exc):
                    raise
            await session.rollback()
            conflict = await self._conflict(session, note)
            if conflict is not None:
                raise conflict
            raise RuntimeError(f"note {note.id} hit an unexpected unique constraint")

    async def delete_note(self, owner: str, note_id: str) -> bool:
        async with self._sessions() as session:
            note = await session.get(Note, note_id)
            if note is None or note.owner_user_id != owner:
                return False
            await session.delete(note)
            await _bump(session, owner, note.project_id, NOTES)
            await session.commit()
            return True

    async def list_notes(
        self, where: NoteFilter, after: tuple[datetime, str] | None, limit: int
    ) -> Sequence[Note]:
        """Newest created first (create_time, id descending): keyset order on
        immutable columns, so updates never move a note between pages."""
        query = select(Note).where(Note.owner_user_id == where.owner_user_id)
        if where.project_id:
            query = query.where(Note.project_id == where.project_id)
        if where.kind:
            query = query.where(Note.kind == where.kind)
        if where.tag:
            # tags_json is a JSON list of strings; match the tag as a whole JSON string.
            query = query.where(
                col(Note.tags_json).contains(json.dumps(where.tag, ensure_ascii=False), autoescape=True)
            )
        if after is not None:
            query = query.where(tuple_(col(Note.create_time), col(Note.id)) < tuple_(*after))
        query = query.order_by(col(Note.create_time).desc(), col(Note.id).desc()).limit(limit)
        async with self._sessions() as session:
            return (await session.exec(query)).all()

    async def project_notes(self, user_id: str, project_id: str) -> Sequence[Note]:
        """A user's notes in a project, newest first (index ix_notes_owner_project_update)."""
        async with self._sessions() as session:
            query = (
                select(Note)
                .where(Note.owner_user_id == user_id, Note.project_id == project_id)
                .order_by(col(Note.update_time).desc(), col(Note.id))
            )
            return (await session.exec(query)).all()

    async def store_embedding(self, note: Note, vector: bytes, embedder: str, dimension: int) -> bool:
        """Caches a computed embedding on its note, unless the note changed
        since it was read (its update_time moved): the vector would be of the
        old text. Not a content change: no revision bump."""
        async with self._sessions() as session:
            result = await session.exec(
                update(Note)
                .where(col(Note.id) == note.id, col(Note.update_time) == note.update_time)
                .values(embedding=vector, embedder=embedder, embedding_dimension=dimension)
            )
            await session.commit()
            return bool(result.rowcount)

    @staticmethod
    def _stale(embedder: str, dimension: int) -> Any:
        return (
            (col(Note.embedder) != embedder)
            | (col(Note.embedding_dimension) != dimension)
            | col(Note.embedding).is_(None)
        )

    async def stale_notes(self, embedder: str, dimension: int, after: str, limit: int) -> Sequence[Note]:
        """Notes, of every owner, whose vector is not ``embedder``'s at
        ``dimension``, by id after ``after``."""
        async with self._sessions() as session:
            query = (
                select(Note)
                .where(self._stale(embedder, dimension), col(Note.id) > after)
                .order_by(col(Note.id))
                .limit(limit)
            )
            return (await session.exec(query)).all()

    async def embedding_progress(self, embedder: str, dimension: int) -> tuple[int, int]:
        """(notes with a vector of ``embedder`` at ``dimension``, all notes)."""
        async with self._sessions() as session:
            total = (await session.exec(select(func.count()).select_from(Note))).one()
            stale = (
                await session.exec(
                    select(func.count()).select_from(Note).where(self._stale(embedder, dimension))
                )
            ).one()
            return int(total) - int(stale), int(total)

    # Project context

    async def get_context(self, owner: str, project: str) -> ProjectContextRow | None:
        async with self._sessions() as session:
            return await session.get(ProjectContextRow, (owner, project))

    async def put_context(self, row: ProjectContextRow) -> ProjectContextRow:
        async with self._sessions() as session:
            statement = _insert(session, ProjectContextRow).values(**row.model_dump())
            statement = statement.on_conflict_do_update(
                index_elements=[col(ProjectContextRow.owner_user_id), col(ProjectContextRow.project_id)],
                set_={"body": statement.excluded.body, "update_time": statement.excluded.update_time},
            )
            await session.exec(statement)
            await session.commit()
        return row

    # Live state

    async def set_live(self, row: LiveState, now: datetime) -> LiveState:
        """Creates or replaces the agent's entry; drops the project's expired ones."""
        async with self._sessions() as session:
            await session.exec(
                delete(LiveState).where(
                    col(LiveState.owner_user_id) == row.owner_user_id,
                    col(LiveState.project_id) == row.project_id,
                    col(LiveState.expire_time) <= now,
                )
            )
            values = row.model_dump()
            statement = _insert(session, LiveState).values(**values)
            statement = statement.on_conflict_do_update(
                index_elements=[
                    col(LiveState.owner_user_id),
                    col(LiveState.project_id),
                    col(LiveState.agent_id),
                ],
                set_={
                    name: statement.excluded[name]
                    for name in ("activity", "detail", "update_time", "expire_time")
                },
            )
            await session.exec(statement)
            await _bump(session, row.owner_user_id, row.project_id, LIVE)
            await session.commit()
        return row

    async def list_live(
        self, owner: str, project: str, now: datetime, after_agent: str = "", limit: int | None = None
    ) -> Sequence[LiveState]:
        """Unexpired entries by agent id, after ``after_agent``."""
        query = select(LiveState).where(
            LiveState.owner_user_id == owner,
            LiveState.project_id == project,
            col(LiveState.expire_time) > now,
            col(LiveState.agent_id) > after_agent,
        )
        query = query.order_by(col(LiveState.agent_id))
        if limit is not None:
            query = query.limit(limit)
        async with self._sessions() as session:
            return (await session.exec(query)).all()

    async def delete_live(self, owner: str, project: str, agent_id: str | None, now: datetime) -> int:
        """Deletes one agent's entry (or all of the project's when None);
        returns how many unexpired entries went."""
        conditions = [col(LiveState.owner_user_id) == owner, col(LiveState.project_id) == project]
        if agent_id is not None:
            conditions.append(col(LiveState.agent_id) == agent_id)
        async with self._sessions() as session:
            live = (
                await session.exec(
                    select(func.count())
                    .select_from(LiveState)
                    .where(*conditions, col(LiveState.expire_time) > now)
                )
            ).one()
            await session.exec(delete(LiveState).where(*conditions))
            if live:
                await _bump(session, owner, project, LIVE)
            await session.commit()
            return int(live)

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
            statement = _insert(session, PersonalSettings).values(**row)
            statement = statement.on_conflict_do_update(
                index_elements=[col(PersonalSettings.user_id)],
                set_={name: statement.excluded[name] for name in changes},
            )
            await session.exec(statement)
            await session.commit()
            saved = await session.get(PersonalSettings, user_id, populate_existing=True)
            assert saved is not None
            return saved
