"""Secrets stay secret: a provider API key, gateway tokens, and every other
secret-looking setting (found by name — KEY, TOKEN, SECRET, PASSWORD — on
every service's settings, so one added later is covered) are canaries,
values that occur nowhere else. The system runs real runs with them: one on a
real-wire model (the recording fake OpenAI server, tests/fakes/llm_server.py,
which checks the key reached it), one that the provider refuses, refused
requests with a wrong token. Then every process's log, the whole OTLP trace
export, the Prometheus metrics, the run records and every error body are
searched for each canary.

The launcher's own banner is the one place a token is printed: the local
development token (not a canary; see docs/security.md), on the terminal of
whoever started it."""

from __future__ import annotations

import importlib
import json
import re
import secrets
import time
import typing
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic_settings import BaseSettings

from tests.e2e.conftest import NAMESPACES, USERS, Launched, token_of, user_id
from tests.e2e.sse import read_events
from tests.fakes.llm_server import openai_app, serve
from tests.processes import ROOT

SECRET_WORDS = ("key", "token", "secret", "password")
# A variable named for a secret ends with what it holds (not ..._TOKEN_DELAY).
SECRET_VARIABLE = re.compile(r"\b(SWITCHBOARD_[A-Z0-9_]*(?:KEY|TOKENS?|SECRET|PASSWORD))\b")
PROVIDER_KEY_ENV = "SWITCHBOARD_TEST_PROVIDER_KEY"


def canary() -> str:
    """A value found nowhere but where it was put (hex: valid as most key formats)."""
    return "5ec7e7" + secrets.token_hex(24)


def _settings_classes() -> list[type[BaseSettings]]:
    """Every BaseSettings of the services and the gateway."""
    for path in [*ROOT.glob("services/**/*.py"), *ROOT.glob("gateway/**/*.py")]:
        text = path.read_text(encoding="utf-8")
        if ("BaseSettings" in text or "ServiceSettings)" in text) and "migrations" not in path.parts:
            importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))
    found: list[type[BaseSettings]] = []
    work = list(BaseSettings.__subclasses__())
    while work:
        cls = work.pop()
        found.append(cls)
        work.extend(cls.__subclasses__())
    return [c for c in found if c.__module__.startswith(("services.", "gateway."))]


def _is_text(annotation: Any) -> bool:
    if annotation is str:
        return True
    args = typing.get_args(annotation)
    return bool(args) and all(
        a is str or a is type(None) or getattr(a, "__name__", "") == "SecretStr" for a in args
    )


def secret_settings() -> dict[str, str]:
    """Environment variable -> canary, for each text setting whose name says
    it is secret (the gateway's token list is set below, with its format)."""
    found: dict[str, str] = {}
    for cls in _settings_classes():
        prefix = str(cls.model_config.get("env_prefix", ""))
        for name, info in cls.model_fields.items():
            if not any(word in name.lower() for word in SECRET_WORDS) or not _is_text(info.annotation):
                continue
            found[f"{prefix}{name}".upper()] = canary()
    # And variables a module reads itself, by their literal name.
    for path in [*ROOT.glob("services/**/*.py"), *ROOT.glob("gateway/**/*.py")]:
        for variable in SECRET_VARIABLE.findall(path.read_text(encoding="utf-8")):
            found.setdefault(variable, canary())
    found.pop("SWITCHBOARD_GATEWAY_TOKENS", None)  # set below, in its format
    return found


SECRET_SETTINGS = secret_settings()
PROVIDER_KEY = canary()
GATEWAY_TOKEN = canary()
WRONG_TOKEN = canary()
_recording = serve(openai_app)
RECORDING = _recording.__enter__()
_OFFLINE = [
    {"id": f"offline-{p}", "provider": "offline", "model": f"switchboard-offline-{p}", "profile": p}
    for p in ("fast", "balanced", "strong")
]
LAUNCH_ENV = {
    **SECRET_SETTINGS,
    PROVIDER_KEY_ENV: PROVIDER_KEY,
    "SWITCHBOARD_ENGINE_PROVIDERS_JSON": json.dumps(
        [
            {
                "name": "recording",
                "kind": "openai",
                "base_url": f"{RECORDING.url}/v1",
                "api_key_env": PROVIDER_KEY_ENV,
            }
        ]
    ),
    "SWITCHBOARD_ROUTER_MODELS_JSON": json.dumps(
        [*_OFFLINE, {"id": "recorded", "provider": "recording", "model": "model-x", "profile": "strong"}]
    ),
    # The shared system's users (tests/e2e/conftest.py), and the canary's.
    "SWITCHBOARD_GATEWAY_TOKENS": ",".join(
        [f"{token_of(user_id(u, n))}:{user_id(u, n)}" for n in range(NAMESPACES) for u in USERS]
        + [f"{GATEWAY_TOKEN}:canary-user"]
    ),
}
CANARIES = {"provider key": PROVIDER_KEY, "gateway token": GATEWAY_TOKEN, "wrong token": WRONG_TOKEN}
CANARIES.update({variable: value for variable, value in SECRET_SETTINGS.items()})


@pytest.fixture(scope="module", autouse=True)
def _recording_server() -> Iterator[None]:
    yield
    _recording.__exit__(None, None, None)


def leaks(text: str | bytes) -> list[str]:
    """The canaries found in ``text``: whole, or their first 20 characters
    (a log line may cut a value)."""
    raw = text.encode(errors="replace") if isinstance(text, str) else text
    return sorted(name for name, value in CANARIES.items() if value[:20].encode() in raw)


def _run(client: httpx.Client, model: str) -> tuple[str, list[Any], str]:
    conversation = client.post("/api/agent/conversations", json={"title": "canaries"})
    assert conversation.status_code == 201, conversation.text
    with client.stream(
        "POST",
        f"/api/agent/conversations/{conversation.json()['id']}/messages",
        json={"message": "What is the deploy window?", "model": model, "request_id": str(uuid.uuid4())},
    ) as response:
        assert response.status_code == 200, response.read()
        events = list(read_events(response))
    return events[0].data["run_id"], events, conversation.json()["id"]


def test_no_secret_leaks_to_logs_traces_metrics_records_or_errors(launched: Launched) -> None:
    assert len(CANARIES) >= 3
    bodies: list[str] = []
    with httpx.Client(
        base_url=launched.url, headers={"Authorization": f"Bearer {GATEWAY_TOKEN}"}, timeout=60
    ) as client:
        # A run on the real-wire model: the key reaches the provider, and only it.
        RECORDING.script.steps.clear()
        run_ok, events_ok, conversation = _run(client, "recorded")
        assert events_ok[-1].event == "final", events_ok[-1]
        assert f"Bearer {PROVIDER_KEY}" in RECORDING.script.keys
        # A run the provider refuses (its error is relayed), then the offline model.
        RECORDING.script.steps.extend(["status:401", "status:401", "status:401"])
        run_refused, events_refused, _ = _run(client, "recorded")
        assert events_refused[-1].event == "error", events_refused[-1]
        RECORDING.script.steps.clear()
        run_offline, _, _ = _run(client, "auto")
        bodies += [json.dumps([e.data for e in events_ok + events_refused])]
        for run in (run_ok, run_refused, run_offline):
            bodies.append(client.get(f"/api/agent/runs/{run}").text)
        bodies.append(client.get(f"/api/agent/conversations/{conversation}/runs").text)
        bodies.append(client.get(f"/api/agent/conversations/{conversation}/entries").text)
        bodies.append(client.get("/api/agent/models").text)
        bodies.append(client.get("/api/agent/sources").text)
        bodies.append(client.get("/openapi.json").text)
        # Refusals of a wrong token, in the header and in the page link.
        for headers in ({"Authorization": f"Bearer {WRONG_TOKEN}"}, {"Authorization": WRONG_TOKEN}):
            refused = httpx.get(f"{launched.url}/api/agent/conversations", headers=headers)
            assert refused.status_code == 401, refused.text
            bodies.append(refused.text)
        refused = httpx.get(f"{launched.url}/?token={WRONG_TOKEN}")
        assert refused.status_code == 401, refused.text
        bodies.append(refused.text)
        # The page link with a valid token: kept in a cookie, never in a body.
        page = httpx.get(f"{launched.url}/?token={GATEWAY_TOKEN}")
        assert page.status_code == 303 and GATEWAY_TOKEN in page.headers["set-cookie"]
        bodies.append(page.text)
        bodies.append(client.get("/metrics").text)
    for port in launched.metrics_ports.values():
        bodies.append(httpx.get(f"http://127.0.0.1:{port}/metrics").text)
    for body in bodies:
        assert leaks(body) == [], body[:500]

    # The traces of the three runs, exported: wait for the last span.
    deadline = time.monotonic() + 30
    runs = {run_ok, run_refused, run_offline}
    while {s.run_id for s in launched.traces.snapshot()} & runs != runs:
        assert time.monotonic() < deadline, "the runs' spans were not exported"
        time.sleep(0.2)
    assert leaks(launched.traces.raw_exports()) == []
    # Every process's log (the launcher's output holds all five), but for
    # the launcher's own banner with the development token.
    log = launched.log.read_text(errors="replace")
    assert leaks(log) == [], [line for line in log.splitlines() if leaks(line)][:5]
