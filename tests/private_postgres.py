"""A PostgreSQL cluster of the test's own (initdb into a temporary folder, a
free port, trust authentication), which a test may stop and start at will:
the shared server of SWITCHBOARD_TEST_POSTGRES_URL is never restarted.

initdb refuses to run as root; as root the cluster runs as the ``postgres``
OS user (``runuser``), in a folder that user owns. Without the binaries (or,
as root, without that user) the test is skipped with the reason, unless
SWITCHBOARD_REQUIRE_POSTGRES=1 (CI), where it fails."""

from __future__ import annotations

import asyncio
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest

from tests.databases import REQUIRE_POSTGRES
from tests.processes import free_port


def _binary(name: str) -> str | None:
    found = shutil.which(name) or (
        f"/usr/local/bin/{name}" if os.path.exists(f"/usr/local/bin/{name}") else None
    )
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def _unavailable(reason: str) -> None:
    message = f"no private PostgreSQL cluster: {reason}"
    if REQUIRE_POSTGRES:
        pytest.fail(message)
    pytest.skip(message)


@dataclass
class PrivateCluster:
    folder: Path
    port: int
    pg_ctl: str
    as_user: list[str]  # ["runuser", "-u", "postgres", "--"] as root, else []

    @property
    def data(self) -> Path:
        return self.folder / "data"

    @property
    def log(self) -> Path:
        return self.folder / "postgres.log"

    def url(self, database: str = "postgres") -> str:
        """The SQLAlchemy (asyncpg) URL of ``database``."""
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/{database}"

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    async def _pg_ctl(self, *args: str) -> None:
        options = (
            f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c full_page_writes=off -c max_connections=200"
        )
        argv = [*self.as_user, self.pg_ctl, "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60"]
        process = await asyncio.create_subprocess_exec(
            *argv, *args, "-o", options, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        output, _ = await process.communicate()
        assert process.returncode == 0, f"pg_ctl {' '.join(args)} failed: {output.decode()}"

    async def start(self) -> None:
        await self._pg_ctl("start")

    async def stop(self) -> None:
        """Fast shutdown: open transactions are rolled back, connections closed."""
        await self._pg_ctl("stop", "-m", "fast")

    async def restart(self, down_seconds: float = 0.0) -> None:
        """Stops (fast), stays down ``down_seconds``, starts again."""
        await self.stop()
        await asyncio.sleep(down_seconds)
        await self.start()

    async def create_database(self, name: str) -> str:
        connection = await asyncpg.connect(self.dsn(), timeout=10)
        try:
            await connection.execute(f'CREATE DATABASE "{name}"')
        finally:
            await connection.close()
        return self.url(name)


@asynccontextmanager
async def private_cluster() -> AsyncIterator[PrivateCluster]:
    """A running cluster for the block; stopped and removed after it."""
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    if initdb is None or pg_ctl is None:
        _unavailable("initdb / pg_ctl not found (PATH, /usr/local/bin, /usr/lib/postgresql/*/bin)")
    assert initdb is not None and pg_ctl is not None
    as_user: list[str] = []
    folder = Path(tempfile.mkdtemp(prefix="sb-pg-"))
    if os.geteuid() == 0:
        # initdb refuses root: the cluster belongs to the postgres OS user.
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(folder)
            _unavailable("running as root and there is no 'postgres' OS user to run initdb as")
        runuser = shutil.which("runuser")
        if runuser is None:
            shutil.rmtree(folder)
            _unavailable("running as root and runuser is missing")
        assert runuser is not None
        os.chown(folder, user.pw_uid, user.pw_gid)
        as_user = [runuser, "-u", "postgres", "--"]
    cluster = PrivateCluster(folder, free_port(), pg_ctl, as_user)
    started = False
    try:
        init = await asyncio.create_subprocess_exec(
            *as_user,
            initdb,
            "-D",
            str(cluster.data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-sync",
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        output, _ = await init.communicate()
        if init.returncode != 0:
            _unavailable(f"initdb failed: {output.decode()[-1000:]}")
        await cluster.start()
        started = True
        yield cluster
    finally:
        if started:
            try:
                await cluster._pg_ctl("stop", "-m", "immediate")
            except AssertionError:
                pass  # already stopped
        shutil.rmtree(folder, ignore_errors=True)
