"""Per-user run quotas: how many runs a user may have executing at once, and
how many they may start within a sliding window (a minute). Pure decision
logic: the repository counts, from the database, the user's running runs and
the start times inside the window (so the limits hold across engine
replicas), and :meth:`RunQuota.refusal` decides. Only counts and one start
time are read, whatever the limits."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from services.shared.errors import Exhausted, RateLimited, TooManyRuns
from services.shared.time import aware

# A run's length is unknown when it starts: a caller over the concurrent
# limit is told to come back after this many seconds.
BUSY_RETRY_SECONDS = 5


@dataclass(frozen=True)
class RunQuota:
    # 0: no limit.
    max_concurrent: int = 0
    per_window: int = 0
    window: timedelta = timedelta(minutes=1)

    @property
    def limits_anything(self) -> bool:
        return bool(self.max_concurrent or self.per_window)

    def window_start(self, now: datetime) -> datetime:
        """Runs started after this instant count against ``per_window``."""
        return now - self.window

    def leaving_index(self, recent: int) -> int | None:
        """Of ``recent`` starts inside the window, oldest first, the index of
        the one that must leave it for one more run to fit (with n starts and
        a limit of L, the n - L + 1 oldest must leave); None when one fits."""
        if not self.per_window or recent < self.per_window:
            return None
        return recent - self.per_window

    def refusal(self, running: int, recent: int, leaving: datetime | None, now: datetime) -> Exhausted | None:
        """The refusal of one more run, or None when it may start.
        ``running``: the user's runs executing now; ``recent``: how many they
        started since :meth:`window_start`; ``leaving``: the start at
        :meth:`leaving_index` (None when there is room)."""
        if self.max_concurrent and running >= self.max_concurrent:
            return TooManyRuns(
                f"you have {running} runs in progress and may have at most {self.max_concurrent} "
                f"at once; retry when one has ended (in about {BUSY_RETRY_SECONDS} s) or cancel one",
                retry_after=BUSY_RETRY_SECONDS,
                limit=str(self.max_concurrent),
            )
        if leaving is not None and self.leaving_index(recent) is not None:
            wait = self.seconds_until_room(leaving, now)
            return RateLimited(
                f"you started {recent} runs in the last {_seconds(self.window)} s and may "
                f"start at most {self.per_window}; retry in {wait} s",
                retry_after=wait,
                limit=str(self.per_window),
            )
        return None

    def seconds_until_room(self, leaving: datetime, now: datetime) -> int:
        """Whole seconds (at least 1) until ``leaving`` is out of the window."""
        wait = (aware(leaving) + self.window - aware(now)).total_seconds()
        return max(1, math.ceil(wait))


def _seconds(window: timedelta) -> int:
    return round(window.total_seconds())
