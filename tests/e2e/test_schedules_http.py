"""Schedules over HTTP against the real processes (launcher, four services),
on SQLite and PostgreSQL: a per-second schedule starts ordinary runs marked
`schedule` on the conversation; bad input is a 400 with its reason, another
user's conversation or schedule a 404; pause, resume and delete; and the
same through the terminal client, in English and French."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Launched


@pytest.fixture(scope="module")
def alice(launched: Launched) -> Iterator[httpx.Client]:
    with launched.client("alice") as client:
        yield client


@pytest.fixture(scope="module")
def bob(launched: Launched) -> Iterator[httpx.Client]:
    with launched.client("bob") as client:
        yield client


def conversation(client: httpx.Client) -> str:
    created = client.post("/api/agent/conversations", json={"title": "Rappels"})
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def poll(read: Any, done: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if done(value):
            return value
        assert time.monotonic() < deadline, value
        time.sleep(0.1)


def test_a_per_second_schedule_starts_runs_marked_schedule(alice: httpx.Client) -> None:
    target = conversation(alice)
    body = {
        "cron": "* * * * * *",
        "time_zone": "Europe/Paris",
        "message": "Résume les nouvelles du jour, s'il te plaît.",
        "conversation_id": target,
    }
    created = alice.post("/api/schedules", json=body)
    assert created.status_code == 201, created.text
    schedule = created.json()
    assert schedule["conversation_id"] == target and schedule["run_count"] == 0 and not schedule["paused"]
    try:
        ran = poll(
            lambda: alice.get(f"/api/schedules/{schedule['id']}").json(),
            lambda s: s["run_count"] >= 2 and s.get("last_run_id"),
        )
        paused = alice.post(f"/api/schedules/{schedule['id']}/pause")
        assert paused.status_code == 200 and paused.json()["paused"] and "next_run_time" not in paused.json()
        count = alice.get(f"/api/schedules/{schedule['id']}").json()["run_count"]
        runs = poll(
            lambda: alice.get(f"/api/agent/conversations/{target}/runs", params={"page_size": 100}).json()[
                "runs"
            ],
            lambda found: len([r for r in found if r.get("trigger_id") == schedule["id"]]) == count,
        )
        scheduled = [r for r in runs if r.get("trigger_id") == schedule["id"]]
        assert {r["surface"] for r in scheduled} == {"schedule"}
        assert ran["last_run_id"] in {r["id"] for r in scheduled}
        listed = alice.get("/api/schedules", params={"page_size": 500}).json()
        assert schedule["id"] in {s["id"] for s in listed["schedules"]}
        resumed = alice.post(f"/api/schedules/{schedule['id']}/resume")
        assert resumed.status_code == 200 and not resumed.json()["paused"] and resumed.json()["next_run_time"]
    finally:
        # The system is shared: a per-second schedule must not outlive its test.
        assert alice.delete(f"/api/schedules/{schedule['id']}").status_code == 204
    assert alice.get(f"/api/schedules/{schedule['id']}").status_code == 404


@pytest.mark.parametrize(
    ("change", "status", "reason"),
    [
        ({"cron": "61 * * * *"}, 400, "ERROR_REASON_INVALID_ARGUMENT"),
        ({"cron": "chaque lundi"}, 400, "ERROR_REASON_INVALID_ARGUMENT"),
        ({"time_zone": "Europe/Atlantide"}, 400, "ERROR_REASON_INVALID_ARGUMENT"),
        ({"message": "   "}, 400, "ERROR_REASON_INVALID_ARGUMENT"),
        ({"message": "x" * 40_000}, 413, "ERROR_REASON_TOO_LARGE"),
        ({"conversation_id": "", "agent_id": ""}, 400, ""),
        ({"agent_id": "qa"}, 400, ""),  # two targets
        ({"conversation_id": "00000000-0000-4000-8000-000000000000"}, 404, "ERROR_REASON_NOT_FOUND"),
        ({"conversation_id": "", "agent_id": "no-such-agent"}, 404, "ERROR_REASON_NOT_FOUND"),
    ],
)
def test_bad_schedules_are_client_errors(
    alice: httpx.Client, change: dict[str, str], status: int, reason: str
) -> None:
    body = {"cron": "0 9 * * MON", "message": "Weekly plan", "conversation_id": conversation(alice), **change}
    response = alice.post("/api/schedules", json=body)
    assert response.status_code == status, response.text
    if reason:
        assert response.json()["error"]["reason"] == reason


def test_another_users_conversation_and_schedule_look_missing(alice: httpx.Client, bob: httpx.Client) -> None:
    target = conversation(alice)
    body = {"cron": "0 9 * * *", "message": "Daily digest", "conversation_id": target}
    refused = bob.post("/api/schedules", json=body)
    assert refused.status_code == 404 and refused.json()["error"]["reason"] == "ERROR_REASON_NOT_FOUND"
    schedule = alice.post("/api/schedules", json=body).json()
    for method, path in [
        ("GET", f"/api/schedules/{schedule['id']}"),
        ("POST", f"/api/schedules/{schedule['id']}/pause"),
        ("POST", f"/api/schedules/{schedule['id']}/resume"),
        ("DELETE", f"/api/schedules/{schedule['id']}"),
    ]:
        response = bob.request(method, path)
        assert response.status_code == 404, (method, path, response.text)
    assert schedule["id"] not in {s["id"] for s in bob.get("/api/schedules").json()["schedules"]}
    assert alice.get(f"/api/schedules/{schedule['id']}").json()["paused"] is False


# The terminal client's `switchboard schedules`, as a real subprocess.

ROOT = Path(__file__).resolve().parents[2]


def switchboard(
    launched: Launched, tmp_path: Path, *args: str, lang: str = "C.UTF-8"
) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("SWITCHBOARD_")}
    env = {key: value for key, value in env.items() if key not in ("LC_ALL", "LC_MESSAGES")}
    env |= {
        "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'gen'}",
        "HOME": str(tmp_path),
        "PYTHONIOENCODING": "utf-8",
        "LANG": lang,
        "SWITCHBOARD_URL": launched.url,
        "SWITCHBOARD_TOKEN": launched.token("alice"),
    }
    return subprocess.run(
        [sys.executable, "-m", "client", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
    )


def test_the_terminal_client_manages_schedules_in_english_and_french(
    launched: Launched, alice: httpx.Client, tmp_path: Path
) -> None:
    target = conversation(alice)
    created = switchboard(
        launched, tmp_path, "--json", "schedules", "create", "0 9 * * MON", "Plan de la semaine",
        "--tz", "Europe/Paris", "--conversation", target,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    schedule = json.loads(created.stdout)
    assert schedule["cron"] == "0 9 * * MON" and schedule["conversation_id"] == target
    try:
        listed = switchboard(launched, tmp_path, "schedules", "list")
        assert listed.returncode == 0 and schedule["id"] in listed.stdout
        english = switchboard(launched, tmp_path, "schedules", "pause", schedule["id"])
        assert english.returncode == 0, english.stderr
        assert "paused" in english.stdout and "0 runs, 0 missed" in english.stdout
        french = switchboard(launched, tmp_path, "schedules", "show", schedule["id"], lang="fr_FR.UTF-8")
        assert "en pause" in french.stdout and "0 runs, 0 manqués" in french.stdout
        assert "Plan de la semaine" in french.stdout
        resumed = switchboard(launched, tmp_path, "--json", "schedules", "resume", schedule["id"])
        assert json.loads(resumed.stdout)["paused"] is False
        bad = switchboard(
            launched, tmp_path, "schedules", "create", "61 * * * *", "x", "--conversation", target
        )
        assert bad.returncode == 2 and "INVALID_ARGUMENT" in bad.stderr
        missing = switchboard(launched, tmp_path, "schedules", "show", "00000000-0000-4000-8000-000000000000")
        assert missing.returncode == 3
    finally:
        deleted = switchboard(launched, tmp_path, "schedules", "delete", schedule["id"])
        assert deleted.returncode == 0, deleted.stderr
    assert alice.get(f"/api/schedules/{schedule['id']}").status_code == 404
