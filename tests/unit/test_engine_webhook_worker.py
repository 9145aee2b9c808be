"""One delivery attempt's failures, and when the next attempt is due: the
webhook worker without a database (what it would record is its answer)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from services.engine.webhooks.models import WebhookOutbox
from services.engine.webhooks.outbox import Attempt
from services.engine.webhooks.signing import load_secret
from services.engine.webhooks.worker import WebhookLimits, WebhookWorker
from services.shared.outbound_urls import UrlPolicy
from services.shared.time import utcnow

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def worker(limits: WebhookLimits, secret: str | None = SECRET) -> WebhookWorker:
    # Neither repository is reached by these attempts (they fail before the run is read).
    none: Any = None
    return WebhookWorker(none, none, load_secret(secret) if secret else None, UrlPolicy(), limits, "me")


def row(url: str = "https://hooks.example.com/h", attempts: int = 0, age: float = 0.0) -> WebhookOutbox:
    created = utcnow() - timedelta(seconds=age)
    return WebhookOutbox(run_id="r", url=url, webhook_id="msg_r", attempts=attempts, created_at=created)


async def test_a_name_that_never_resolves_times_out_within_the_attempt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def never(*_: Any, **__: Any) -> list[Any]:
        await asyncio.Event().wait()
        return []

    monkeypatch.setattr("asyncio.base_events.BaseEventLoop.getaddrinfo", never)
    attempt = await worker(WebhookLimits(timeout=0.2))._attempt(row())
    assert attempt.status_code == 0 and "timed out" in attempt.error


async def test_a_name_now_resolving_inside_is_a_refused_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    async def inside(self: Any, host: str, port: int, **_: Any) -> list[Any]:
        return [(2, 1, 6, "", ("10.0.0.9", port))]

    monkeypatch.setattr("asyncio.base_events.BaseEventLoop.getaddrinfo", inside)
    attempt = await worker(WebhookLimits())._attempt(row())
    assert attempt.status_code == 0 and attempt.error.startswith("refused:") and "10.0.0.9" in attempt.error
    assert not attempt.delivered


async def test_without_a_secret_an_attempt_fails_and_says_why() -> None:
    attempt = await worker(WebhookLimits(), secret=None)._attempt(row())
    assert attempt.status_code == 0 and "no secret" in attempt.error


def test_the_next_attempt_backs_off_with_jitter_until_the_retry_time_is_over() -> None:
    limits = WebhookLimits(backoff_initial=1.0, backoff_max=8.0, retry_seconds=3600)
    failing = Attempt(500, "HTTP 500", 3, utcnow())
    subject = worker(limits)
    for attempts, least, most in [(0, 1, 2), (1, 2, 3), (2, 4, 5), (3, 8, 9), (9, 8, 9)]:
        retry_at = subject._retry_at(row(attempts=attempts), failing)
        assert retry_at is not None
        wait = (retry_at - utcnow()).total_seconds()
        assert least - 0.1 <= wait <= most, (attempts, wait)
    assert subject._retry_at(row(attempts=3, age=3599), failing) is None
    assert subject._retry_at(row(), Attempt(204, "", 3, utcnow())) is None
