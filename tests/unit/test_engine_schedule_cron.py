"""A schedule's clock: cron expressions in a time zone (daylight-saving days
included), the seconds field, what is refused, and which passed ticks run
or are missed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.engine.schedules.cron import Cron, plan
from services.shared.errors import InvalidArgument


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


def test_ticks_are_read_in_the_schedules_time_zone() -> None:
    nine_in_paris = Cron.parse("0 9 * * *", "Europe/Paris")
    assert nine_in_paris.next_after(utc(2026, 1, 15, 12)) == utc(2026, 1, 16, 8)  # winter: UTC+1
    assert nine_in_paris.next_after(utc(2026, 7, 15, 12)) == utc(2026, 7, 16, 7)  # summer: UTC+2
    assert Cron.parse("0 9 * * *", "").next_after(utc(2026, 1, 15, 12)) == utc(2026, 1, 16, 9)


def test_a_tick_that_does_not_exist_on_a_daylight_saving_day_runs_at_the_next_existing_time() -> None:
    # 2026-03-29 in Paris: 02:00 → 03:00, so 02:30 does not exist that day.
    half_past_two = Cron.parse("30 2 * * *", "Europe/Paris")
    assert half_past_two.next_after(utc(2026, 3, 28, 22)) == utc(2026, 3, 29, 1)  # 03:00 CEST
    assert half_past_two.next_after(utc(2026, 3, 29, 1)) == utc(2026, 3, 30, 0, 30)  # 02:30 CEST


def test_a_sixth_field_counts_seconds_and_aliases_are_accepted() -> None:
    every_second = Cron.parse("* * * * * *", "UTC")
    assert every_second.next_after(utc(2026, 1, 1, 0, 0, 0)) == utc(2026, 1, 1, 0, 0, 1)
    assert Cron.parse("@hourly", "UTC").next_after(utc(2026, 1, 1, 0, 10)) == utc(2026, 1, 1, 1)
    assert Cron.parse("  0   9 * *   MON ", "UTC").expression == "0 9 * * MON"


@pytest.mark.parametrize(
    ("expression", "time_zone", "field"),
    [
        ("61 * * * *", "UTC", "cron"),
        ("* * *", "UTC", "cron"),
        ("* * * * * * *", "UTC", "cron"),  # no year field
        ("", "UTC", "cron"),
        ("tous les jours", "UTC", "cron"),
        ("@sometimes", "UTC", "cron"),
        ("0 9 * * *", "Europe/Atlantis", "time_zone"),
        ("0 9 * * *", "../../etc/passwd", "time_zone"),
    ],
)
def test_bad_expressions_and_zones_are_invalid_arguments(expression: str, time_zone: str, field: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        Cron.parse(expression, time_zone)
    assert raised.value.metadata.get("field") == field


def test_ticks_within_the_grace_run_one_by_one_older_ones_are_missed() -> None:
    minutely = Cron.parse("* * * * *", "UTC")
    grace = timedelta(seconds=90)
    # On time: the tick runs, the next is a minute later.
    on_time = plan(minutely, utc(2026, 1, 1, 10), utc(2026, 1, 1, 10, 0, 1), grace)
    assert (on_time.missed, on_time.run, on_time.next_tick) == (
        [],
        utc(2026, 1, 1, 10),
        utc(2026, 1, 1, 10, 1),
    )
    # Ten minutes down: ticks older than the grace are missed, the oldest
    # within it runs, and the next one is still due (claimed next).
    late = plan(minutely, utc(2026, 1, 1, 10), utc(2026, 1, 1, 10, 10, 30), grace)
    assert late.missed == [utc(2026, 1, 1, 10, m) for m in range(9)]
    assert late.run == utc(2026, 1, 1, 10, 9) and late.next_tick == utc(2026, 1, 1, 10, 10)
    # Nothing due yet.
    early = plan(minutely, utc(2026, 1, 1, 10), utc(2026, 1, 1, 9, 59), grace)
    assert (early.missed, early.run, early.next_tick) == ([], None, utc(2026, 1, 1, 10))


def test_with_no_grace_only_a_tick_claimed_at_its_second_runs() -> None:
    hourly = Cron.parse("0 * * * *", "UTC")
    missed = plan(hourly, utc(2026, 1, 1, 10), utc(2026, 1, 1, 12, 30), timedelta(0))
    assert missed.missed == [utc(2026, 1, 1, 10), utc(2026, 1, 1, 11), utc(2026, 1, 1, 12)]
    assert missed.run is None and missed.next_tick == utc(2026, 1, 1, 13)
