"""The event loop of the services: uvloop unless SWITCHBOARD_EVENT_LOOP says
asyncio, chosen in one place (services/shared/event_loop.py) and applied by
the bootstrap every ``python -m services.<name>`` runs."""

from __future__ import annotations

import asyncio
import sys

import pytest
import uvloop
from pydantic import ValidationError

from services.engine.settings import EngineSettings
from services.memory.settings import MemorySettings
from services.router.settings import RouterSettings
from services.shared import bootstrap
from services.shared.event_loop import run, running_loop_name
from services.shared.settings import ServiceSettings
from services.threads.server import MIGRATIONS, build_server
from services.threads.settings import ThreadsSettings

SERVICES: list[type[ServiceSettings]] = [EngineSettings, MemorySettings, RouterSettings, ThreadsSettings]


async def _loop_type() -> type[asyncio.AbstractEventLoop]:
    return type(asyncio.get_running_loop())


def test_run_runs_on_the_named_loop() -> None:
    assert issubclass(run(_loop_type(), "uvloop"), uvloop.Loop)
    plain = run(_loop_type(), "asyncio")
    assert not issubclass(plain, uvloop.Loop)
    assert plain.__module__.startswith("asyncio")


def test_running_loop_name_tells_them_apart() -> None:
    async def name() -> str:
        return running_loop_name()

    assert (run(name(), "uvloop"), run(name(), "asyncio")) == ("uvloop", "asyncio")


@pytest.mark.parametrize("settings", SERVICES, ids=lambda s: s.__name__)
def test_every_service_defaults_to_uvloop_and_one_name_turns_it_off(
    settings: type[ServiceSettings], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SWITCHBOARD_EVENT_LOOP", raising=False)
    assert settings().event_loop == "uvloop"
    monkeypatch.setenv("SWITCHBOARD_EVENT_LOOP", "asyncio")
    assert settings().event_loop == "asyncio"
    monkeypatch.setenv("SWITCHBOARD_EVENT_LOOP", "trio")
    with pytest.raises(ValidationError):
        settings()


@pytest.mark.parametrize(("configured", "expected"), [(None, "uvloop"), ("asyncio", "asyncio")])
def test_the_bootstrap_serves_on_the_configured_loop(
    configured: str | None, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``main`` (what ``python -m services.<name>`` runs) hands the service
    to the loop its settings name; ``_serve`` is replaced by a probe of the
    loop it runs on."""
    served: list[str] = []

    async def probe(settings: ServiceSettings, build: object) -> None:
        served.append(running_loop_name())

    if configured is None:
        monkeypatch.delenv("SWITCHBOARD_EVENT_LOOP", raising=False)
    else:
        monkeypatch.setenv("SWITCHBOARD_EVENT_LOOP", configured)
    monkeypatch.setenv("SWITCHBOARD_IDENTITY_KEY", "k" * 32)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.setattr(sys, "argv", ["services.threads", "serve"])
    monkeypatch.setattr(bootstrap, "_serve", probe)
    bootstrap.main(ThreadsSettings, build_server, MIGRATIONS)
    assert served == [expected]
