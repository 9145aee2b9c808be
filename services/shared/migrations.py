"""Alembic migrations, run programmatically: at service start-up or by the
``migrate`` command of each service. Each service keeps its revisions in its
own ``migrations/`` folder and its own version table.

Most starts find the database at the newest revision already. That is told
by the version table and the revision files' own ``revision`` and
``down_revision`` lines, without importing Alembic (about 0.2 s of CPU per
process start, with the Mako and Pygments it loads); Alembic is loaded only
when there is something to upgrade."""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, MetaData, String, column, func, inspect, select, table
from sqlalchemy.ext.asyncio import AsyncEngine

if TYPE_CHECKING:
    from alembic.config import Config


def alembic_config(migrations_dir: Path, service_name: str) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_dir))
    config.attributes["version_table"] = version_table(service_name)
    return config


def version_table(service_name: str) -> str:
    return f"alembic_version_{service_name}"


def _declared(source: Path) -> tuple[str, frozenset[str]]:
    """A revision file's ``revision`` and the revisions it follows
    (``down_revision``: none, one, or several for a merge)."""
    values: dict[str, object] = {}
    for node in ast.parse(source.read_text(encoding="utf-8"), str(source)).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id in ("revision", "down_revision"):
            values[target.id] = ast.literal_eval(value)
    revision, down = values.get("revision"), values.get("down_revision")
    if not isinstance(revision, str):
        raise ValueError(f"{source}: no revision identifier")
    if down is None:
        return revision, frozenset()
    if isinstance(down, str):
        return revision, frozenset([down])
    if isinstance(down, tuple | list) and all(isinstance(d, str) for d in down):
        return revision, frozenset(down)
    raise ValueError(f"{source}: down_revision is not a revision or a list of them")


@functools.cache
def heads(migrations_dir: Path) -> frozenset[str]:
    """The newest revisions of a folder: those no other revision follows (as
    Alembic's ScriptDirectory.get_heads() finds them; a test checks both
    agree). The files do not change while the process runs."""
    declared = [_declared(path) for path in sorted((migrations_dir / "versions").glob("*.py"))]
    followed = frozenset().union(*(follows for _, follows in declared))
    return frozenset(revision for revision, _ in declared) - followed


def _current(connection: Connection, name: str) -> frozenset[str]:
    """The revisions the database records (none for a new database)."""
    if not inspect(connection).has_table(name):
        return frozenset()
    query = select(column("version_num", String)).select_from(table(name))
    return frozenset(connection.execute(query).scalars())


# The first key of the migration lock (two-key advisory lock form), apart
# from the other advisory locks the services take.
MIGRATION_LOCK_CLASS = 23


async def upgrade_to_head(engine: AsyncEngine, migrations_dir: Path, service_name: str) -> bool:
    """Brings the database to the newest revision (a no-op when it is there);
    True when it upgraded. On PostgreSQL the upgrade runs under an advisory
    lock of the service's, held to its commit: replicas starting at once
    wait for the first, then find the database at the newest revision."""

    def _upgrade(connection: Connection) -> bool:
        table_name = version_table(service_name)
        if _current(connection, table_name) == heads(migrations_dir):
            return False
        if connection.dialect.name == "postgresql":
            lock = func.pg_advisory_xact_lock(MIGRATION_LOCK_CLASS, func.hashtext(table_name))
            connection.execute(select(lock))
            # Read again under the lock: another replica may have migrated meanwhile.
            if _current(connection, table_name) == heads(migrations_dir):
                return False
        from alembic import command

        config = alembic_config(migrations_dir, service_name)
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
        return True

    async with engine.begin() as connection:
        return await connection.run_sync(_upgrade)


def run_env(target_metadata: MetaData) -> None:
    """The body of every service's ``migrations/env.py``: online mode only, on
    the connection handed over by :func:`upgrade_to_head`."""
    from alembic import context

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
