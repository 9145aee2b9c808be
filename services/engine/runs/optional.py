"""Calls to a service a chat run can do without (memory, the router): a
failure gives the fallback value, and the run's one notice about that
service."""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import TypeVar

from services.engine.runs.recorder import Recorder
from services.shared.errors import DependencyUnavailable

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class OptionalServices:
    # Each service's notice code (its text: services.engine.texts).
    NOTICES = {"memory": "MEMORY_UNAVAILABLE", "router": "ROUTER_UNAVAILABLE"}

    def __init__(self, rec: Recorder) -> None:
        self._rec = rec
        self._failed: set[str] = set()

    async def __call__(self, service: str, call: Awaitable[_T], fallback: _T) -> _T:
        try:
            return await call
        except DependencyUnavailable as exc:
            self.failed(service, exc)
            return fallback

    def failed(self, service: str, exc: DependencyUnavailable) -> None:
        log.warning("run %s goes on without %s: %s", self._rec.run_id, service, exc.message)
        if service not in self._failed:
            self._failed.add(service)
            self._rec.say(self.NOTICES[service], cause=exc.message)
