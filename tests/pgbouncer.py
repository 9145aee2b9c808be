"""PgBouncer in transaction mode in front of the test PostgreSQL: Debian's
``pgbouncer`` package (1.18 on Debian 12), started by the test run as a
process of its own, on a free port, with its configuration and user list
in a temporary folder; stopped after.

Any database of the PostgreSQL server is reachable through it under the
same name (a ``*`` entry), so a test's own database (tests/databases.py)
gets a second URL, through the pooler. Each database gets few server
connections (``pool_size``), fewer than a service's pool opens: the
transactions of different clients then take turns on the same server
connections, which is what breaks a client that keeps session state (a
named prepared statement, a SET, a session lock) across transactions.

PgBouncer refuses to run as root: as root it runs as the ``postgres`` OS
user (its ``-u``), in a folder that user owns. Without the binary (or, as
root, without that user) the test is skipped with the reason, unless
SWITCHBOARD_REQUIRE_PGBOUNCER=1 (CI), where it fails."""

from __future__ import annotations

import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from services import launcher

REQUIRE_PGBOUNCER = os.environ.get("SWITCHBOARD_REQUIRE_PGBOUNCER") == "1"
# The tests' name of the backend "PostgreSQL through PgBouncer".
PGBOUNCER = "pgbouncer"
# Server connections per database: below a service's pool (services.shared.db).
POOL_SIZE = 3
# The first version that tracks protocol-level prepared statements in
# transaction mode (max_prepared_statements).
TRACKS_PREPARED_STATEMENTS = (1, 21)


def _unavailable(reason: str) -> None:
    message = f"no PgBouncer: {reason}"
    if REQUIRE_PGBOUNCER:
        pytest.fail(message)
    pytest.skip(message)


def installed_version(binary: str) -> tuple[int, ...]:
    """``pgbouncer --version``'s first line, "PgBouncer 1.18.0", as (1, 18, 0)."""
    output = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout
    found = re.search(r"PgBouncer (\d+(?:\.\d+)+)", output)
    assert found, f"unexpected `pgbouncer --version` output: {output!r}"
    return tuple(int(part) for part in found.group(1).split("."))


@dataclass
class PgBouncer:
    folder: Path
    port: int
    version: tuple[int, ...]
    user: str
    process: subprocess.Popen[bytes]

    @property
    def log(self) -> Path:
        return self.folder / "pgbouncer.log"

    def url(self, direct: str) -> str:
        """``direct`` (a URL of the PostgreSQL server) through the pooler:
        the same user and database, PgBouncer's address."""
        parsed = make_url(direct)
        return parsed.set(host="127.0.0.1", port=self.port).render_as_string(hide_password=False)

    async def reconnect(self, database: str) -> None:
        """Closes the pooler's server connections to ``database`` (its
        admin console's RECONNECT): after the server ended them (a reused
        test database is emptied with its connections ended), none is then
        lent to a client dead."""
        console = await asyncpg.connect(
            f"postgresql://{self.user}@127.0.0.1:{self.port}/pgbouncer", statement_cache_size=0
        )
        try:
            await console.execute(f"RECONNECT {database}")  # the simple protocol, as the console asks
        finally:
            await console.close()

    def logins(self, database: str) -> int:
        """How many client connections logged in to ``database`` through the pooler."""
        return len(re.findall(rf"login attempt: db={re.escape(database)} ", self._log_text()))

    def server_connections(self, database: str) -> int:
        """How many connections to the server the pooler opened for ``database``."""
        pattern = rf": {re.escape(database)}/\S+ new connection to server"
        return len(re.findall(pattern, self._log_text()))

    def _log_text(self) -> str:
        return self.log.read_text(errors="replace")


def _config(folder: Path, port: int, server: str, version: tuple[int, ...], pool_size: int) -> str:
    address = make_url(server)
    lines = [
        "[databases]",
        f"* = host={address.host or '127.0.0.1'} port={address.port or 5432}",
        "",
        "[pgbouncer]",
        "listen_addr = 127.0.0.1",
        f"listen_port = {port}",
        "unix_socket_dir =",
        "pool_mode = transaction",
        # The test server trusts loopback; the pooler still needs its users listed.
        "auth_type = trust",
        f"auth_file = {folder / 'userlist.txt'}",
        f"logfile = {folder / 'pgbouncer.log'}",
        "log_connections = 1",
        "log_disconnections = 0",
        "max_client_conn = 2000",
        f"default_pool_size = {pool_size}",
        # A test waiting for a server connection fails within this, not after the default 120 s.
        "query_wait_timeout = 30",
        f"admin_users = {address.username or 'postgres'}",
    ]
    if version >= TRACKS_PREPARED_STATEMENTS:
        # Newer PgBouncers may track prepared statements: not here, where the
        # tests prove the path of those that do not.
        lines.append("max_prepared_statements = 0")
    return "\n".join(lines) + "\n"


def _wait_listening(process: subprocess.Popen[bytes], port: int, log: Path, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    text = log.read_text(errors="replace") if log.exists() else ""
    raise AssertionError(f"PgBouncer did not listen on {port} (exit {process.poll()}):\n{text[-3000:]}")


@contextmanager
def pgbouncer(server: str, pool_size: int = POOL_SIZE) -> Iterator[PgBouncer]:
    """A PgBouncer in transaction mode in front of ``server`` (a PostgreSQL
    URL: its host, port and user) for the block; stopped and removed after."""
    binary = shutil.which("pgbouncer") or next(
        (path for path in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.path.exists(path)), None
    )
    if binary is None:
        _unavailable("the pgbouncer binary is not installed (apt-get install pgbouncer)")
    assert binary is not None
    as_user: list[str] = []
    folder = Path(tempfile.mkdtemp(prefix="sb-pgbouncer-"))
    try:
        if os.geteuid() == 0:
            # PgBouncer refuses root: it switches to the postgres OS user, which
            # must read its configuration and write its log.
            try:
                user = pwd.getpwnam("postgres")
            except KeyError:
                _unavailable("running as root and there is no 'postgres' OS user to run PgBouncer as")
            os.chown(folder, user.pw_uid, user.pw_gid)
            as_user = ["-u", "postgres"]
        version = installed_version(binary)
        port = launcher.free_ports(1)[0]
        user_name = make_url(server).username or "postgres"
        (folder / "userlist.txt").write_text(f'"{user_name}" ""\n')
        (folder / "pgbouncer.ini").write_text(_config(folder, port, server, version, pool_size))
        process = subprocess.Popen(
            [binary, *as_user, str(folder / "pgbouncer.ini")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            _wait_listening(process, port, folder / "pgbouncer.log")
            yield PgBouncer(folder, port, version, user_name, process)
        finally:
            # SIGTERM: PgBouncer closes its connections at once and exits.
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
