"""The local launcher keeps the system up (real processes, both databases).

* The engine, threads, then the gateway itself, is killed with SIGKILL
  while a client streams a run through the gateway: the launcher restarts it
  (the other processes keep their pids), and the client's stream still
  reaches a terminal event — resuming with Last-Event-ID when its stream
  ended first (always, when the gateway was the one killed). A new run works
  afterwards. The measured kill-to-healthy times are printed (see
  docs/reliability.md).
* Ctrl-C (SIGINT) stops every process in order: the gateway first, then the
  engine, then the services it depends on; the launcher exits 0. Each
  process exports its pending spans as it stops (the module's exporters
  never export on their own schedule).
* A process that keeps crashing stops the launcher, with a message naming
  it, and a non-zero exit (its own small launcher, on SQLite: the policy is
  not the database's business).

One launcher per backend serves the module; the Ctrl-C test ends it."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.databases import BACKENDS, SERVICES, give_back_database, sqlite_file, take_database
from tests.e2e.otlp import Receiver, start_receiver
from tests.e2e.sse import SseEvent, read_events
from tests.processes import launcher_ready, start_launcher, stop_popen

TOKEN = "token-recovery"
RESTARTS: dict[str, list[float]] = {}
RESUMED: list[str] = []  # backend/victim of each stream resumed with Last-Event-ID


@dataclass
class System:
    url: str
    process: subprocess.Popen[bytes]
    log: Path
    backend: str
    traces: Receiver | None = None

    def children(self) -> dict[str, int]:
        """The launcher's children now: process name -> pid."""
        found: dict[str, int] = {}
        for task in Path(f"/proc/{self.process.pid}/task").iterdir():
            for pid in (task / "children").read_text().split():
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                module = argv[argv.index(b"-m") + 1].decode() if b"-m" in argv else ""
                found[module.removeprefix("services.")] = int(pid)
        return found


def _launch(
    folder: Path, backend: str, *options: str, traces: dict[str, str] | None = None
) -> tuple[System, dict[str, str]]:
    env = {
        **os.environ,
        **(traces or {}),
        "SWITCHBOARD_GATEWAY_TOKENS": f"{TOKEN}:recovery",
        # A dead engine's runs are settled "interrupted" soon after its restart.
        "SWITCHBOARD_ENGINE_LEASE_SECONDS": "3",
    }
    urls: dict[str, str] = {}
    for service in SERVICES:  # migrated already, as in tests/e2e/conftest.py
        if backend == "postgres":
            urls[service] = asyncio.run(take_database(f"sbrecover_{service}", service))
            env[f"SWITCHBOARD_{service.upper()}_DATABASE_URL"] = urls[service]
        else:
            asyncio.run(sqlite_file(folder / "data" / f"{service}.db", service))
    process = start_launcher(folder, env, "--no-auth", *options)
    try:
        info = launcher_ready(process, folder, timeout=90)
    except RuntimeError:
        stop_popen(process)
        for service, url in urls.items():
            asyncio.run(give_back_database(url, service))
        raise
    return System(info["url"], process, folder / "launcher.log", backend), urls


@pytest.fixture(scope="module", params=BACKENDS)
def system(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    folder = tmp_path_factory.mktemp(f"recovery-{request.param}")
    receiver_server, receiver, port = start_receiver()
    # Spans are exported only as each process stops (the schedule is an hour).
    traces = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}", "OTEL_BSP_SCHEDULE_DELAY": "3600000"}
    launched, urls = _launch(folder, str(request.param), "--offline-token-delay", "0.25", traces=traces)
    launched.traces = receiver
    try:
        yield launched
    finally:
        stop_popen(launched.process)
        receiver_server.stop(None)
        for service, url in urls.items():
            asyncio.run(give_back_database(url, service))


@pytest.fixture(scope="module")
def client(system: System) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=system.url, headers=headers, timeout=60) as http:
        yield http


def _restarted(system: System, name: str, seen: int) -> float:
    """Waits for the launcher's restart line number ``seen`` + 1 of ``name``;
    the kill-to-healthy seconds it reports."""
    pattern = re.compile(rf"{name} restarted: healthy ([0-9.]+)s after it exited")
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        found = pattern.findall(system.log.read_text())
        if len(found) > seen:
            return float(found[seen])
        assert system.process.poll() is None, system.log.read_text()[-3000:]
        time.sleep(0.2)
    raise AssertionError(f"{name} was not restarted:\n{system.log.read_text()[-3000:]}")


def _ended(events: list[SseEvent]) -> bool:
    """A stored terminal event (the gateway's own "stream interrupted" has no
    id: it is not the run's end, only the stream's)."""
    return bool(events) and events[-1].event in ("final", "error") and events[-1].id is not None


def _stream_through_a_kill(client: httpx.Client, system: System, victim: str) -> list[SseEvent]:
    """A run streamed while ``victim`` is SIGKILLed after its first token;
    every event the client got, resuming with Last-Event-ID whenever the
    stream ends before a terminal event (the gateway ended it, or was the
    one killed), retrying while the gateway is down or answers 503."""
    conversation = client.post("/api/agent/conversations", json={"title": f"kill {victim}"}).json()["id"]
    events: list[SseEvent] = []
    killed = False
    try:
        with client.stream(
            "POST",
            f"/api/agent/conversations/{conversation}/messages",
            json={"message": "Write a long plan for the launch", "request_id": str(uuid.uuid4())},
        ) as response:
            assert response.status_code == 200, response.read()
            for event in read_events(response):
                events.append(event)
                if event.event == "delta" and not killed:
                    os.kill(system.children()[victim], signal.SIGKILL)
                    killed = True
    except httpx.TransportError:
        assert victim == "gateway" and killed  # its connection went with it
    assert killed, [e.event for e in events]
    run_id = events[0].data["run_id"]
    deadline = time.monotonic() + 90
    while not _ended(events):
        assert time.monotonic() < deadline, [(e.id, e.event) for e in events]
        last = next((e.id for e in reversed(events) if e.id is not None), "0")
        try:
            with client.stream(
                "GET", f"/api/agent/runs/{run_id}/events", headers={"Last-Event-ID": last}
            ) as response:
                if response.status_code == 204:
                    break  # nothing after the last event: the client had the whole run
                if response.status_code != 503:
                    assert response.status_code == 200, response.read()
                    events.extend(read_events(response))
                    RESUMED.append(f"{system.backend}/{victim}")
                    continue
        except httpx.TransportError:
            pass  # the gateway is not back yet
        time.sleep(0.2)
    return events


@pytest.mark.parametrize("victim", ["engine", "threads", "gateway"])
def test_a_killed_process_is_restarted_and_the_stream_ends(
    client: httpx.Client, system: System, victim: str
) -> None:
    before = system.children()
    seen = len(re.findall(rf"{victim} restarted:", system.log.read_text()))
    events = _stream_through_a_kill(client, system, victim)
    assert _ended(events), [(e.id, e.event) for e in events]
    sequences = [int(e.id) for e in events if e.id is not None]
    assert sequences == sorted(set(sequences)), "no event twice, none out of order"
    RESTARTS.setdefault(system.backend, []).append(_restarted(system, victim, seen))

    after = system.children()
    assert after[victim] != before[victim]
    assert {k: v for k, v in after.items() if k != victim} == {
        k: v for k, v in before.items() if k != victim
    }, "the other processes kept running"
    run = client.get(f"/api/agent/runs/{events[0].data['run_id']}").json()
    assert run["status"] in ("done", "failed"), run
    # The restarted system serves a new run to the end. Its callers (the
    # gateway, the engine) reconnect within their channel's reconnect backoff
    # (at most 2 s); until then a call is refused 503, which a client retries.
    deadline = time.monotonic() + 15
    while (created := client.post("/api/agent/conversations", json={"title": "after"})).status_code == 503:
        assert time.monotonic() < deadline, created.text
        time.sleep(0.2)
    assert created.status_code == 201, created.text
    message = {"message": "Hello again", "request_id": str(uuid.uuid4())}
    while True:
        with client.stream(
            "POST", f"/api/agent/conversations/{created.json()['id']}/messages", json=message
        ) as response:
            if response.status_code == 503 and time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            assert response.status_code == 200, response.read()
            assert [e.event for e in read_events(response)][-1] == "final"
            break


def test_ctrl_c_stops_every_process_in_order(
    system: System, client: httpx.Client, capsys: pytest.CaptureFixture[str]
) -> None:
    # A run just before: each process holds its spans, exported only as it stops.
    conversation = client.post("/api/agent/conversations", json={"title": "last"}).json()["id"]
    with client.stream(
        "POST", f"/api/agent/conversations/{conversation}/messages", json={"message": "Bye"}
    ) as run:
        events = list(read_events(run))
    assert events[-1].event == "final", [e.event for e in events]
    run_id = events[0].data["run_id"]
    children = system.children()
    system.process.send_signal(signal.SIGINT)
    assert system.process.wait(60) == 0
    assert all(not Path(f"/proc/{pid}").exists() for pid in children.values())
    log = system.log.read_text()
    order = [log.index(f"{name} shutting down") for name in ("engine", "threads", "memory", "router")]
    assert order[0] < min(order[1:]), "the engine stops before the services it calls"
    assert "Traceback" not in log, log[-3000:]
    assert system.traces is not None
    traced = {span.trace_id for span in system.traces.spans if span.run_id == run_id}
    exported = {span.service for span in system.traces.spans if span.trace_id in traced}
    assert exported == {f"switchboard-{name}" for name in ("gateway", *SERVICES)}, exported
    with capsys.disabled():
        print(
            f"\nrestart (kill to healthy) seconds on {system.backend} (engine, threads, gateway): "
            f"{RESTARTS.get(system.backend)}; streams resumed with Last-Event-ID: {RESUMED}"
        )


def test_a_crash_loop_stops_the_launcher_naming_the_process(tmp_path: Path) -> None:
    launched, _ = _launch(tmp_path, "sqlite", "--max-crashes", "2", "--restart-backoff", "0.1")
    try:
        first = launched.children()
        os.kill(first["router"], signal.SIGKILL)
        _restarted(launched, "router", 0)
        os.kill(launched.children()["router"], signal.SIGKILL)
        code = launched.process.wait(90)
    finally:
        stop_popen(launched.process)
    log = launched.log.read_text()
    assert code == 1, log[-3000:]
    assert "Switchboard stopped: router crashed 2 times within 60s (last exit code -9)" in log
    assert all(not Path(f"/proc/{pid}").exists() for name, pid in first.items() if name != "router")
