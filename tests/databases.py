"""Test databases: an SQLite file, or a PostgreSQL database created for the
test and dropped after it. Which PostgreSQL: SWITCHBOARD_TEST_POSTGRES_URL
(default postgresql://postgres@127.0.0.1:5432/postgres). Without a server the
PostgreSQL half is skipped with the reason, unless SWITCHBOARD_REQUIRE_POSTGRES=1
(as in CI), where it fails."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import pytest

ADMIN_URL = os.environ.get("SWITCHBOARD_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
REQUIRE_POSTGRES = os.environ.get("SWITCHBOARD_REQUIRE_POSTGRES") == "1"
BACKENDS = ["sqlite", "postgres"]


async def _admin() -> asyncpg.Connection:
    try:
        return await asyncpg.connect(ADMIN_URL, timeout=5)
    except (OSError, asyncpg.PostgresError) as exc:
        message = f"PostgreSQL at {ADMIN_URL} is not reachable ({exc}); the PostgreSQL half did not run"
        if REQUIRE_POSTGRES:
            pytest.fail(message)
        pytest.skip(message)


async def create_database(prefix: str) -> str:
    """Creates a fresh database; returns its asyncpg SQLAlchemy URL."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = await _admin()
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    base = ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://", 1)
    return f"{base}/{name}"


async def drop_database(url: str) -> None:
    name = url.rsplit("/", 1)[1]
    admin = await _admin()
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@asynccontextmanager
async def postgres_database(prefix: str = "sbtest") -> AsyncIterator[str]:
    """A fresh database for the block, dropped after it."""
    url = await create_database(prefix)
    try:
        yield url
    finally:
        await drop_database(url)


@asynccontextmanager
async def database_url(backend: str, folder: Path, service: str) -> AsyncIterator[str]:
    if backend == "sqlite":
        yield f"sqlite+aiosqlite:///{folder / (service + '.db')}"
    else:
        async with postgres_database(f"sbtest_{service}") as url:
            yield url
