"""A cancellation is never lost by a wait with a timeout.

On Python 3.11, ``asyncio.wait_for`` returns normally when the task is
cancelled just as the awaited thing completes (fixed in 3.12): a loop that
waits for a wake-up that way goes on after its cancel, so the engine's
webhook worker could hold a shutdown forever (seen as a service test that
hung on stopping the engine), a live-state watch could outlive its
watcher, and a CLI agent's read could miss the user's Stop. The services
use ``asyncio.timeout``, which runs the wait in the caller's own task."""

from __future__ import annotations

import ast
import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from services.engine.webhooks.worker import WebhookLimits, WebhookWorker
from services.memory.context.live_state import LiveStateDomain
from services.memory.context.models import LiveState
from services.memory.projects.domain import Access, Role
from services.shared.audit import Actor
from services.shared.outbound_urls import UrlPolicy
from services.shared.wakeups import LIVE_STATE, Wakeups

ROOT = Path(__file__).resolve().parents[2]
# How many times each interleaving is tried (wait_for lost every one of them).
TRIES = 20


async def cancel_as_woken(task: asyncio.Task[Any], wake: Any) -> bool:
    """Wakes the task's wait and cancels the task in the same loop turn;
    whether the task then ends."""
    await asyncio.sleep(0.01)  # the task waits
    wake()
    await asyncio.sleep(0)  # the wake-up is under way
    task.cancel()
    done, _ = await asyncio.wait([task], timeout=1.0)
    if not done:
        task.cancel()  # clean up; the test has failed already
        await asyncio.wait([task], timeout=1.0)
    return bool(done)


class EmptyOutbox:
    wakeups = Wakeups()

    async def claim(self, owner: str, lease_seconds: float, limit: int) -> list[Any]:
        return []

    async def next_due(self) -> None:
        return None

    async def release(self, owner: str) -> None:
        return None


async def test_the_webhook_worker_stops_when_cancelled_as_a_run_ends() -> None:
    for _ in range(TRIES):
        worker = WebhookWorker(
            EmptyOutbox(),  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]
            None,
            UrlPolicy(allow_loopback=True),
            WebhookLimits(),
            "engine-test",
        )
        task = asyncio.create_task(worker.run())
        try:
            assert await cancel_as_woken(task, worker.wake), "the worker went on after its cancel"
        finally:
            await worker.close()


class OneEntry:
    """A context repository with one live entry and a fixed revision."""

    async def revision(self, project: str, kind: str) -> int:
        return 1

    async def list_live(self, project: str, now: datetime, *args: Any) -> list[LiveState]:
        stamp = datetime.now(UTC)
        entry = LiveState(
            project_id=project,
            agent_id="qa",
            activity="testing",
            detail="",
            update_time=stamp,
            expire_time=stamp + timedelta(minutes=5),
        )
        return [entry]


class OneProject:
    """Projects where every caller reads the project it names."""

    async def access(self, actor: Actor, project: str, need: Role) -> Access:
        return Access(project, Role.OWNER, actor.user)


async def drain(events: Any) -> None:
    async for _event in events:
        pass


async def test_a_live_state_watch_stops_when_its_watcher_leaves_as_a_write_wakes_it() -> None:
    wakeups = Wakeups()
    domain = LiveStateDomain(OneEntry(), OneProject(), 60, 600, wakeups)  # type: ignore[arg-type]
    for _ in range(TRIES):
        watch = domain.watch(Actor("alice", "user"), "acme")
        await anext(watch)  # the snapshot

        task = asyncio.create_task(drain(watch))
        assert await cancel_as_woken(task, lambda: wakeups.deliver(LIVE_STATE.of("acme"))), (
            "the watch went on after its watcher left"
        )


def test_no_service_waits_with_asyncio_wait_for() -> None:
    """The rule behind the two tests above, for every wait in the shipped code."""
    found = []
    for folder in ("services", "gateway", "client"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if (
                    isinstance(node, ast.Attribute)
                    and node.attr == "wait_for"
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "asyncio"
                ):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == [], f"asyncio.wait_for loses cancellations on Python 3.11; use asyncio.timeout: {found}"
