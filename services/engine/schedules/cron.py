"""A schedule's clock: a cron expression read in an IANA time zone, parsed
by croniter (maintained under pallets-eco; it takes an optional seconds
field, which cronsim does not, and steps through daylight-saving changes in
aware datetimes). Every time in and out is UTC."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from services.shared.errors import InvalidArgument

MAX_CRON_CHARS = 200
# How many passed ticks are counted one by one when a schedule was not run
# for a long time (a per-second schedule down for days); beyond this the
# count stops there.
MAX_COUNTED_TICKS = 100_000


def zone(name: str) -> ZoneInfo:
    """The time zone of ``name`` ("" = UTC); INVALID_ARGUMENT when unknown."""
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidArgument(f"unknown time zone {name!r}", field="time_zone") from exc


@dataclass(frozen=True)
class Cron:
    expression: str
    time_zone: str

    @classmethod
    def parse(cls, expression: str, time_zone: str) -> Cron:
        """Five fields (minute hour day month weekday), six with a trailing
        seconds field, or an @-alias; INVALID_ARGUMENT otherwise."""
        text = " ".join(expression.split())
        fields = text.split(" ")
        if not text or len(text) > MAX_CRON_CHARS or (not text.startswith("@") and len(fields) not in (5, 6)):
            raise InvalidArgument(
                "cron must have five fields (minute hour day month weekday) or six (and seconds)",
                field="cron",
            )
        zone(time_zone)
        try:
            croniter(text, datetime.now(UTC))
        except (CroniterError, ValueError, KeyError) as exc:
            raise InvalidArgument(f"cron {expression!r} does not parse: {exc}", field="cron") from exc
        return cls(text, time_zone)

    def next_after(self, moment: datetime) -> datetime:
        """The first tick strictly after ``moment`` (UTC)."""
        local = moment.astimezone(zone(self.time_zone))
        return croniter(self.expression, local).get_next(datetime).astimezone(UTC)


@dataclass(frozen=True)
class TickPlan:
    """What a due schedule does now: the ticks it misses, the one it runs
    (None when all passed ticks are missed) and its next tick after that."""

    missed: list[datetime]
    run: datetime | None
    next_tick: datetime


def plan(cron: Cron, due: datetime, now: datetime, grace: timedelta) -> TickPlan:
    """From the schedule's next tick ``due`` (≤ now): ticks older than
    ``grace`` are missed, never replayed; the oldest tick within the grace
    runs (one per claim: a later one is claimed next, so a replica that was
    busy for a moment runs each tick late rather than dropping it)."""
    missed: list[datetime] = []
    tick = due
    while now - tick > grace and len(missed) < MAX_COUNTED_TICKS:
        missed.append(tick)
        tick = cron.next_after(tick)
    if now - tick > grace:  # counted as many as we count; jump to the present
        return TickPlan(missed, None, cron.next_after(now))
    if tick > now:
        return TickPlan(missed, None, tick)
    return TickPlan(missed, tick, cron.next_after(tick))
