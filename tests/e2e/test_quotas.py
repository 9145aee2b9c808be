"""Quotas over HTTP against the real processes, on SQLite and PostgreSQL: a
user over the run rate gets 429 with Retry-After and the reason in the JSON
body (the OpenAI endpoint in OpenAI's shape, the terminal client its message
and exit code), another user is not affected; a full memory quota is 429
with its own reason, not 413."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import ROOT, Launched
from tests.e2e.sse import read_events
from tests.e2e.test_terminal_client import environment

PER_MINUTE = 3
LAUNCH_ENV = {
    "SWITCHBOARD_ENGINE_RUNS_PER_MINUTE_PER_USER": str(PER_MINUTE),
    "SWITCHBOARD_ENGINE_MAX_CONCURRENT_RUNS_PER_USER": "2",
}
# Memory's own limit of instruction pages per user (services/memory/personal/domain.py).
MAX_INSTRUCTION_PAGES = 100


@pytest.fixture(scope="module")
def alice(launched: Launched) -> Iterator[httpx.Client]:
    with launched.client("alice") as client:
        yield client


@pytest.fixture(scope="module")
def bob(launched: Launched) -> Iterator[httpx.Client]:
    with launched.client("bob") as client:
        yield client


def new_conversation(client: httpx.Client) -> str:
    response = client.post("/api/agent/conversations", json={})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def send(client: httpx.Client, conversation: str, text: str = "hello") -> httpx.Response:
    """Posts a message; a run's stream is read to its end."""
    with client.stream(
        "POST", f"/api/agent/conversations/{conversation}/messages", json={"message": text}
    ) as r:
        if r.status_code == 200:
            events = list(read_events(r))
            assert events[-1].event == "final", events[-1]
        else:
            r.read()
        return r


def test_over_the_run_rate_is_429_with_retry_after_and_the_reason(
    launched: Launched, alice: httpx.Client, bob: httpx.Client, tmp_path: Path
) -> None:
    conversation = new_conversation(alice)
    for _ in range(PER_MINUTE):
        assert send(alice, conversation).status_code == 200

    refused = send(alice, conversation)
    assert refused.status_code == 429, refused.text
    wait = int(refused.headers["Retry-After"])
    assert 1 <= wait <= 60
    error = refused.json()["error"]
    assert error["code"] == "RESOURCE_EXHAUSTED" and error["reason"] == "ERROR_REASON_RATE_LIMITED"
    assert error["retry_after_seconds"] == wait and f"at most {PER_MINUTE}" in error["message"]
    # Nothing was recorded for the refused message.
    runs = alice.get(f"/api/agent/conversations/{conversation}/runs").json()["runs"]
    assert len(runs) == PER_MINUTE

    # The OpenAI-compatible endpoint: OpenAI's 429.
    body = {"model": "auto", "messages": [{"role": "user", "content": "hello"}]}
    openai = alice.post("/v1/chat/completions", json=body)
    assert openai.status_code == 429 and 1 <= int(openai.headers["Retry-After"]) <= 60
    assert openai.json()["error"]["type"] == "rate_limit_error"
    assert openai.json()["error"]["code"] == "rate_limit_exceeded"

    # The terminal client: the quota in the user's language, exit code 5.
    for lang, words in (
        ("C.UTF-8", "too many runs started in the last minute; retry in"),
        ("fr_FR.UTF-8", "trop de runs lancés dans la dernière minute ; réessayez dans"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "client", "chat", "-m", "hello"],
            cwd=ROOT,
            env={**environment(tmp_path, launched.url, launched.token("alice")), "LANG": lang},
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=60,
            check=False,
        )
        said = " ".join(done.stderr.split())
        assert done.returncode == 5 and words in said and "HTTP 429" in said, (done.returncode, done.stderr)

    # Bob's quota is his own.
    assert send(bob, new_conversation(bob)).status_code == 200


def test_a_full_memory_quota_is_429_with_its_reason(launched: Launched) -> None:
    with launched.client("bob") as carol:
        for index in range(MAX_INSTRUCTION_PAGES):
            made = carol.post(
                "/api/agent/personal-settings/instructions-page", json={"title": f"Page {index}"}
            )
            assert made.status_code == 201, made.text
        full = carol.post("/api/agent/personal-settings/instructions-page", json={"title": "One too many"})
    assert full.status_code == 429, full.text
    error = full.json()["error"]
    assert error["code"] == "RESOURCE_EXHAUSTED" and error["reason"] == "ERROR_REASON_QUOTA_EXCEEDED"
    assert "100 instruction pages" in error["message"]
    # Waiting does not free a storage quota: no Retry-After.
    assert "Retry-After" not in full.headers and "retry_after_seconds" not in error
