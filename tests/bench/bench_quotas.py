"""What the per-user run quotas cost a run's insert: RunsRepository.insert_run
for one user, without the quota check and with it (limits out of reach, so
every insert pays for the two indexed counts under the user's lock and none
is refused), on SQLite and PostgreSQL. Half the user's runs are left
`running`, so both counts have rows to find.

    PYTHONPATH=gen:. .venv/bin/python -m tests.bench.bench_quotas [--runs 600]

Prints milliseconds per insert (p50, p99, after a warm-up of 50); the two
configurations take turns, insert by insert."""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from pathlib import Path

from services.engine.models import AgentRun
from services.engine.quotas import RunQuota
from services.engine.repository import RunsRepository
from services.shared.db import create_engine
from tests.databases import database_url

WARM_UP = 50


async def compare(off_url: str, on_url: str, runs: int) -> dict[str, list[float]]:
    """Inserts into both databases in turn (off, on, off, on...), so that a
    busy machine slows both alike."""
    engines = [create_engine(off_url), create_engine(on_url)]
    repos = {
        "off": (RunsRepository(engines[0]), None),
        "on": (RunsRepository(engines[1]), RunQuota(10**6, 10**6)),
    }
    took: dict[str, list[float]] = {"off": [], "on": []}
    try:
        for index in range(runs):
            for label, (repo, quota) in repos.items():
                run = AgentRun(
                    id=str(uuid.uuid4()),
                    user_id="bench",
                    conversation_id=str(uuid.uuid4()),
                    status="running" if index % 2 else "done",
                )
                began = time.perf_counter()
                await repo.insert_run(run, b"", quota=quota)
                took[label].append((time.perf_counter() - began) * 1000)
    finally:
        for engine in engines:
            await engine.dispose()
    return {label: sorted(values[WARM_UP:]) for label, values in took.items()}


async def main(runs: int) -> None:
    print("| backend | quota check | p50 ms | p99 ms |\n|---|---|---|---|")
    for backend in ("sqlite", "postgres"):
        with tempfile.TemporaryDirectory() as off_folder, tempfile.TemporaryDirectory() as on_folder:
            async with (
                database_url(backend, Path(off_folder), "engine") as off_url,
                database_url(backend, Path(on_folder), "engine") as on_url,
            ):
                took = await compare(off_url, on_url, runs)
        for label, values in took.items():
            p50, p99 = values[len(values) // 2], values[int(len(values) * 0.99)]
            print(f"| {backend} | {label} | {p50:.2f} | {p99:.2f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=600)
    args = parser.parse_args()
    if args.runs <= WARM_UP:
        parser.error(f"--runs must be more than the {WARM_UP} warm-up inserts")
    asyncio.run(main(args.runs))
