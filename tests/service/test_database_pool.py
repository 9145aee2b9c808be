"""The test databases' pool on PostgreSQL (tests/databases.py): a database a
test used is emptied and handed to the next test of the same service, its
template's rows back (the router's seed skills reference each other's rows);
one whose schema a test changed is dropped instead."""

from __future__ import annotations

import asyncpg
import pytest

from tests.databases import _SERVER, SERVICES, _databases, give_back_database, take_database


def _plain(url: str) -> str:
    return f"{_SERVER}/{url.rsplit('/', 1)[1]}"


async def _counts(url: str, tables: list[str]) -> dict[str, int]:
    connection = await asyncpg.connect(_plain(url), timeout=10)
    try:
        return {t: await connection.fetchval(f'SELECT count(*) FROM "{t}"') for t in tables}
    finally:
        await connection.close()


@pytest.mark.parametrize("service", SERVICES)
async def test_a_used_database_is_emptied_and_reused_with_its_template_rows(service: str) -> None:
    url = await take_database("sbpool", service)
    template = await _databases.template(service)
    tables = [t for t in template.tables if not t.startswith("alembic_version")]
    seeded = {t: len(template.rows[t][1]) if t in template.rows else 0 for t in tables}
    assert await _counts(url, tables) == seeded
    # A test may delete the seeded rows too: they come back for the next one.
    connection = await asyncpg.connect(_plain(url), timeout=10)
    try:
        for table in reversed(tables):
            await connection.execute(f'DELETE FROM "{table}"')
    finally:
        await connection.close()
    await give_back_database(url, service)
    again = await take_database("sbpool", service)
    try:
        assert again == url, "the database was dropped instead of reused"
        assert await _counts(again, tables) == seeded
    finally:
        await give_back_database(again, service)


async def test_a_database_whose_schema_changed_is_dropped() -> None:
    url = await take_database("sbpool", "threads")
    connection = await asyncpg.connect(_plain(url), timeout=10)
    try:
        await connection.execute("CREATE TABLE left_behind (id int)")
    finally:
        await connection.close()
    await give_back_database(url, "threads")
    again = await take_database("sbpool", "threads")
    try:
        assert again != url
    finally:
        await give_back_database(again, "threads")
