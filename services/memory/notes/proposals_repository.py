"""SQL of note proposals. A decision is a conditional update (from pending
only), so two members deciding at once decide once."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, tuple_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from services.memory.notes.models import NoteProposalRow
from services.shared.db import is_unique_violation
from services.shared.db_retry import db_retry, retry_if

PENDING = 1


class NoteProposalsRepository:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions

    async def insert(self, row: NoteProposalRow) -> NoteProposalRow:
        """Writes the proposal, or returns the one made earlier with the same
        (proposer, request_id): a retried proposal is written once."""
        return await retry_if(bool(row.request_id), lambda: self._insert(row), "NoteProposals.insert")

    async def _insert(self, row: NoteProposalRow) -> NoteProposalRow:
        async with self._sessions() as session:
            session.add(row)
            try:
                await session.commit()
                return row
            except IntegrityError as exc:
                if not is_unique_violation(exc) or not row.request_id:
                    raise
            await session.rollback()
        earlier = await self.by_request(row.proposer_user_id, row.request_id)
        if earlier is None:
            raise RuntimeError(f"note proposal {row.id} hit an unexpected unique constraint")
        return earlier

    @db_retry
    async def by_request(self, proposer: str, request_id: str) -> NoteProposalRow | None:
        async with self._sessions() as session:
            query = select(NoteProposalRow).where(
                NoteProposalRow.proposer_user_id == proposer, NoteProposalRow.request_id == request_id
            )
            return (await session.exec(query)).first()

    @db_retry
    async def get(self, proposal_id: str) -> NoteProposalRow | None:
        async with self._sessions() as session:
            return await session.get(NoteProposalRow, proposal_id)

    @db_retry
    async def pending_count(self, project_id: str) -> int:
        async with self._sessions() as session:
            query = (
                select(func.count())
                .select_from(NoteProposalRow)
                .where(col(NoteProposalRow.project_id) == project_id, col(NoteProposalRow.state) == PENDING)
            )
            return int((await session.exec(query)).one())

    @db_retry
    async def page(
        self, project_id: str, state: int, after: tuple[datetime, str] | None, limit: int
    ) -> Sequence[NoteProposalRow]:
        """Newest first (create_time, id descending)."""
        query = select(NoteProposalRow).where(col(NoteProposalRow.project_id) == project_id)
        if state:
            query = query.where(col(NoteProposalRow.state) == state)
        if after is not None:
            query = query.where(
                tuple_(col(NoteProposalRow.create_time), col(NoteProposalRow.id)) < tuple_(*after)
            )
        query = query.order_by(col(NoteProposalRow.create_time).desc(), col(NoteProposalRow.id).desc()).limit(
            limit
        )
        async with self._sessions() as session:
            return (await session.exec(query)).all()

    @db_retry
    async def decide(
        self,
        proposal_id: str,
        state: int,
        by: str,
        when: datetime | None,
        claim: str,
        from_state: int = PENDING,
    ) -> bool:
        """Moves the proposal from ``from_state`` to ``state``, marking it with
        ``claim`` (in result_note_id until the note is written); False when it
        was not in ``from_state`` (decided meanwhile)."""
        async with self._sessions() as session:
            result = await session.exec(
                update(NoteProposalRow)
                .where(col(NoteProposalRow.id) == proposal_id, col(NoteProposalRow.state) == from_state)
                .values(state=state, decided_by_user_id=by, decide_time=when, result_note_id=claim)
            )
            await session.commit()
            return bool(result.rowcount)

    @db_retry
    async def set_result(self, proposal_id: str, note_id: str) -> None:
        async with self._sessions() as session:
            await session.exec(
                update(NoteProposalRow)
                .where(col(NoteProposalRow.id) == proposal_id)
                .values(result_note_id=note_id)
            )
            await session.commit()
