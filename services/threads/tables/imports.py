"""An imported agent thread, written in one transaction over the agents,
threads, entries, segments and provider sessions tables. Not retried."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete, insert, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col

from services.shared.audit import record
from services.shared.db import is_unique_violation
from services.shared.projects import personal_project_id
from services.shared.time import utcnow
from services.threads.models import Agent, Entry, ProviderSession, Segment, Thread, ThreadsAuditEvent
from services.threads.tables.base import TableRepository
from services.threads.tables.registry import add_member
from services.threads.tables.threads import live_agent_thread_query


@dataclass(frozen=True)
class ImportedThread:
    """An agent thread to write in one transaction (ImportAgentThread)."""

    thread_id: str
    agent_id: str
    entries: list[Entry]
    segments: list[Segment]
    sessions: list[ProviderSession]


class ImportsTable(TableRepository):
    async def import_agent_thread(self, imported: ImportedThread, audit: ThreadsAuditEvent) -> str | None:
        """Writes an imported agent thread in one transaction: the agent if it
        is missing, the thread (or the agent's empty live thread, reused), its
        entries, segments and provider sessions; returns the thread id. None when the agent has a
        live thread with entries, or a unique index refuses a row (another
        import won, the thread id or a live provider session is taken)."""
        now = utcnow()
        last = imported.entries[-1].sequence if imported.entries else 0
        async with self._sessions() as session:
            try:
                if await session.get(Agent, imported.agent_id) is None:
                    # Registered by the import: the importer owns it (``audit``'s actor).
                    owner = audit.actor
                    session.add(
                        Agent(
                            id=imported.agent_id,
                            display_name=imported.agent_id,
                            owner_id=owner,
                            project_id=personal_project_id(owner) if owner else "",
                        )
                    )
                    await session.flush()
                    await add_member(session, imported.agent_id, owner)
                    await record(session, audit)
                live = (await session.exec(live_agent_thread_query(imported.agent_id))).one_or_none()
                if live is None:
                    thread_id = imported.thread_id
                    session.add(
                        Thread(
                            id=thread_id,
                            kind="agent",
                            agent_id=imported.agent_id,
                            last_sequence=last,
                            create_time=now,
                            update_time=now,
                        )
                    )
                    await session.flush()
                else:
                    thread_id = live.id
                    # Compare-and-set on the empty thread: a concurrent append
                    # or import makes this match nothing.
                    claimed = await session.exec(
                        update(Thread)
                        .where(col(Thread.id) == thread_id, col(Thread.last_sequence) == 0)
                        .values(last_sequence=last, update_time=now)
                        .returning(col(Thread.id))
                    )
                    if claimed.one_or_none() is None:
                        return None
                    await session.exec(delete(Segment).where(col(Segment.thread_id) == thread_id))
                for entry in imported.entries:
                    entry.thread_id = thread_id
                for segment in imported.segments:
                    segment.thread_id = thread_id
                for row in imported.sessions:
                    row.agent_thread_id = thread_id
                if imported.entries:
                    await session.exec(insert(Entry), params=[e.model_dump() for e in imported.entries])
                session.add_all([*imported.segments, *imported.sessions])
                await session.commit()
            except IntegrityError as exc:
                if is_unique_violation(exc):
                    return None
                raise
            return thread_id
