from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest

from tests.databases import BACKENDS, database_url

DatabaseFactory = Callable[[str], AbstractAsyncContextManager[str]]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Every test that touches a database runs once on SQLite, once on PostgreSQL."""
    return str(request.param)


@pytest.fixture
def make_database(backend: str, tmp_path: Path) -> DatabaseFactory:
    """make_database("threads") -> async context manager yielding a URL."""

    def factory(service: str) -> AbstractAsyncContextManager[str]:
        return database_url(backend, tmp_path, service)

    return factory


@pytest.fixture
async def db_url(make_database: DatabaseFactory) -> AsyncIterator[str]:
    async with make_database("svc") as url:
        yield url
