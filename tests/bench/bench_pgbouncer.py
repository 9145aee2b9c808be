"""What named prepared statements save, on PostgreSQL directly and through
PgBouncer in transaction mode (Debian's, started here: tests/pgbouncer.py):
the driver (services/shared/driver.py) runs a lone indexed SELECT and a
batch of three statements, ``--statements`` times each, with asyncpg's
statement cache on (``prepared``) and off (``unnamed``, what
``database_prepared_statements=false`` does). One client, so a named
statement stays on the server connection PgBouncer lends it. Per statement:
wall time and this process's CPU, in microseconds; the configurations take
turns ``--rounds`` times. Prints one JSON line.

    .venv/bin/python -m tests.bench.bench_pgbouncer --statements 3000 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

import asyncpg

from services.shared.db import create_engine
from services.shared.driver import Driver, Statement
from tests.databases import ADMIN_URL, drop_templates, postgres_database
from tests.pgbouncer import pgbouncer

LONE = "SELECT id, label FROM bench_rows WHERE id = $1"
BATCH = [
    "UPDATE bench_rows SET label = $1 WHERE id = $2",
    "SELECT label FROM bench_rows WHERE id = $1",
    "UPDATE bench_rows SET label = $1 WHERE id = $2",
]
ROWS = 1000


async def per_statement(url: str, prepared: bool, statements: int) -> dict[str, tuple[float, float]]:
    """(wall, CPU) microseconds per statement of the lone query and of the batch."""
    engine = create_engine(url, prepared_statements=prepared)
    driver = Driver(engine)
    try:
        for i in range(200):  # warm: connection, codecs, caches
            await driver.fetchrow(LONE, i % ROWS + 1)
        wall, cpu = time.perf_counter(), time.process_time()
        for i in range(statements):
            await driver.fetchrow(LONE, i % ROWS + 1)
        lone = ((time.perf_counter() - wall) / statements, (time.process_time() - cpu) / statements)
        batches = statements // len(BATCH)
        wall, cpu = time.perf_counter(), time.process_time()
        for i in range(batches):
            key = i % ROWS + 1
            args = [("été", key), (key,), ("hiver", key)]
            await driver.batch([Statement(sql, a) for sql, a in zip(BATCH, args, strict=True)])
        done = batches * len(BATCH)
        batch = ((time.perf_counter() - wall) / done, (time.process_time() - cpu) / done)
    finally:
        await engine.dispose()
    return {"lone": lone, "batch": batch}


async def measure(statements: int, rounds: int) -> dict[str, object]:
    async with postgres_database("sbbench_pooled") as direct:
        connection = await asyncpg.connect(direct.replace("+asyncpg", ""))
        try:
            await connection.execute(
                "CREATE TABLE bench_rows (id int PRIMARY KEY, label text);"
                f"INSERT INTO bench_rows SELECT g, 'x' || g FROM generate_series(1, {ROWS}) g"
            )
        finally:
            await connection.close()
        with pgbouncer(ADMIN_URL, pool_size=5) as pooler:
            urls = {"direct": direct, "pgbouncer": pooler.url(direct)}
            samples: dict[str, list[tuple[float, float]]] = {}
            for _ in range(rounds):
                for path, url in urls.items():
                    for prepared in (True, False):
                        measured = await per_statement(url, prepared, statements)
                        for kind, value in measured.items():
                            key = f"{path} {'prepared' if prepared else 'unnamed'} {kind}"
                            samples.setdefault(key, []).append(value)
    await drop_templates()
    return {
        key: {
            "wall_us": round(statistics.median(w for w, _ in values) * 1e6),
            "cpu_us": round(statistics.median(c for _, c in values) * 1e6),
        }
        for key, values in samples.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.bench_pgbouncer", description=__doc__)
    parser.add_argument("--statements", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.statements, args.rounds))))


if __name__ == "__main__":
    main()
