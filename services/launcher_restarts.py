"""When the local launcher restarts a process that died, and when it gives up.

A crashed process is restarted after an exponential backoff (``base``,
doubling with each crash still inside ``window`` seconds, at most
``longest``), so one bad crash costs half a second and a process that keeps
dying does not spin the machine. A process that crashes ``max_crashes`` times
within ``window`` seconds is not restarted: the launcher stops the system and
names it, since a restart loop would only hide the fault.

Times come from services.shared.timer, so tests can run the policy on a fake
clock."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from services.shared import timer


@dataclass(frozen=True)
class RestartPolicy:
    max_crashes: int = 5
    window: float = 60.0
    base: float = 0.5
    longest: float = 10.0


@dataclass
class CrashHistory:
    """One process's recent crashes, and what to do about the next one."""

    policy: RestartPolicy
    crashes: deque[float] = field(default_factory=deque)

    def crashed(self) -> float | None:
        """Records a crash now: the delay before restarting the process, or
        None when it crashed ``max_crashes`` times within the window."""
        now = timer.monotonic()
        self.crashes.append(now)
        while self.crashes and now - self.crashes[0] > self.policy.window:
            self.crashes.popleft()
        recent = len(self.crashes)
        if recent >= self.policy.max_crashes:
            return None
        return float(min(self.policy.longest, self.policy.base * 2 ** (recent - 1)))
