"""The real system: the launcher starts the five processes on free ports, on
SQLite files or on PostgreSQL databases (both already migrated, from the
run's templates), exporting traces to a real OTLP receiver.

A launched system is shared by the test modules that ask for the same
settings (their ``LAUNCH_ENV``) on the same backend: one system per backend is
kept running, and modules are ordered so that those with the same settings
follow each other. A module never relies on an empty system: each module
that takes a system gets users of its own (``alice`` and ``bob`` for the
first, ``alice-2`` and ``bob-2`` for the second, and so on), so what one
module's users did is invisible to the next. A system is stopped when its
backend needs other settings (it drains while the next one starts), and at
the end of the run; each stop checks that every process drained and exited
cleanly."""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import grpc
import httpx
import pytest

from services.shared.identity import user_metadata
from switchboard.memory.v1 import memory_pb2, memory_service_pb2, memory_service_pb2_grpc
from tests.databases import BACKENDS, SERVICES, give_back_database, sqlite_file, take_database
from tests.e2e.otlp import Receiver, start_receiver
from tests.fakes.llm_server import FakeServer, openai_app, serve
from tests.processes import launcher_ready, start_launcher, stop_popen

ROOT = Path(__file__).resolve().parents[2]
USERS = ("alice", "bob", "carol", "root")
# Users whose tokens carry the admin role (the others are plain users).
ADMINS = ("root",)
# Modules that can share one system; each takes the next namespace of users.
NAMESPACES = 64
T = TypeVar("T")
LaunchKey = tuple[tuple[str, str], ...]


def user_id(name: str, namespace: int) -> str:
    return name if namespace == 0 else f"{name}-{namespace + 1}"


def token_of(user: str) -> str:
    return f"token-{user}"


@dataclass
class Launched:
    url: str
    ports: dict[str, int]
    process: subprocess.Popen[bytes]
    log: Path
    traces: Receiver
    backend: str
    metrics_ports: dict[str, int]
    namespace: int = 0  # whose users this module is: see user()

    def user(self, name: str = "alice") -> str:
        """The user id this module knows as ``name`` (alice, bob; root is an admin)."""
        return user_id(name, self.namespace)

    def token(self, name: str = "alice") -> str:
        return token_of(self.user(name))

    def headers(self, user: str = "alice") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(user)}"}

    def client(self, user: str = "alice", *, path: str = "", timeout: float = 30) -> httpx.Client:
        """An HTTP client of the gateway signed in as ``user`` (its base URL
        ends with ``path``, e.g. "/api/agent")."""
        return httpx.Client(base_url=self.url + path, headers=self.headers(user), timeout=timeout)


def propose_note(launched: Launched, project_id: str, title: str, body: str) -> str:
    """A pending note proposal in alice's project, as a run of hers makes one."""
    with grpc.insecure_channel(f"127.0.0.1:{launched.ports['memory']}") as channel:
        response = memory_service_pb2_grpc.MemoryServiceStub(channel).ProposeNote(
            memory_service_pb2.ProposeNoteRequest(
                request_id=str(uuid.uuid4()),
                note=memory_pb2.Note(
                    project_id=project_id,
                    kind=memory_pb2.NOTE_KIND_DECISION,
                    title=title,
                    body=body,
                    author_agent_id="qa",
                ),
                reason="the team decided it in this conversation",
            ),
            metadata=user_metadata(launched.user("alice")),
            timeout=10,
        )
    assert response.proposal.state == memory_pb2.NOTE_PROPOSAL_STATE_PENDING, response
    return str(response.proposal.id)


# The MCP configuration of the headless agent CLI that recording_env
# configures (tests/fakes/agent_cli.py): the module that asks it writes it
# once the gateway's port is known.
# The agent whose card is the host's A2A card on a recording_env system.
A2A_DEFAULT_AGENT = "a2a-front-desk"
# The webhook signing secret of a recording_env system.
WEBHOOK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8GKYo="
CLI_AGENT_MCP_CONFIG = Path(tempfile.mkdtemp(prefix="sb-mcp-")) / "mcp.json"


def recording_env(base_url: str) -> dict[str, str]:
    """Settings for a recording OpenAI-compatible server at ``base_url`` and
    a headless agent CLI beside the offline models: Auto never picks either
    (an offline model of each profile comes first); a request names them as
    the models `recorded` and `agent-model`. Two MCP servers (the glossary
    of tests/fakes/mcp_server.py, as `glossary` and `spare`) are configured
    for a conversation to allow; each starts only when a run calls it.
    Remote A2A agents may be on loopback. The host's A2A card is the card
    of ``A2A_DEFAULT_AGENT`` (the module that creates it owns it), and
    webhooks are signed with ``WEBHOOK_SECRET`` and may go to loopback
    receivers."""
    offline = [
        {"id": f"offline-{p}", "provider": "offline", "model": f"switchboard-offline-{p}", "profile": p}
        for p in ("fast", "balanced", "strong")
    ]
    recorded = {"id": "recorded", "provider": "recording", "model": "model-x", "profile": "strong"}
    cli_agent = {"id": "agent-model", "provider": "agent-cli", "model": "agent-x", "profile": "balanced"}
    cli = [sys.executable, str(ROOT / "tests" / "fakes" / "agent_cli.py"), "--context-from", "stdin"]
    providers = [
        {"name": "recording", "kind": "openai", "base_url": base_url},
        {
            "name": "agent-cli",
            "kind": "cli",
            "command": [*cli, "--mcp-config", str(CLI_AGENT_MCP_CONFIG), "{prompt}"],
            "context_strategy": "stdin",
        },
    ]
    glossary = {"command": sys.executable, "args": ["-m", "tests.fakes.mcp_server"], "cwd": str(ROOT)}
    return {
        # Remote A2A agents on loopback (tests/fakes/a2a_agent.py), which
        # only development allows; an ask that takes longer than 3 s fails.
        "SWITCHBOARD_REMOTE_AGENT_ALLOW_LOOPBACK": "true",
        "SWITCHBOARD_GATEWAY_A2A_DEFAULT_AGENT": A2A_DEFAULT_AGENT,
        "SWITCHBOARD_ENGINE_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "SWITCHBOARD_ENGINE_WEBHOOK_ALLOW_LOOPBACK": "true",
        "SWITCHBOARD_ENGINE_REMOTE_AGENT_TIMEOUT": "3",
        "SWITCHBOARD_ENGINE_PROVIDERS_JSON": json.dumps(providers),
        "SWITCHBOARD_ROUTER_MODELS_JSON": json.dumps([*offline, recorded, cli_agent]),
        "SWITCHBOARD_ENGINE_MCP_SERVERS_JSON": json.dumps(
            [
                {"name": "glossary", "title": "Glossaire de l'équipe", **glossary},
                {"name": "spare", **glossary},
            ]
        ),
    }


_recording: FakeServer | None = None


def shared_recording() -> FakeServer:
    """One recording OpenAI-compatible server per test process for the
    modules that launch with :func:`recording_env`: the same address makes
    the same launch settings, so those modules share one launched system.
    Each test sets the answers it needs and reads the requests it caused."""
    global _recording
    if _recording is None:
        manager = serve(openai_app)
        _recording = manager.__enter__()
        atexit.register(manager.__exit__, None, None, None)
    return _recording


def script_answers(*answers: str) -> None:
    """The shared recording model's answers, in order, for the next runs; a
    title request (after a conversation's first exchange) gets a title."""
    from services.engine.instructions import TITLE_SYSTEMS

    queue = list(answers)

    def answer(body: dict[str, Any]) -> str:
        return "say:Titre" if body["messages"][0]["content"] in TITLE_SYSTEMS.values() else queue.pop(0)

    recording = shared_recording()
    recording.script.reset()
    recording.script.steps = [answer] * (2 * len(answers) + 2)


def model_requests() -> list[dict[str, Any]]:
    """What the shared recording model received, title requests aside."""
    from services.engine.instructions import TITLE_SYSTEMS

    requests = shared_recording().script.requests
    return [r for r in requests if r["messages"][0]["content"] not in TITLE_SYSTEMS.values()]


def _blocking(coroutine: Coroutine[Any, Any, T]) -> T:
    """Runs a coroutine to completion from sync code, in a thread of its own
    (the caller's thread may already run a loop, e.g. Playwright's)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


@dataclass
class _System:
    key: LaunchKey
    launched: Launched
    receiver_server: grpc.Server
    database_urls: dict[str, str]  # service -> URL (PostgreSQL)
    modules: int = 0  # how many modules have taken it (the next namespace)
    log_seen: int = 0  # the launcher log's length when the current module took it


def _launch(backend: str, key: LaunchKey, folder: Path) -> _System:
    receiver_server, receiver, receiver_port = start_receiver()
    tokens = [
        token_of(user_id(u, n)) + ":" + user_id(u, n) + (":admin" if u in ADMINS else "")
        for n in range(NAMESPACES)
        for u in USERS
    ]
    env = {
        **os.environ,
        "SWITCHBOARD_GATEWAY_TOKENS": ",".join(tokens),
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver_port}",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        # The canned mailbox, so runs can call a tool (conversations still opt in).
        "SWITCHBOARD_ENGINE_CONNECTORS": "testmail",
        # Two asks (four entries) close an agent thread's segment, so a test
        # can see a seam and its handoff summary (the MCP handoff resource,
        # the page's thread viewer) without a thousand entries.
        "SWITCHBOARD_THREADS_ROTATE_AFTER_ENTRIES": "4",
        # A test module may add settings of its own (e.g. the web page's).
        **dict(key),
    }
    database_urls: dict[str, str] = {}
    for service in SERVICES:  # migrated already: the services start without migrating
        if backend == "postgres":
            url = _blocking(take_database(f"sbe2e_{service}", service))
            database_urls[service] = url
            env[f"SWITCHBOARD_{service.upper()}_DATABASE_URL"] = url
        else:
            _blocking(sqlite_file(folder / "data" / f"{service}.db", service))
    process = start_launcher(folder, env)
    launched = Launched("", {}, process, folder / "launcher.log", receiver, backend, {})
    system = _System(key, launched, receiver_server, database_urls)
    try:
        info = launcher_ready(process, folder, timeout=90)
    except RuntimeError as error:
        _stop(system, check=False)
        pytest.fail(str(error))
    # Each gRPC service serves Prometheus metrics on a port the launcher picked.
    metrics_ports = {name: int(port) for name, port in info["metrics_ports"].items()}
    system.launched = replace(
        system.launched, url=info["url"], ports=info["ports"], metrics_ports=metrics_ports
    )
    return system


def _stop(system: _System, check: bool = True) -> None:
    """Graceful stop: every process drains and exits cleanly (checked)."""
    _finish(system, lambda: stop_popen(system.launched.process), check)


def _finish(system: _System, stopped: Callable[[], int], check: bool) -> None:
    """Checks how a system exited (``stopped`` stops its launcher, or waits
    for it, and returns the exit code), then frees what it held."""
    try:
        code = stopped()
        if check:
            output = system.launched.log.read_text()
            assert code == 0, output[-4000:]
            for service in SERVICES:
                assert f"{service} shutting down" in output
            assert "Traceback" not in output, output[-4000:]
    finally:
        system.receiver_server.stop(None)
        for service, url in system.database_urls.items():
            _blocking(give_back_database(url, service))


@dataclass
class SystemPool:
    """The running system of each backend, with the settings it runs with."""

    folders: pytest.TempPathFactory
    running: dict[str, _System] = field(default_factory=dict)
    # Stops launchers in the background: one drains while the next starts.
    stopper: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=len(BACKENDS), thread_name_prefix="stop")
    )

    def take(self, backend: str, settings: dict[str, str]) -> Launched:
        key: LaunchKey = tuple(sorted(settings.items()))
        current = self.running.get(backend)
        if current is not None and (current.key != key or current.launched.process.poll() is not None):
            del self.running[backend]
            # It drains (a second or two of waiting) while the next one starts.
            check = current.launched.process.poll() is None
            halted = self.stopper.submit(stop_popen, current.launched.process)
            try:
                self.running[backend] = _launch(backend, key, self.folders.mktemp(f"system-{backend}"))
            finally:
                _finish(current, halted.result, check)  # once the new one is up
        elif current is None:
            self.running[backend] = _launch(backend, key, self.folders.mktemp(f"system-{backend}"))
        system = self.running[backend]
        system.log_seen = system.launched.log.stat().st_size
        namespace = system.modules
        system.modules += 1
        assert namespace < NAMESPACES, "more modules share one system than it has users for"
        return replace(system.launched, namespace=namespace)

    def check_alive(self, backend: str) -> None:
        """Fails, with the launcher's log, when a process of the backend's
        system died during the module (the launcher restarts it, and no
        module here kills one) or the whole system is gone: then the next
        module gets a new system instead of a dead one."""
        system = self.running.get(backend)
        if system is None:
            return
        raw = system.launched.log.read_bytes()
        log = raw.decode(errors="replace")
        if system.launched.process.poll() is None:
            since = raw[system.log_seen :].decode(errors="replace")
            restarted = [line for line in since.splitlines() if " exited with code " in line]
            assert not restarted, f"a process of the launched system ({backend}) died:\n{log[-6000:]}"
            return
        del self.running[backend]
        code = system.launched.process.returncode
        _stop(system, check=False)
        raise AssertionError(f"the launched system ({backend}) exited with {code}:\n{log[-6000:]}")

    def close(self) -> None:
        systems, self.running = list(self.running.values()), {}
        errors: list[BaseException] = []
        # Every system drains at once.
        halted = [self.stopper.submit(stop_popen, system.launched.process) for system in systems]
        for system, halting in zip(systems, halted, strict=True):
            try:
                _finish(system, halting.result, check=True)
            except BaseException as error:  # noqa: BLE001 - stop the others, then report
                errors.append(error)
        if errors:
            raise errors[0]


def launch_settings(module: Any) -> dict[str, str]:
    return dict(getattr(module, "LAUNCH_ENV", {}))


@pytest.fixture(scope="session")
def launch_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SystemPool]:
    pool = SystemPool(tmp_path_factory)
    yield pool
    pool.close()


@pytest.fixture(scope="module", autouse=True)
def _no_idle_system(request: pytest.FixtureRequest, launch_pool: SystemPool) -> None:
    """A module that starts its own processes (and may time them) runs with
    no launched system idling beside it."""
    if "launched" not in request.fixturenames:
        launch_pool.close()


@pytest.fixture(scope="module", params=BACKENDS)
def launched(request: pytest.FixtureRequest, launch_pool: SystemPool) -> Iterator[Launched]:
    """The module's system on each backend, with its own users; still
    running when the module ends (checked)."""
    backend = str(request.param)
    yield launch_pool.take(backend, launch_settings(request.module))
    launch_pool.check_alive(backend)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules with the same launch settings run one after the other, so that
    they share one system; each module's tests stay together, and modules
    that launch nothing keep their place."""
    blocks: list[list[pytest.Item]] = []
    for item in items:
        if blocks and getattr(blocks[-1][0], "module", None) is getattr(item, "module", None):
            blocks[-1].append(item)
        else:
            blocks.append([item])
    first_seen: dict[LaunchKey, int] = {}
    ranks = []
    for index, block in enumerate(blocks):
        if "launched" in getattr(block[0], "fixturenames", ()):
            key = tuple(sorted(launch_settings(getattr(block[0], "module", None)).items()))
            ranks.append(first_seen.setdefault(key, index))
        else:
            ranks.append(index)
    order = sorted(range(len(blocks)), key=lambda i: (ranks[i], i))
    items[:] = [item for i in order for item in blocks[i]]
