"""One service in-process on port 0, on a database of the test's own that
arrives migrated: the fixtures every service-tier module shares, and the
recording providers (``fake``) of the modules that test what a model receives.

``threads_channel``, ``memory_channel`` and ``router_channel`` are a real
channel to the running service; a module wraps it in the stubs it needs. A
module changes a service's settings by overriding ``<service>_options``
(a dict of settings fields), and reaches the service's database through
``<service>_url`` (the same one the service runs on)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest

from services.memory.server import build_server as build_memory
from services.memory.settings import MemorySettings
from services.router.server import build_server as build_router
from services.router.settings import RouterSettings
from services.shared.embeddings import EmbedderName
from services.threads.server import build_server as build_threads
from services.threads.settings import ThreadsSettings
from tests.conftest import DatabaseFactory
from tests.fakes.llm_server import FakeServer, anthropic_app, openai_app, serve
from tests.service.harness import running


@pytest.fixture
async def threads_url(make_database: DatabaseFactory) -> AsyncIterator[str]:
    async with make_database("threads") as url:
        yield url


@pytest.fixture
async def memory_url(make_database: DatabaseFactory) -> AsyncIterator[str]:
    async with make_database("memory") as url:
        yield url


@pytest.fixture
async def router_url(make_database: DatabaseFactory) -> AsyncIterator[str]:
    async with make_database("router") as url:
        yield url


@pytest.fixture
def threads_options() -> dict[str, Any]:
    """Settings fields a module gives its threads service."""
    return {}


@pytest.fixture
def memory_options() -> dict[str, Any]:
    """Settings fields a module gives its memory service."""
    return {}


@pytest.fixture
def router_options() -> dict[str, Any]:
    """Settings fields a module gives its router service."""
    return {}


@pytest.fixture
def threads_settings(threads_url: str, threads_options: dict[str, Any]) -> ThreadsSettings:
    return ThreadsSettings(port=0, database_url=threads_url, **threads_options)


@pytest.fixture
def memory_settings(memory_url: str, memory_options: dict[str, Any]) -> MemorySettings:
    """The hashing embedder: fast, deterministic, and no model to load per test."""
    options = {"embedder": EmbedderName.HASHING, **memory_options}
    return MemorySettings(port=0, database_url=memory_url, **options)


@pytest.fixture
def router_settings(router_url: str, router_options: dict[str, Any]) -> RouterSettings:
    return RouterSettings(port=0, database_url=router_url, **{"embedder": "hashing", **router_options})


@pytest.fixture
async def threads_channel(threads_settings: ThreadsSettings) -> AsyncIterator[grpc.aio.Channel]:
    async with running(build_threads, threads_settings) as (_, channel):
        yield channel


@pytest.fixture
async def memory_channel(memory_settings: MemorySettings) -> AsyncIterator[grpc.aio.Channel]:
    async with running(build_memory, memory_settings) as (_, channel):
        yield channel


@pytest.fixture
async def router_channel(router_settings: RouterSettings) -> AsyncIterator[grpc.aio.Channel]:
    async with running(build_router, router_settings) as (_, channel):
        yield channel


@pytest.fixture(scope="module", params=["openai", "anthropic"])
def fake_server(request: pytest.FixtureRequest) -> Iterator[tuple[str, FakeServer]]:
    """One recording server per module and wire format: stopping uvicorn
    takes 0.2 s, which per test added up to a quarter of some modules."""
    kind = str(request.param)
    with serve(openai_app if kind == "openai" else anthropic_app) as server:
        yield kind, server


@pytest.fixture
def fake(fake_server: tuple[str, FakeServer]) -> tuple[str, FakeServer]:
    """A recording OpenAI-compatible or Anthropic provider (each test runs
    with both), its script and recorded requests fresh for the test."""
    kind, server = fake_server
    server.script.reset()
    return kind, server
