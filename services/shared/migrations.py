"""Alembic migrations, run programmatically: at service start-up or by the
``migrate`` command of each service. Each service keeps its revisions in its
own ``migrations/`` folder and its own version table."""

from __future__ import annotations

from pathlib import Path

from alembic import command, context
from alembic.config import Config
from sqlalchemy import Connection, MetaData
from sqlalchemy.ext.asyncio import AsyncEngine


def alembic_config(migrations_dir: Path, service_name: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir))
    config.attributes["version_table"] = f"alembic_version_{service_name}"
    return config


async def upgrade_to_head(engine: AsyncEngine, migrations_dir: Path, service_name: str) -> None:
    """Brings the database to the newest revision (a no-op when it is there)."""
    config = alembic_config(migrations_dir, service_name)

    def _upgrade(connection: Connection) -> None:
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
