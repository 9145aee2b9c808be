"""Revision counters of the memory service, one per (project, scope).

Every write of notes or live state bumps that scope's counter in the same
transaction, so a replica can tell from one primary-key read whether what it
cached (a recall index, a live-state snapshot) is still current."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel import col
from sqlmodel.ext.asyncio.session import AsyncSession

from services.memory.models import Revision
from services.shared.db import dialect_insert
from services.shared.db_retry import db_retry
from services.shared.gathered_reads import driver_of

NOTES = "notes"
LIVE = "live"


async def bump(session: AsyncSession, project: str, scope: str) -> int:
    """Adds one to the scope's counter, in the session's transaction, and
    returns the revision this write makes: the one before it is that minus
    one (what a cache of that revision lacks is this write alone)."""
    statement = dialect_insert(session, Revision).values(project_id=project, scope=scope, revision=1)
    statement = statement.on_conflict_do_update(
        index_elements=[col(Revision.project_id), col(Revision.scope)],
        set_={"revision": Revision.revision + 1},
    ).returning(col(Revision.revision))
    return int((await session.exec(statement)).scalar_one())


class RevisionedRepository:
    """A repository whose writes bump a revision, and that reads it."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions
        # The reads every run makes go straight to the driver.
        self._driver = driver_of(sessions)

    @db_retry
    async def revision(self, project: str, scope: str) -> int:
        row = await self._driver.fetchrow(
            "SELECT revision FROM memory_revisions WHERE project_id = $1 AND scope = $2", project, scope
        )
        return int(row[0]) if row is not None else 0
