"""SQL of durable notes, through SQLModel async sessions. Every write of
notes bumps the project's notes revision in the same transaction
(services.memory.revisions)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, tuple_, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from services.memory.notes.models import Note
from services.memory.projects.models import ProjectMemberRow
from services.memory.revisions import NOTES, RevisionedRepository, bump
from services.shared.db import is_unique_violation
from services.shared.db_retry import db_retry, retry_if


class ContentConflict(Exception):
    """The write would give a project two notes with the same normalised text
    (uq_notes_project_content); ``existing`` is the other."""

    def __init__(self, existing: Note) -> None:
        super().__init__(existing.id)
        self.existing = existing


@dataclass(frozen=True)
class NoteFilter:
    member_user_id: str  # "" project: the notes of every project this user is a member of
    project_id: str = ""  # "" = every project
    kind: int = 0  # 0 = every kind
    tag: str = ""  # "" = any tag


class NotesRepository(RevisionedRepository):
    """Reads and idempotent writes are retried when the database connection
    drops (services.shared.db_retry): a note's save and its embedding (the
    same values written again), its deletion (a second run finds it gone: the
    state is the same), and its creation only when it carries a request_id."""

    # Notes

    async def _conflict(self, session: AsyncSession, note: Note) -> ContentConflict | None:
        query = select(Note).where(
            Note.project_id == note.project_id,
            Note.content_hash == note.content_hash,
            Note.id != note.id,
        )
        existing = (await session.exec(query)).first()
        return ContentConflict(existing) if existing is not None else None

    async def insert_note(self, note: Note) -> tuple[Note, int]:
        """Inserts, and returns the note with the notes revision its insert
        made; or the note created earlier with the same (author, request_id),
        with revision 0: a retried create writes once, concurrent or not.
        Raises ContentConflict when the project already has the same text."""
        return await retry_if(
            bool(note.request_id), lambda: self._insert_note(note), "NotesRepository.insert_note"
        )

    async def _insert_note(self, note: Note) -> tuple[Note, int]:
        async with self._sessions() as session:
            session.add(note)
            try:
                # The bump's statement flushes the insert: both inside the try.
                revision = await bump(session, note.project_id, NOTES)
                await session.commit()
                return note, revision
            except IntegrityError as exc:
                if not is_unique_violation(exc):
                    raise
            await session.rollback()
            if note.request_id:
                query = select(Note).where(
                    Note.author_user_id == note.author_user_id, Note.request_id == note.request_id
                )
                earlier = (await session.exec(query)).first()
                if earlier is not None:
                    return earlier, 0
            conflict = await self._conflict(session, note)
            if conflict is not None:
                raise conflict
            raise RuntimeError(f"note {note.id} hit an unexpected unique constraint")

    @db_retry
    async def note_by_request(self, author: str, request_id: str) -> Note | None:
        async with self._sessions() as session:
            query = select(Note).where(Note.author_user_id == author, Note.request_id == request_id)
            return (await session.exec(query)).first()

    @db_retry
    async def get_note(self, note_id: str) -> Note | None:
        """The note, whatever its project: the caller checks access to it."""
        async with self._sessions() as session:
            return await session.get(Note, note_id)

    @db_retry
    async def note_by_source(self, project: str, source: str) -> Note | None:
        async with self._sessions() as session:
            query = select(Note).where(Note.project_id == project, Note.source == source)
            return (await session.exec(query)).first()

    @db_retry
    async def save_note(self, note: Note) -> Note:
        """Writes an existing note's changed columns (the caller loaded it).
        Raises ContentConflict when another note of the project has the same text."""
        async with self._sessions() as session:
            merged = await session.merge(note)
            try:
                await bump(session, note.project_id, NOTES)
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

    @db_retry
    async def delete_note(self, note_id: str) -> bool:
        async with self._sessions() as session:
            note = await session.get(Note, note_id)
            if note is None:
                return False
            await session.delete(note)
            await bump(session, note.project_id, NOTES)
            await session.commit()
            return True

    @db_retry
    async def list_notes(
        self, where: NoteFilter, after: tuple[datetime, str] | None, limit: int
    ) -> Sequence[Note]:
        """Newest created first (create_time, id descending): keyset order on
        immutable columns, so updates never move a note between pages."""
        if where.project_id:
            query = select(Note).where(Note.project_id == where.project_id)
        else:
            member_of = select(ProjectMemberRow.project_id).where(
                ProjectMemberRow.user_id == where.member_user_id
            )
            query = select(Note).where(col(Note.project_id).in_(member_of))
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

    @db_retry
    async def project_notes(self, project_id: str) -> Sequence[Note]:
        """A project's notes, newest first (index ix_notes_project_update)."""
        async with self._sessions() as session:
            query = (
                select(Note)
                .where(Note.project_id == project_id)
                .order_by(col(Note.update_time).desc(), col(Note.id))
            )
            return (await session.exec(query)).all()

    @db_retry
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

    @db_retry
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

    @db_retry
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
