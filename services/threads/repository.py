"""SQL of the threads service: one repository holding its tables, each
table's statements in its own module of ``services.threads.tables``."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlmodel.ext.asyncio.session import AsyncSession

from services.threads.tables.agents import AgentsTable
from services.threads.tables.entries import EntriesTable
from services.threads.tables.imports import ImportsTable
from services.threads.tables.provider_sessions import ProviderSessionsTable
from services.threads.tables.registry import RegistryTable
from services.threads.tables.segments import SegmentsTable
from services.threads.tables.threads import ThreadsTable


class ThreadsRepository:
    """Every table of the threads service, over one session factory."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self.agents = AgentsTable(sessions)
        # The agent registry's writes, each with its audit row; members; the audit log.
        self.registry = RegistryTable(sessions)
        self.threads = ThreadsTable(sessions)
        self.entries = EntriesTable(sessions)
        self.segments = SegmentsTable(sessions)
        self.provider_sessions = ProviderSessionsTable(sessions)
        self.imports = ImportsTable(sessions)
