from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest

from tests.databases import BACKENDS, database_url, drop_templates

DatabaseFactory = Callable[[str], AbstractAsyncContextManager[str]]


@pytest.fixture(scope="session", autouse=True)
def migrated_templates() -> Iterator[None]:
    """The migrated template databases live for the whole run, then go."""
    yield
    with ThreadPoolExecutor(max_workers=1) as pool:  # the main thread may run a loop
        pool.submit(asyncio.run, drop_templates()).result()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Every test that touches a database runs once on SQLite, once on PostgreSQL."""
    return str(request.param)


@pytest.fixture
def make_database(backend: str, tmp_path: Path) -> DatabaseFactory:
    """make_database("threads") -> async context manager yielding a URL: the
    database of that service, already migrated; any other name (e.g. "svc")
    gives an empty database."""

    def factory(service: str) -> AbstractAsyncContextManager[str]:
        return database_url(backend, tmp_path, service)

    return factory


@pytest.fixture
async def db_url(make_database: DatabaseFactory) -> AsyncIterator[str]:
    async with make_database("svc") as url:
        yield url
