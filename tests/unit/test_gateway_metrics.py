"""The gateway's /metrics says what the gateway process holds: its event
loop's tasks (counted at scrape time, from the worker thread that serves
/metrics), its memory and descriptors (prometheus_client's process
collector), its SSE streams."""

from __future__ import annotations

import asyncio

import httpx
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from gateway.app import create_app
from gateway.settings import GatewaySettings


def _samples(text: str) -> dict[str, float]:
    return {s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_include_the_gateways_own_gauges() -> None:
    with TestClient(create_app(GatewaySettings())) as client:
        samples = _samples(client.get("/metrics").text)
    assert samples["switchboard_asyncio_tasks"] >= 1  # at least the server's own
    assert "switchboard_sse_clients" in samples  # process-wide: other tests may have streams
    # The process collector exists on Linux, where the gateway runs.
    assert samples["process_resident_memory_bytes"] > 0 and samples["process_open_fds"] > 0


async def test_the_gauge_reads_the_loop_while_tasks_are_pending() -> None:
    """Scraped while the loop holds extra tasks, the gauge shows exactly them.

    The app runs on this test's own loop (its lifespan entered here, requests
    through httpx.ASGITransport, which runs each request in the calling task
    and returns once it is over), so no request task of another thread is
    still finishing when the next scrape counts; the held tasks wait on an
    event, and are gathered before the last scrape."""
    app = create_app(GatewaySettings())
    release = asyncio.Event()
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:

            async def scrape() -> float:
                return _samples((await client.get("/metrics")).text)["switchboard_asyncio_tasks"]

            base = await scrape()
            holders = [asyncio.create_task(release.wait()) for _ in range(25)]
            held = await scrape()
            release.set()
            await asyncio.gather(*holders)
            released = await scrape()
    assert base >= 1  # this test's own task at least
    assert held == base + 25
    assert released == base
