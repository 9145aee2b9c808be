"""The webhook worker: a background task of each engine that delivers the
outbox's due rows, whichever replica ended their run (a restarted engine
picks up what the last one left). Each claim is one attempt; a failed one
(non-2xx, timeout, refused address) is due again after a jittered exponential
backoff (tenacity's), until ``retry_seconds`` after the run's end, then the
row is failed. Deliveries never touch the runs themselves: a receiver that
hangs or fails costs a worker slot for at most ``timeout``, never a run."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx
from google.protobuf import json_format
from prometheus_client import Counter, Histogram
from standardwebhooks import Webhook
from tenacity import RetryCallState, Retrying, wait_exponential_jitter

from services.engine.repository import RunsRepository
from services.engine.runs.convert import run_to_proto
from services.engine.webhooks.models import WebhookOutbox
from services.engine.webhooks.outbox import Attempt, OutboxRepository
from services.engine.webhooks.signing import signed_headers
from services.shared.errors import InvalidArgument
from services.shared.outbound_tls import httpx_context
from services.shared.outbound_urls import (
    RefusedAddress,
    UrlPolicy,
    check_url,
    pinned_url,
    resolve_allowed,
)
from services.shared.time import aware, utcnow
from services.shared.wakeups import WEBHOOKS, Waiter

log = logging.getLogger(__name__)

# By outcome: delivered (a 2xx), retry (failed, due again), failed (failed,
# and the retry time is over). No label holds a run or a URL.
ATTEMPTS = Counter(
    "switchboard_webhook_attempts_total", "Webhook delivery attempts, by outcome.", ["outcome"]
)
ATTEMPT_SECONDS = Histogram(
    "switchboard_webhook_attempt_seconds",
    "Duration of webhook delivery attempts.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)

EVENT_TYPE = "run.ended"
# The shortest pause between two claims when a row is due again at once
# (its time came between the claim and the read of the next due time).
MIN_PAUSE_SECONDS = 0.01


@dataclass(frozen=True)
class WebhookLimits:
    # Each attempt's whole time (connect, send, answer).
    timeout: float = 10.0
    # How long after the run's end attempts go on.
    retry_seconds: float = 3600.0
    # Backoff between attempts: initial, then doubling up to max, plus jitter.
    backoff_initial: float = 1.0
    backoff_max: float = 300.0
    # Attempts in flight at once in this engine.
    concurrency: int = 8

    @property
    def lease_seconds(self) -> float:
        """A claim outlives its attempt: another worker takes the row over
        only once the attempt can no longer be running."""
        return self.timeout + max(5.0, self.timeout)


def body_of(run_json: dict[str, object], finished: datetime | None) -> str:
    """The delivered JSON: the event type, when the run ended, and the run
    record as the proto's JSON form (EngineService.GetRun's Run)."""
    stamp = aware(finished or utcnow()).isoformat().replace("+00:00", "Z")
    payload = {"type": EVENT_TYPE, "timestamp": stamp, "data": {"run": run_json}}
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


class WebhookWorker:
    def __init__(
        self,
        outbox: OutboxRepository,
        runs: RunsRepository,
        signer: Webhook | None,
        policy: UrlPolicy,
        limits: WebhookLimits,
        owner: str,
    ) -> None:
        self._outbox = outbox
        self._runs = runs
        self._signer = signer
        self._policy = policy
        self._limits = limits
        self._owner = owner
        # While running: woken by a slot freed or a queued delivery's
        # announcement, from any replica (services.shared.wakeups); else at
        # the safety poll.
        self._waiter: Waiter | None = None
        self._inflight: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(limits.concurrency)
        self._backoff = wait_exponential_jitter(
            multiplier=limits.backoff_initial, max=limits.backoff_max, jitter=limits.backoff_initial
        )
        # Redirects are not followed: a 3xx could point inside the network.
        self._client = httpx.AsyncClient(
            follow_redirects=False, timeout=limits.timeout, verify=httpx_context()
        )

    def wake(self) -> None:
        """Look for due rows now."""
        if self._waiter is not None:
            self._waiter.wake()

    async def run(self) -> None:
        """Claims and delivers due rows until cancelled: when woken, when the
        next retry is due, and at the safety poll."""
        async with self._outbox.wakeups.subscribe(WEBHOOKS) as waiter:
            self._waiter = waiter
            await self._claim_and_deliver(waiter)

    async def _claim_and_deliver(self, waiter: Waiter) -> None:
        while True:
            pause: float | None = None
            try:
                free = self._limits.concurrency - len(self._inflight)
                rows = await self._outbox.claim(self._owner, self._limits.lease_seconds, free) if free else []
                if free and len(rows) < free:
                    pause = await self._until_due()
            except Exception:  # noqa: BLE001 - keep delivering through a database blip
                log.exception("claiming webhook deliveries failed")
                rows = []
            for row in rows:
                task = asyncio.create_task(self._deliver(row))
                self._inflight.add(task)
                task.add_done_callback(self._done)
            if len(rows) == free and free:
                continue  # maybe more are due
            await waiter.wait(pause)

    async def _until_due(self) -> float | None:
        """Seconds until the earliest pending row can be claimed (a retry's
        time, another attempt's lease), at least a moment; None: none pending."""
        due = await self._outbox.next_due()
        if due is None:
            return None
        return max(MIN_PAUSE_SECONDS, (due - utcnow()).total_seconds())

    def _done(self, task: asyncio.Task[None]) -> None:
        self._inflight.discard(task)
        self.wake()  # a slot is free

    async def _deliver(self, row: WebhookOutbox) -> None:
        try:
            attempt = await self._attempt(row)
            retry_at = self._retry_at(row, attempt)
            await self._outbox.record(row, self._owner, attempt, retry_at)
            outcome = "delivered" if attempt.delivered else "retry" if retry_at else "failed"
            ATTEMPTS.labels(outcome).inc()
            ATTEMPT_SECONDS.observe(attempt.duration_ms / 1000)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - the lease expires and another attempt follows
            log.exception("webhook delivery of run %s could not be recorded", row.run_id)
        else:
            if attempt.delivered:
                log.info("webhook of run %s delivered (attempt %d)", row.run_id, row.attempts + 1)
            else:
                log.info("webhook of run %s attempt %d: %s", row.run_id, row.attempts + 1, attempt.error)

    def _retry_at(self, row: WebhookOutbox, attempt: Attempt) -> datetime | None:
        """When to try again after a failed attempt; None when the retry time is over."""
        if attempt.delivered:
            return None
        state = RetryCallState(Retrying(), None, (), {})
        state.attempt_number = row.attempts + 1
        retry_at = utcnow() + timedelta(seconds=self._backoff(state))
        deadline = aware(row.created_at) + timedelta(seconds=self._limits.retry_seconds)
        return retry_at if retry_at <= deadline else None

    async def _attempt(self, row: WebhookOutbox) -> Attempt:
        """One attempt, name resolution included, within ``timeout`` (so it
        always ends well inside its claim's lease)."""
        at = utcnow()
        began = time.monotonic()
        try:
            async with asyncio.timeout(self._limits.timeout):
                status, error = await self._post(row, at)
        except TimeoutError:
            status, error = 0, f"timed out after {self._limits.timeout:g} s"
        except (InvalidArgument, RefusedAddress) as exc:
            status, error = 0, f"refused: {getattr(exc, 'message', None) or exc}"
        except Exception as exc:  # noqa: BLE001 - any failure to POST is this attempt's error
            status, error = 0, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return Attempt(status, error[:500], int((time.monotonic() - began) * 1000), at)

    async def _post(self, row: WebhookOutbox, at: datetime) -> tuple[int, str]:
        """(status code, error) of POSTing the run's record once."""
        if self._signer is None:
            return 0, "webhooks are not configured on this engine (no secret)"
        parts = check_url(row.url, self._policy)
        address = await resolve_allowed(parts, self._policy)
        stored = await self._runs.get_run(row.run_id)
        if stored is None:
            return 0, "the run no longer exists"
        body = body_of(
            json_format.MessageToDict(
                run_to_proto(stored),
                preserving_proto_field_name=True,
                always_print_fields_with_no_presence=True,
            ),
            stored.finished_at,
        )
        headers = signed_headers(self._signer, row.webhook_id, at, body)
        # Connect to the address just checked, under the URL's own name
        # (Host header, TLS server name and certificate check).
        headers["host"] = parts.netloc
        url = pinned_url(parts, address)
        extensions = {"sni_hostname": parts.hostname or ""} if parts.scheme == "https" else {}
        # Streamed, and the answer's body never read: only its status counts.
        request = self._client.build_request(
            "POST", url, content=body.encode(), headers=headers, extensions=extensions
        )
        response = await self._client.send(request, stream=True)
        await response.aclose()
        if 200 <= response.status_code < 300:
            return response.status_code, ""
        return response.status_code, f"HTTP {response.status_code}"

    async def close(self) -> None:
        """Stops in-flight attempts and frees their rows for another worker."""
        for task in list(self._inflight):
            task.cancel()
        await asyncio.gather(*self._inflight, return_exceptions=True)
        await self._client.aclose()
        with contextlib.suppress(Exception):
            await self._outbox.release(self._owner)
