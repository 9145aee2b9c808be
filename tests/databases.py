"""Test databases: an SQLite file, or a PostgreSQL database of the test's own.
Which PostgreSQL: SWITCHBOARD_TEST_POSTGRES_URL (default
postgresql://postgres@127.0.0.1:5432/postgres). Without a server the
PostgreSQL half is skipped with the reason, unless SWITCHBOARD_REQUIRE_POSTGRES=1
(as in CI), where it fails. The backend ``pgbouncer`` is the same PostgreSQL
database reached through PgBouncer in transaction mode (tests/pgbouncer.py:
one per test process, started on first use, stopped with the templates);
the modules that matter behind a pooler add it to their backends.

A database named after a service (threads, memory, router, engine) arrives
migrated to that service's newest revision: its migrations run once per test
run, into a template (a PostgreSQL database cloned with ``CREATE DATABASE …
TEMPLATE``, an SQLite file copied), so the service's start-up migration finds
nothing to do. Any other name gives an empty database, for the tests of the
migrations themselves.

PostgreSQL's DROP DATABASE forces a checkpoint of the whole server (seconds
on a busy machine), so a test's database is not dropped after it: it is
emptied (connections closed, every row deleted and the template's rows put
back, referenced tables first; an empty database loses its schema) and
handed to the next test that asks for the same kind. A database whose
schema a test changed is dropped instead. The pooled databases are dropped
once, at the end of the run."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass, field
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from sqlalchemy import MetaData
from sqlalchemy.ext.asyncio import AsyncEngine

import services
from services.shared.db import create_engine
from services.shared.migrations import upgrade_to_head
from tests.pgbouncer import PGBOUNCER, PgBouncer, pgbouncer

ADMIN_URL = os.environ.get("SWITCHBOARD_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
REQUIRE_POSTGRES = os.environ.get("SWITCHBOARD_REQUIRE_POSTGRES") == "1"
BACKENDS = ["sqlite", "postgres"]
# A module's pytestmark: its tests on both backends and on PostgreSQL through
# PgBouncer (the parameter overrides the conftest's ``backend`` fixture).
ALSO_THROUGH_PGBOUNCER = pytest.mark.parametrize("backend", [*BACKENDS, PGBOUNCER])
SERVICES = ("threads", "memory", "router", "engine")
_SERVER = ADMIN_URL.rsplit("/", 1)[0]
_BASE_URL = _SERVER.replace("postgresql://", "postgresql+asyncpg://", 1)

# What a database's schema is made of: a test that changed it gets a new database.
_SCHEMA_QUERY = """
SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable
       || ' ' || coalesce(column_default, '')
  FROM information_schema.columns WHERE table_schema = 'public'
UNION ALL SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = 'public'
UNION ALL SELECT 'constraint ' || conrelid::regclass::text || ' ' || pg_get_constraintdef(oid)
  FROM pg_constraint WHERE connamespace = 'public'::regnamespace
UNION ALL SELECT 'object ' || relkind::text || ' ' || relname
  FROM pg_class WHERE relnamespace = 'public'::regnamespace
UNION ALL SELECT 'function ' || proname FROM pg_proc WHERE pronamespace = 'public'::regnamespace
UNION ALL SELECT 'type ' || typname FROM pg_type WHERE typnamespace = 'public'::regnamespace
ORDER BY 1
"""
_TABLES_QUERY = "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
_SEQUENCES_QUERY = "SELECT sequencename, last_value FROM pg_sequences WHERE schemaname = 'public' ORDER BY 1"
# (table, table it references): a referenced table's rows are put back first.
_REFERENCES_QUERY = """
SELECT referencing.relname, referenced.relname
  FROM pg_constraint
  JOIN pg_class referencing ON referencing.oid = pg_constraint.conrelid
  JOIN pg_class referenced ON referenced.oid = pg_constraint.confrelid
 WHERE contype = 'f' AND connamespace = 'public'::regnamespace
"""


async def _admin() -> asyncpg.Connection:
    try:
        return await asyncpg.connect(ADMIN_URL, timeout=5)
    except (OSError, asyncpg.PostgresError) as exc:
        message = f"PostgreSQL at {ADMIN_URL} is not reachable ({exc}); the PostgreSQL half did not run"
        if REQUIRE_POSTGRES:
            pytest.fail(message)
        pytest.skip(message)


def migrations_dir(service: str) -> Path:
    return Path(services.__file__).parent / service / "migrations"


async def _migrate(url: str, service: str) -> None:
    engine = create_engine(url)
    try:
        await upgrade_to_head(engine, migrations_dir(service), service)
    finally:
        await engine.dispose()  # no connection left: the template can be cloned


async def _prepare_template(url: str, service: str) -> None:
    """Migrates a template. The router's also gets its catalog's vectors for
    the hashing embedder the tests run it with, stored as its first start
    would store them: each test's router then reuses them, as a restarted
    router does, instead of embedding and writing them again. (A router's
    first start, embedding and storing, is tested on databases of their own:
    tests/service/test_embedder_change.py.)"""
    await _migrate(url, service)
    if service == "router":
        from services.router.server import open_domain
        from services.router.settings import RouterSettings

        _, closers = await open_domain(RouterSettings(port=0, database_url=url, embedder="hashing"))
        for close in reversed(closers):
            await close()  # the engine disposed last: no connection left


def _referenced_first(tables: list[str], references: list[tuple[str, str]]) -> list[str]:
    """``tables`` ordered so that a table comes after those its foreign keys
    reference (a clone's rows are put back in this order)."""
    graph: dict[str, set[str]] = {table: set() for table in tables}
    for table, referenced in references:
        if table != referenced and table in graph and referenced in graph:
            graph[table].add(referenced)
    try:
        return list(TopologicalSorter(graph).static_order())
    except CycleError:  # rows put back in this order may fail: the database is dropped then
        return tables


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass
class _Template:
    """A migrated PostgreSQL template, and what a clone of it holds: its
    schema and the rows its migrations wrote (the router's seed skills)."""

    name: str
    schema: list[str]
    rows: dict[str, tuple[list[str], list[tuple[Any, ...]]]]  # table -> (columns, records)
    tables: list[str]  # a table after those it references
    sequences: list[tuple[str, int | None]]  # name -> last value (None: never used)


@dataclass
class _Databases:
    """This run's templates and the databases waiting for their next test.
    Names carry the process id, so parallel test processes keep their own."""

    templates: dict[str, _Template] = field(default_factory=dict)
    sqlite_templates: dict[str, Path] = field(default_factory=dict)
    idle: dict[str, list[str]] = field(default_factory=dict)  # kind -> database names
    made: set[str] = field(default_factory=set)  # every database of the pool, to drop at the end
    folder: Path | None = None
    locks: dict[tuple[int, str], asyncio.Lock] = field(default_factory=dict)

    def lock(self, key: str) -> asyncio.Lock:
        """One at a time per key in this loop: templates are made one by one
        (Alembic's command context is global to the process)."""
        # Each test runs its own event loop; a lock belongs to one loop.
        loop_key = (id(asyncio.get_running_loop()), key)
        if loop_key not in self.locks:
            self.locks = {k: v for k, v in self.locks.items() if k[0] == loop_key[0]}
            self.locks[loop_key] = asyncio.Lock()
        return self.locks[loop_key]

    async def template(self, service: str) -> _Template:
        async with self.lock("migrations"):
            if service not in self.templates:
                name = f"sbtemplate_{service}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
                admin = await _admin()
                try:
                    await admin.execute(f"CREATE DATABASE {_quoted(name)}")
                finally:
                    await admin.close()
                self.made.add(name)
                await _prepare_template(f"{_BASE_URL}/{name}", service)
                connection = await asyncpg.connect(f"{_SERVER}/{name}", timeout=10)
                try:
                    schema = [r[0] for r in await connection.fetch(_SCHEMA_QUERY)]
                    tables = [r[0] for r in await connection.fetch(_TABLES_QUERY)]
                    sequences = [(r[0], r[1]) for r in await connection.fetch(_SEQUENCES_QUERY)]
                    references = await connection.fetch(_REFERENCES_QUERY)
                    tables = _referenced_first(tables, [(r[0], r[1]) for r in references])
                    rows: dict[str, tuple[list[str], list[tuple[Any, ...]]]] = {}
                    for table in tables:
                        if table.startswith("alembic_version"):
                            continue
                        records = await connection.fetch(f"SELECT * FROM {_quoted(table)}")
                        if records:
                            rows[table] = (list(records[0].keys()), [tuple(r.values()) for r in records])
                finally:
                    await connection.close()
                self.templates[service] = _Template(name, schema, rows, tables, sequences)
            return self.templates[service]

    async def sqlite_template(self, service: str) -> Path:
        async with self.lock("migrations"):
            if service not in self.sqlite_templates:
                if self.folder is None:
                    self.folder = Path(tempfile.mkdtemp(prefix="sb-templates-"))
                path = self.folder / f"{service}.db"
                await _prepare_template(f"sqlite+aiosqlite:///{path}", service)
                self.sqlite_templates[service] = path
            return self.sqlite_templates[service]

    async def take(self, prefix: str, service: str | None) -> str:
        """A database name: an idle one of the same kind, or a new one."""
        kind = service or ""
        if self.idle.get(kind):
            return self.idle[kind].pop()
        name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        await _create(name, service)
        self.made.add(name)
        return name

    async def give_back(self, name: str, service: str | None) -> None:
        """Empties the database for the next test, or drops it when that is
        not possible (its schema changed, a lock stayed held)."""
        try:
            reusable = await self._reset(name, service)
        except (OSError, asyncpg.PostgresError, TimeoutError):
            reusable = False
        if reusable:
            self.idle.setdefault(service or "", []).append(name)
        else:
            self.made.discard(name)
            await drop_database(f"{_BASE_URL}/{name}")

    async def _reset(self, name: str, service: str | None) -> bool:
        connection = await asyncpg.connect(f"{_SERVER}/{name}", timeout=10)
        try:
            # Whatever the test left connected (a killed service, a leaked pool)
            # goes; asked from inside the database, which spares a connection.
            await connection.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            await connection.execute("SET lock_timeout = '10s'")
            if service is None:
                async with connection.transaction():
                    await connection.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
                return True
            template = await self.template(service)
            if [r[0] for r in await connection.fetch(_SCHEMA_QUERY)] != template.schema:
                return False
            tables = [t for t in template.tables if not t.startswith("alembic_version")]
            async with connection.transaction():
                # DELETE, not TRUNCATE: on tables of a few rows it is several
                # times faster (TRUNCATE makes new files for every table).
                # Referencing tables first; sequences restart below.
                if tables:
                    await connection.execute("".join(f"DELETE FROM {_quoted(t)};" for t in reversed(tables)))
                for table, (columns, records) in template.rows.items():
                    await connection.copy_records_to_table(table, records=records, columns=columns)
                for sequence, last_value in template.sequences:
                    await connection.execute(f"ALTER SEQUENCE {_quoted(sequence)} RESTART")
                    if last_value is not None:
                        await connection.execute(
                            "SELECT setval($1::regclass, $2::bigint)", _quoted(sequence), last_value
                        )
            return True
        finally:
            await connection.close()

    async def drop_all(self) -> None:
        if self.made:
            admin = await asyncpg.connect(ADMIN_URL, timeout=5)
            try:
                for name in sorted(self.made):
                    await admin.execute(f"DROP DATABASE IF EXISTS {_quoted(name)} WITH (FORCE)")
            finally:
                await admin.close()
        self.made.clear()
        self.idle.clear()
        self.templates.clear()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
            self.sqlite_templates.clear()


_databases = _Databases()
# This process's PgBouncer, once a test asked for one.
_poolers = ExitStack()
_pooler: list[PgBouncer] = []


def shared_pgbouncer() -> PgBouncer:
    """The PgBouncer of this test process, in front of the test server
    (started on first use)."""
    if not _pooler or _pooler[0].process.poll() is not None:
        _pooler[:] = [_poolers.enter_context(pgbouncer(ADMIN_URL))]
    return _pooler[0]


async def drop_templates() -> None:
    """Stops the PgBouncer, drops this run's templates and pooled databases
    (once, at the end of the run)."""
    _poolers.close()
    _pooler.clear()
    await _databases.drop_all()


async def create_database(prefix: str, service: str | None = None) -> str:
    """Creates a fresh database of the caller's own (not pooled), migrated for
    ``service`` when one is given (a clone of its template); returns its
    asyncpg SQLAlchemy URL. Drop it with :func:`drop_database`."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    await _create(name, service)
    return f"{_BASE_URL}/{name}"


async def _create(name: str, service: str | None) -> None:
    """CREATE DATABASE, a clone of ``service``'s template when one is given."""
    template = await _databases.template(service) if service else None
    admin = await _admin()
    try:
        clause = f" TEMPLATE {_quoted(template.name)}" if template else ""
        await admin.execute(f"CREATE DATABASE {_quoted(name)}{clause}")
    finally:
        await admin.close()


async def fetch_rows(url: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    """The rows of ``sql`` on the database of ``url`` (an asyncpg SQLAlchemy
    URL), on a connection of its own."""
    connection = await asyncpg.connect(url.replace("+asyncpg", ""), timeout=10)
    try:
        return await connection.fetch(sql, *args)
    finally:
        await connection.close()


async def drop_database(url: str) -> None:
    name = url.rsplit("/", 1)[1]
    admin = await _admin()
    try:
        await admin.execute(f"DROP DATABASE IF EXISTS {_quoted(name)} WITH (FORCE)")
    finally:
        await admin.close()


async def take_database(prefix: str, service: str | None = None) -> str:
    """A pooled database, empty or migrated for ``service``; its URL. Hand it
    back with :func:`give_back_database` (same ``service``)."""
    return f"{_BASE_URL}/{await _databases.take(prefix, service)}"


async def give_back_database(url: str, service: str | None = None) -> None:
    await _databases.give_back(url.rsplit("/", 1)[1], service)


@asynccontextmanager
async def postgres_database(prefix: str = "sbtest", service: str | None = None) -> AsyncIterator[str]:
    """A database of the block's own: empty, or migrated for ``service``;
    emptied after it for the next block that asks for the same."""
    url = await take_database(prefix, service)
    try:
        yield url
    finally:
        await give_back_database(url, service)


async def sqlite_file(path: Path, service: str) -> None:
    """Puts a copy of ``service``'s migrated template at ``path``."""
    template = await _databases.sqlite_template(service)
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, path)


@asynccontextmanager
async def database_url(backend: str, folder: Path, service: str) -> AsyncIterator[str]:
    """A database for the block; migrated when ``service`` names a service."""
    migrated = service if service in SERVICES else None
    if backend == "sqlite":
        path = folder / (service + ".db")
        if migrated and not path.exists():
            await sqlite_file(path, migrated)
        yield f"sqlite+aiosqlite:///{path}"
    else:
        async with postgres_database(f"sbtest_{service}", migrated) as url:
            if backend == PGBOUNCER:
                pooler = shared_pgbouncer()
                await pooler.reconnect(url.rsplit("/", 1)[1])
                url = pooler.url(url)
            yield url


@asynccontextmanager
async def engine_with_tables(
    url: str, metadata: MetaData, prepared_statements: bool = True
) -> AsyncIterator[AsyncEngine]:
    """An engine on ``url`` with ``metadata``'s tables, dropped after the block."""
    engine = create_engine(url, prepared_statements=prepared_statements)
    async with engine.begin() as connection:
        await connection.run_sync(metadata.create_all)
    try:
        yield engine
    finally:
        async with engine.begin() as connection:
            await connection.run_sync(metadata.drop_all)
        await engine.dispose()
