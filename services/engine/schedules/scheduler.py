"""The loop that runs schedules: every replica looks for due schedules at
the next tick's time, when a schedule is created or resumed (an
announcement, services.shared.wakeups), and at the safety poll; for each,
one replica claims the tick (compare-and-set of the row's next tick,
recorded in the claim's transaction) and starts an ordinary run with
surface SCHEDULE.

Semantics of a tick, across replicas and restarts:

- A tick runs at most once: its run's request_id is derived from the
  schedule and the tick, and a user's request_ids are unique, so even two
  replicas starting the same claimed tick get one run.
- A claimed tick runs at least once while any engine runs: the claim
  leaves it pending until its run is started; if the claimant stops in
  between, another replica (or the restarted one) finds it pending past
  ``stale_after`` and starts it.
- A tick nobody claimed within ``misfire_grace`` of its time (every engine
  was stopped, or too busy) is missed: counted, never replayed."""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta

from services.engine.budget import RunBudget
from services.engine.runs import AskSpec, RunRequest, RunService
from services.engine.schedules.cron import Cron, plan
from services.engine.schedules.models import Schedule
from services.engine.schedules.repository import SchedulesRepository
from services.shared.errors import DependencyUnavailable, DomainError
from services.shared.metrics import SCHEDULE_TICKS
from services.shared.time import aware, utcnow
from services.shared.wakeups import SCHEDULES
from switchboard.engine.v1 import engine_pb2

log = logging.getLogger(__name__)

# The requester of a scheduled run on an agent's shared thread.
REQUESTER = "schedule"
# Due schedules read per look; the rest are read at once after.
BATCH = 100
# The shortest pause between two looks (a due tick another replica is claiming).
MIN_PAUSE_SECONDS = 0.05
# Ticks one schedule claims in one poll (a per-second schedule catching up).
MAX_CLAIMS = 20


def tick_request_id(schedule_id: str, tick: datetime) -> str:
    return f"schedule:{schedule_id}:{aware(tick):%Y%m%dT%H%M%SZ}"


class Scheduler:
    def __init__(
        self,
        repo: SchedulesRepository,
        runs: RunService,
        misfire_grace: timedelta,
        stale_after: timedelta,
    ) -> None:
        self._repo = repo
        self._runs = runs
        self._grace = misfire_grace
        self._stale_after = stale_after

    async def run_due(self) -> int:
        """One look: claims every due tick this replica wins and starts its
        runs. Returns how many runs it started."""
        now = utcnow()
        started = 0
        for row in await self._repo.due(now, now - self._stale_after, BATCH):
            try:
                started += await self._run_schedule(row, now)
            except Exception:  # noqa: BLE001 - one schedule's failure must not stop the others
                # A claimed tick stays pending: it is started once stale.
                log.exception("schedule %s: tick failed", row.id)
        return started

    async def _run_schedule(self, row: Schedule, now: datetime) -> int:
        owed: list[datetime] = []
        pending = aware(row.pending_tick_at) if row.pending_tick_at else None
        stale_before = now - self._stale_after
        if pending and row.pending_since and aware(row.pending_since) <= stale_before:
            if await self._repo.reclaim(row.id, pending, stale_before, now):
                owed.append(pending)
        cron = Cron(row.cron, row.time_zone)
        due = aware(row.next_run_at) if row.next_run_at else None
        for _ in range(MAX_CLAIMS):
            if due is None or due > now:
                break
            tick_plan = plan(cron, due, now, self._grace)
            if not await self._repo.claim(row.id, due, tick_plan, now):
                break  # another replica has it
            if pending and pending not in owed:
                # A claim before ours whose run was not recorded yet: starting
                # it again is harmless (the same request_id), forgetting it is not.
                owed.append(pending)
            if tick_plan.missed:
                SCHEDULE_TICKS.labels("missed").inc(len(tick_plan.missed))
                log.warning("schedule %s missed %d tick(s)", row.id, len(tick_plan.missed))
            if tick_plan.run is not None:
                owed.append(tick_plan.run)
                pending = tick_plan.run
            due = tick_plan.next_tick
        for tick in owed:
            await self._start(row, tick)
        return len(owed)

    async def _start(self, row: Schedule, tick: datetime) -> None:
        request = RunRequest(
            user=row.user_id,
            request_id=tick_request_id(row.id, tick),
            conversation_id=row.conversation_id or "",
            message=row.message,
            requested_model="",
            surface=engine_pb2.SURFACE_SCHEDULE,
            forced_skills=[],
            budget=RunBudget(),
            ask=AskSpec(REQUESTER, row.agent_id) if row.agent_id else None,
            trigger_id=row.id,
            trigger_payload_json=json.dumps({"schedule_id": row.id, "tick": aware(tick).isoformat()}),
        )
        try:
            run_id, error = await self._runs.start(request), ""
        except DependencyUnavailable:
            # Left pending: retried once stale, when the service is back.
            log.warning("schedule %s: tick %s waits for a service", row.id, tick, exc_info=True)
            return
        except DomainError as exc:  # the target is gone, the message no longer fits...
            run_id, error = "", exc.message
            log.warning("schedule %s: tick %s could not start: %s", row.id, tick, error)
        SCHEDULE_TICKS.labels("failed" if error else "started").inc()
        await self._repo.started(row.id, tick, run_id, error)

    async def loop(self) -> None:
        """Runs due ticks until cancelled; a failed look is logged and retried."""
        async with self._repo.wakeups.subscribe(SCHEDULES) as waiter:
            while True:
                pause = None
                try:
                    await self.run_due()
                    pause = await self._until_due()
                except Exception:  # noqa: BLE001 - keep scheduling through a database blip
                    log.exception("scheduling failed")
                await waiter.wait(pause)

    async def _until_due(self) -> float | None:
        """Seconds until the next tick of an active schedule, or until a
        claimed tick goes stale; None when there is none."""
        due = await self._repo.next_due(self._stale_after)
        if due is None:
            return None
        return max(MIN_PAUSE_SECONDS, (due - utcnow()).total_seconds())
