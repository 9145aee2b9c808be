"""What the engine does on its own, beside the runs clients ask for: the
scheduler (scheduled runs) and the retention prune, each a background task
of every replica, with the ScheduleService servicer."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncEngine

from services.engine.collaborators import Collaborators
from services.engine.retention import Retention, RetentionPolicy
from services.engine.runs import RunService
from services.engine.schedules.repository import SchedulesRepository
from services.engine.schedules.scheduler import Scheduler
from services.engine.schedules.service import Schedules
from services.engine.schedules.servicer import ScheduleServicer
from services.engine.settings import EngineSettings


@dataclass
class Automation:
    servicer: ScheduleServicer
    scheduler: Scheduler
    retention: Retention
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def stop(self) -> None:
        """Stops the loops (a shutdown starts no new scheduled run)."""
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.tasks.clear()


def start_automation(
    settings: EngineSettings, database: AsyncEngine, collaborators: Collaborators, runs: RunService
) -> Automation:
    repo = SchedulesRepository(database, runs.wakeups)
    scheduler = Scheduler(
        repo,
        runs,
        misfire_grace=timedelta(seconds=settings.schedule_misfire_grace_seconds),
        # A claimed tick whose run was not started within a lease is its
        # claimant's loss: another replica starts it.
        stale_after=timedelta(seconds=settings.lease_seconds),
    )
    policy = RetentionPolicy.from_days(settings.retention_run_events_days, settings.retention_runs_days)
    retention = Retention(database, policy, settings.retention_interval_seconds, settings.instance_id)
    automation = Automation(
        ScheduleServicer(Schedules(repo, collaborators, settings.max_message_chars)), scheduler, retention
    )
    automation.tasks.append(asyncio.create_task(scheduler.loop()))
    if policy.enabled:
        automation.tasks.append(asyncio.create_task(retention.loop()))
    return automation
