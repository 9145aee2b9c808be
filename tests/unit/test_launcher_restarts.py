"""The launcher's restart policy and its watch loop, on the fake timer: the
backoff it waits, when it gives up, and what it says (the real processes are
in tests/e2e/test_launcher_recovery.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from services import launcher
from services.launcher_restarts import CrashHistory, RestartPolicy
from tests.conftest import FakeTimer


def test_backoff_doubles_within_the_window_and_gives_up_at_the_limit(timer: FakeTimer) -> None:
    history = CrashHistory(RestartPolicy(max_crashes=4, window=60, base=0.5, longest=1.5))
    assert history.crashed() == 0.5
    timer.now += 1
    assert history.crashed() == 1.0
    timer.now += 1
    assert history.crashed() == 1.5  # capped at longest
    timer.now += 1
    assert history.crashed() is None  # the 4th within 60 s


def test_crashes_older_than_the_window_are_forgotten(timer: FakeTimer) -> None:
    history = CrashHistory(RestartPolicy(max_crashes=2, window=10, base=0.5))
    assert history.crashed() == 0.5
    timer.now += 11
    assert history.crashed() == 0.5  # the first one is out of the window
    timer.now += 5
    assert history.crashed() is None


class FakeProcess:
    """An asyncio subprocess that exits when the test says so."""

    def __init__(self) -> None:
        self.returncode: int | None = None
        self._exited = asyncio.Event()

    def exit(self, code: int) -> None:
        self.returncode = code
        self._exited.set()

    async def wait(self) -> int:
        await self._exited.wait()
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        self.exit(-9)


async def test_watch_restarts_after_the_backoff_then_stops_the_system_naming_the_process(
    timer: FakeTimer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    started: list[FakeProcess] = []

    async def start(child: launcher.Child, color: bool) -> None:
        child.process = FakeProcess()  # type: ignore[assignment]
        started.append(child.process)  # type: ignore[arg-type]

    async def healthy(child: Any) -> None:
        return None

    monkeypatch.setattr(launcher, "start", start)
    monkeypatch.setattr(launcher, "wait_healthy", healthy)
    child = launcher.Child("engine", "services.engine", 1, {})
    await start(child, False)
    stop, failed = asyncio.Event(), []
    policy = RestartPolicy(max_crashes=3, window=60, base=0.5)
    watcher = asyncio.create_task(launcher.watch(child, False, policy, stop, failed))
    for crash in range(3):
        started[-1].exit(-9)
        while len(started) < crash + 2 and not stop.is_set():
            await asyncio.sleep(0)
    await asyncio.wait_for(watcher, 5)
    assert len(started) == 3  # the first process and two restarts
    assert timer.sleeps == [0.5, 1.0]
    assert stop.is_set() and failed == ["engine"]
    out = capsys.readouterr()
    assert "engine exited with code -9; restarting it in 0.5s" in out.out
    assert "engine restarted: healthy" in out.out
    assert "engine crashed 3 times within 60s (last exit code -9)" in out.err


async def test_a_restart_that_never_gets_healthy_counts_as_a_crash(
    timer: FakeTimer, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[FakeProcess] = []

    async def start(child: launcher.Child, color: bool) -> None:
        child.process = FakeProcess()  # type: ignore[assignment]
        started.append(child.process)  # type: ignore[arg-type]

    async def never_healthy(child: Any) -> None:
        raise RuntimeError(f"{child.name} was not healthy after 60s")

    monkeypatch.setattr(launcher, "start", start)
    monkeypatch.setattr(launcher, "wait_healthy", never_healthy)
    child = launcher.Child("threads", "services.threads", 1, {})
    await start(child, False)
    stop, failed = asyncio.Event(), []
    started[0].exit(1)
    await asyncio.wait_for(launcher.watch(child, False, RestartPolicy(max_crashes=2), stop, failed), 5)
    assert failed == ["threads"] and started[1].returncode == -9  # the unhealthy one was killed
