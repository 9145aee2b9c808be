"""The run quotas' arithmetic (the window, the delay until room), and a
quota's refusal from the wire to HTTP 429, the OpenAI shape and the terminal
client, in English and French."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from grpc.aio import Metadata

from client import exits, messages
from client.api import ApiRefusal
from client.output import Output
from gateway.errors import api_error_handler, from_rpc_error
from gateway.openai_compat.errors import error_response, translate
from services.engine.quotas import BUSY_RETRY_SECONDS, RunQuota
from services.shared.errors import QuotaExceeded, RateLimited, TooManyRuns, error_info, retry_delay, to_status

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def rpc_error(status: grpc.Status) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(status.code, Metadata(), Metadata(*status.trailing_metadata), status.details)


# The window


def test_no_limit_refuses_nothing() -> None:
    quota = RunQuota()
    assert not quota.limits_anything
    assert quota.leaving_index(1000) is None
    assert quota.refusal(1000, 1000, None, NOW) is None


def test_the_window_is_the_last_minute() -> None:
    assert RunQuota(per_window=3).window_start(NOW) == ago(60)


def test_under_the_rate_a_run_may_start() -> None:
    quota = RunQuota(per_window=3)
    assert quota.leaving_index(2) is None
    assert quota.refusal(0, 2, None, NOW) is None


def test_at_the_rate_the_wait_is_until_the_oldest_leaves() -> None:
    quota = RunQuota(per_window=3)
    starts = sorted([ago(10), ago(50), ago(30)])
    index = quota.leaving_index(len(starts))
    assert index == 0  # the oldest
    refusal = quota.refusal(0, 3, starts[index], NOW)
    assert isinstance(refusal, RateLimited)
    # The oldest start (50 s ago) leaves the minute in 10 s.
    assert refusal.retry_after == 10 and "retry in 10 s" in refusal.message
    assert refusal.metadata == {"limit": "3"}


def test_over_the_rate_every_excess_start_must_leave_first() -> None:
    # 5 starts for a limit of 3 (runs admitted before the limit was lowered):
    # the three oldest must leave; the third oldest (30 s ago) leaves in 30 s.
    quota = RunQuota(per_window=3)
    starts = [ago(55), ago(45), ago(30), ago(20), ago(5)]
    index = quota.leaving_index(len(starts))
    assert index == 2
    assert quota.seconds_until_room(starts[index], NOW) == 30


def test_the_wait_is_whole_seconds_and_at_least_one() -> None:
    quota = RunQuota(per_window=1)
    assert quota.seconds_until_room(ago(59.2), NOW) == 1  # 0.8 s rounds up
    assert quota.seconds_until_room(ago(60), NOW) == 1  # leaving now: still 1
    assert quota.seconds_until_room(ago(0.5), NOW) == 60


def test_naive_times_from_sqlite_are_utc() -> None:
    naive = ago(50).replace(tzinfo=None)
    assert RunQuota(per_window=1).seconds_until_room(naive, NOW) == 10


def test_a_shorter_window() -> None:
    quota = RunQuota(per_window=2, window=timedelta(seconds=10))
    assert quota.window_start(NOW) == ago(10)
    assert quota.refusal(0, 2, ago(9), NOW) is not None
    assert quota.seconds_until_room(ago(9), NOW) == 1


def test_concurrent_runs_are_refused_first() -> None:
    quota = RunQuota(max_concurrent=2, per_window=3)
    assert quota.refusal(1, 0, None, NOW) is None
    refusal = quota.refusal(2, 5, ago(1), NOW)
    assert isinstance(refusal, TooManyRuns)
    assert refusal.retry_after == BUSY_RETRY_SECONDS and "at most 2 at once" in refusal.message


# On the wire and over HTTP


def test_a_refusal_carries_its_reason_and_retry_info() -> None:
    error = rpc_error(to_status(RateLimited("slow down", retry_after=37, limit="3")))
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    info = error_info(error)
    assert info is not None and info.reason == "ERROR_REASON_RATE_LIMITED" and info.metadata["limit"] == "3"
    assert retry_delay(error) == 37


def test_a_refusal_without_a_delay_has_no_retry_info() -> None:
    error = rpc_error(to_status(QuotaExceeded("at most 100 instruction pages")))
    assert retry_delay(error) is None
    assert error_info(error).reason == "ERROR_REASON_QUOTA_EXCEEDED"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("error", "reason", "retry_after"),
    [
        (RateLimited("r", retry_after=12.2), "ERROR_REASON_RATE_LIMITED", 13),
        (TooManyRuns("t", retry_after=5), "ERROR_REASON_TOO_MANY_RUNS", 5),
        (QuotaExceeded("q"), "ERROR_REASON_QUOTA_EXCEEDED", None),
    ],
)
async def test_every_quota_is_429_with_retry_after(
    error: RateLimited | TooManyRuns | QuotaExceeded, reason: str, retry_after: int | None
) -> None:
    api = from_rpc_error(rpc_error(to_status(error)))
    assert (api.status, api.code, api.reason, api.retry_after) == (
        429,
        "RESOURCE_EXHAUSTED",
        reason,
        retry_after,
    )
    response = await api_error_handler(None, api)  # type: ignore[arg-type]
    body = json.loads(response.body)["error"]
    assert response.status_code == 429 and body["reason"] == reason and body["message"] == error.message
    if retry_after is None:
        assert "retry-after" not in response.headers and "retry_after_seconds" not in body
    else:
        assert (
            response.headers["retry-after"] == str(retry_after) and body["retry_after_seconds"] == retry_after
        )


def test_the_openai_shape_is_rate_limit_exceeded_with_retry_after() -> None:
    openai = translate(rpc_error(to_status(RateLimited("slow down", retry_after=7))))
    assert openai is not None
    response = error_response(openai)
    body = json.loads(response.body)["error"]
    assert response.status_code == 429 and response.headers["retry-after"] == "7"
    assert (body["type"], body["code"], body["message"]) == (
        "rate_limit_error",
        "rate_limit_exceeded",
        "slow down",
    )
    # Nothing was created: the SDKs may retry after the delay.
    assert "x-should-retry" not in response.headers
    # A conversation was created for the request: a retry would create another.
    openai.headers["X-Switchboard-Conversation"] = "c"
    assert error_response(openai).headers["x-should-retry"] == "false"


# The terminal client


@pytest.fixture
def english_then_french() -> Iterator[None]:
    yield
    messages.use("en")


@pytest.mark.parametrize(
    ("language", "expected"),
    [
        ("en", "too many runs started in the last minute; retry in 37 s"),
        ("fr", "trop de runs lancés dans la dernière minute ; réessayez dans 37 s"),
    ],
)
def test_the_client_says_the_quota_and_when_to_retry(
    language: str, expected: str, english_then_french: None
) -> None:
    messages.use(language)
    stderr = io.StringIO()
    refusal = ApiRefusal(429, "RESOURCE_EXHAUSTED", "you started 3 runs", "ERROR_REASON_RATE_LIMITED", 37)
    Output(stdout=io.StringIO(), stderr=stderr).refusal(refusal)
    said = " ".join(stderr.getvalue().split())
    assert expected in said and "you started 3 runs" in said and "HTTP 429" in said
    assert exits.for_refusal(refusal) == exits.CONFLICT == 5


def test_the_client_json_keeps_the_delay() -> None:
    stderr = io.StringIO()
    refusal = ApiRefusal(429, "RESOURCE_EXHAUSTED", "m", "ERROR_REASON_TOO_MANY_RUNS", 5)
    Output(as_json=True, stdout=io.StringIO(), stderr=stderr).refusal(refusal)
    error = json.loads(stderr.getvalue())["error"]
    assert (error["reason"], error["status"], error["retry_after_seconds"]) == (
        "ERROR_REASON_TOO_MANY_RUNS",
        429,
        5,
    )
