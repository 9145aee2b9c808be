"""Each service's migrations build exactly the tables its models describe, on
SQLite and PostgreSQL, and running them twice is a no-op; replicas starting
at once on a new PostgreSQL database migrate it once."""

from __future__ import annotations

import asyncio
import importlib
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection, MetaData
from sqlmodel import SQLModel

from services.shared.db import create_engine
from services.shared.migrations import heads, upgrade_to_head, version_table
from tests.databases import postgres_database

SERVICES = ["threads", "memory", "router", "engine"]


def migrations_of(service: str) -> Path:
    return Path(importlib.import_module(f"services.{service}.server").__file__ or "").parent / "migrations"


def service_metadata(service: str) -> MetaData:
    """The tables declared in the service's model modules: every models.py and
    <topic>_models.py of its package, subpackages included."""
    folder = Path(importlib.import_module(f"services.{service}").__file__ or "").parent
    metadata = MetaData()
    for path in sorted([*folder.rglob("models.py"), *folder.rglob("*_models.py")]):
        module = ".".join(path.relative_to(folder).with_suffix("").parts)
        models = importlib.import_module(f"services.{service}.{module}")
        for value in vars(models).values():
            if isinstance(value, type) and issubclass(value, SQLModel) and hasattr(value, "__table__"):
                if value.__module__ == models.__name__:
                    value.__table__.to_metadata(metadata)
    return metadata


@pytest.mark.parametrize("service", SERVICES)
async def test_migrations_match_models(service: str, db_url: str) -> None:
    engine = create_engine(db_url)
    migrations = migrations_of(service)
    try:
        await upgrade_to_head(engine, migrations, service)
        await upgrade_to_head(engine, migrations, service)  # idempotent
        metadata = service_metadata(service)

        def diff(connection: Connection) -> list[Any]:
            context = MigrationContext.configure(
                connection, opts={"compare_type": False, "version_table": f"alembic_version_{service}"}
            )
            return [
                d
                for d in compare_metadata(context, metadata)
                if not (d[0] == "remove_table" and d[1].name.startswith("alembic_version"))
            ]

        async with engine.connect() as connection:
            differences = await connection.run_sync(diff)
        assert metadata.tables, f"no tables found for {service}"
        assert differences == [], differences
    finally:
        await engine.dispose()


async def test_eight_replicas_starting_at_once_migrate_a_new_database_once() -> None:
    """Each replica its own engine (its own connections), all at once: one
    upgrades under the migration lock, the others wait for it, then find the
    newest revision; none fails on a table another is creating."""
    migrations = migrations_of("engine")
    async with postgres_database("sbtest_migrate_at_once") as url:
        engines = [create_engine(url) for _ in range(8)]
        try:
            upgraded = await asyncio.gather(
                *(upgrade_to_head(engine, migrations, "engine") for engine in engines)
            )
            async with engines[0].connect() as connection:
                recorded = await connection.exec_driver_sql(
                    f"SELECT version_num FROM {version_table('engine')}"
                )
                versions = frozenset(recorded.scalars())
        finally:
            for engine in engines:
                await engine.dispose()
    assert sorted(upgraded) == [False] * 7 + [True]
    assert versions == heads(migrations)
