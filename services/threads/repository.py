"""SQL of the threads service: one repository over its tables, each table's
statements in its own module of ``services.threads.tables``."""

from __future__ import annotations

from services.threads.tables.agents import AgentsTable
from services.threads.tables.entries import AppendResult, EntriesTable, EntryFilter, EntryRow, NewEntry
from services.threads.tables.imports import ImportedThread, ImportsTable
from services.threads.tables.provider_sessions import ProviderSessionsTable
from services.threads.tables.registry import RegistryTable
from services.threads.tables.segments import RotationPolicy, SegmentsTable
from services.threads.tables.threads import ThreadsTable

__all__ = [
    "AppendResult",
    "EntryFilter",
    "EntryRow",
    "ImportedThread",
    "NewEntry",
    "RotationPolicy",
    "ThreadsRepository",
]


class ThreadsRepository(
    AgentsTable, RegistryTable, ThreadsTable, EntriesTable, SegmentsTable, ProviderSessionsTable, ImportsTable
):
    """Every table of the threads service, over one session factory."""
