"""The gateway's /metrics says what the gateway process holds: its event
loop's tasks (counted at scrape time, from the worker thread that serves
/metrics), its memory and descriptors (prometheus_client's process
collector), its SSE streams."""

from __future__ import annotations

import asyncio

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


def test_the_gauge_reads_the_loop_while_tasks_are_pending() -> None:
    """Scraped while the loop holds extra tasks, the gauge shows them."""
    app = create_app(GatewaySettings())
    holders: list[asyncio.Task[None]] = []

    @app.post("/test/start")
    async def start() -> None:
        holders.extend(asyncio.create_task(asyncio.sleep(3600)) for _ in range(25))

    @app.post("/test/stop")
    async def stop() -> None:
        for task in holders:
            task.cancel()
        await asyncio.gather(*holders, return_exceptions=True)

    with TestClient(app) as client:
        base = _samples(client.get("/metrics").text)["switchboard_asyncio_tasks"]
        client.post("/test/start")
        held = _samples(client.get("/metrics").text)["switchboard_asyncio_tasks"]
        client.post("/test/stop")
        released = _samples(client.get("/metrics").text)["switchboard_asyncio_tasks"]
    assert held >= base + 25
    assert released <= base + 1
