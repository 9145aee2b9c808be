"""Alembic migrations, run programmatically: at service start-up or by the
``migrate`` command of each service. Each service keeps its revisions in its
own ``migrations/`` folder and its own version table."""

from __future__ import annotations

import functools
from pathlib import Path

from alembic import command, context
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, MetaData
from sqlalchemy.ext.asyncio import AsyncEngine


def alembic_config(migrations_dir: Path, service_name: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir))
    config.attributes["version_table"] = f"alembic_version_{service_name}"
    return config


@functools.cache
def _heads(migrations_dir: Path) -> frozenset[str]:
    """The newest revisions of a folder: its files do not change while the
    process runs, so they are read (parsed, each one) once."""
    return frozenset(ScriptDirectory(str(migrations_dir)).get_heads())


async def upgrade_to_head(engine: AsyncEngine, migrations_dir: Path, service_name: str) -> None:
    """Brings the database to the newest revision (a no-op when it is there).
    A database already there, as at most starts, is told by its version table
    alone, without loading the revisions and the migration environment anew."""
    config = alembic_config(migrations_dir, service_name)
    version_table = config.attributes["version_table"]

    def _upgrade(connection: Connection) -> None:
        current = MigrationContext.configure(connection, opts={"version_table": version_table})
        if frozenset(current.get_current_heads()) == _heads(migrations_dir):
            return
        config.attributes["connection"] = connection
        command.upgrade(config, "head")

    async with engine.begin() as connection:
        await connection.run_sync(_upgrade)


def run_env(target_metadata: MetaData) -> None:
    """The body of every service's ``migrations/env.py``: online mode only, on
    the connection handed over by :func:`upgrade_to_head`."""
    config = context.config
    connection = config.attributes["connection"]
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        version_table=config.attributes["version_table"],
        render_as_batch=True,  # SQLite needs batch mode for ALTER TABLE
    )
    with context.begin_transaction():
        context.run_migrations()
