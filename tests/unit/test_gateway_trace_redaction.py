"""The gateway's request spans keep no secret query parameter (the e2e proof,
with real exports, is tests/e2e/test_secrets.py)."""

from __future__ import annotations

import httpx
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gateway.app import create_app
from gateway.settings import GatewaySettings
from gateway.trace_redaction import redact_query, redact_request_span, redact_url


def test_secret_query_values_are_replaced_and_the_rest_kept() -> None:
    assert redact_url("http://h:1/?token=abc/def&x=1") == "http://h:1/?token=REDACTED&x=1"
    assert redact_url("/page?API_KEY=s3cr3t") == "/page?API_KEY=REDACTED"
    assert (
        redact_url("/api/agent/conversations?q=token&page_size=5")
        == "/api/agent/conversations?q=token&page_size=5"
    )
    assert redact_query("token=a%2Fb&q=x") == "token=REDACTED&q=x"
    assert redact_query("q=1") == "q=1"


async def test_the_page_links_token_never_reaches_a_span() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = create_app(GatewaySettings(tokens="s3cr3t-canary-token:alice"))
    FastAPIInstrumentor.instrument_app(
        app,
        tracer_provider=provider,
        server_request_hook=redact_request_span,
        exclude_spans=["receive", "send"],
    )
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        response = await client.get("/?token=s3cr3t-canary-token")
    assert response.status_code == 303
    spans = exporter.get_finished_spans()
    assert spans
    recorded = repr([dict(span.attributes or {}) for span in spans])
    assert "s3cr3t" not in recorded and "token=REDACTED" in recorded, recorded
