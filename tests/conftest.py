from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from services.shared.time import set_clock
from services.shared.timer import set_timer
from tests.databases import BACKENDS, SERVICES, database_url, drop_templates
from tests.pgbouncer import PGBOUNCER
from tests.worker_groups import WorkerGroups, load_durations, write_groups

DatabaseFactory = Callable[[str], AbstractAsyncContextManager[str]]


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(WorkerGroups(), "switchboard-worker-groups")


# A test file that took this long in the last recorded run (tests/durations.json)
# is `slow`: `-m "not slow and not browser"` is the quick loop while editing.
# The README's command runs every test, marked or not.
SLOW_FILE_SECONDS = 30.0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    durations = load_durations()
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        if path.startswith("tests/e2e/test_web_"):
            item.add_marker(pytest.mark.browser)
        if durations.get(path, 0.0) >= SLOW_FILE_SECONDS:
            item.add_marker(pytest.mark.slow)
    write_groups(config, items)


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
def prepared_statements(backend: str) -> bool:
    """Whether the test's engines may keep named prepared statements: not
    through PgBouncer (tests/pgbouncer.py: a version that does not track them)."""
    return backend != PGBOUNCER


@pytest.fixture
def make_database(
    backend: str, tmp_path: Path, prepared_statements: bool, monkeypatch: pytest.MonkeyPatch
) -> DatabaseFactory:
    """make_database("threads") -> async context manager yielding a URL: the
    database of that service, already migrated; any other name (e.g. "svc")
    gives an empty database. Through PgBouncer, the services the test builds
    read from their settings that they may not keep prepared statements."""
    if not prepared_statements:
        for service in SERVICES:
            monkeypatch.setenv(f"SWITCHBOARD_{service.upper()}_DATABASE_PREPARED_STATEMENTS", "false")

    def factory(service: str) -> AbstractAsyncContextManager[str]:
        return database_url(backend, tmp_path, service)

    return factory


@pytest.fixture
async def db_url(make_database: DatabaseFactory) -> AsyncIterator[str]:
    async with make_database("svc") as url:
        yield url


class MovableClock:
    """The clock of every in-process service during a test: it runs with the
    real one, and :meth:`advance` moves it forward at once, so a TTL or a
    timeout is tested without sleeping through it."""

    def __init__(self) -> None:
        self._start = datetime.now(UTC)
        self._began = time.monotonic()
        self._skipped = timedelta()

    def __call__(self) -> datetime:
        return self._start + timedelta(seconds=time.monotonic() - self._began) + self._skipped

    def advance(self, seconds: float) -> None:
        self._skipped += timedelta(seconds=seconds)


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port another program listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


@pytest.fixture
def peer_http_port() -> Iterator[int]:
    """Another program's HTTP server: 200 with a JSON body to any GET, /healthz included."""

    class Ok(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the standard library's name
            body = b'{"status": "ok"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the standard library's name
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


@pytest.fixture
def clock() -> Iterator[MovableClock]:
    test_clock = MovableClock()
    set_clock(test_clock)
    try:
        yield test_clock
    finally:
        set_clock(None)


class FakeTimer:
    """The in-process services' timer for waits and deadlines during a test:
    a sleep moves it forward at once, so a backoff is tested for the waits it
    chose without spending them."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)  # still a suspension point, as a real sleep is


@pytest.fixture
def timer() -> Iterator[FakeTimer]:
    fake = FakeTimer()
    set_timer(fake.monotonic, fake.sleep)
    try:
        yield fake
    finally:
        set_timer(None, None)
