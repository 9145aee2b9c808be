"""The Grafana dashboards (deploy/grafana/dashboards/) against a live system,
on SQLite and on PostgreSQL: after a run, every metric a dashboard queries is
on some process's /metrics (histograms' _bucket/_sum/_count too), with every
label its matchers and by/on clauses name; every panel's Jaeger link, filled
from a real series, opens a search that finds traces the processes sent; and
the trace ids the services attach as exemplars are those of real traces."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

from tests.dashboards import (
    TARGET_LABELS,
    JaegerLink,
    Query,
    field_labels,
    jaeger_links,
    load_dashboards,
    panels,
    prometheus_jobs,
    queries,
    read,
    resolve,
)
from tests.e2e.conftest import Launched
from tests.e2e.otlp import ReceivedSpan
from tests.e2e.sse import read_events

MESSAGES_ROUTE = "/api/agent/conversations/{conversation_id}/messages"
# The series a panel's link is filled from, when several fit: those of the
# run this module makes (health checks, for one, are counted but not traced).
PREFERRED = {
    "job": "engine",
    "grpc_service": "switchboard.engine.v1.EngineService",
    "grpc_method": "StartRun",
    "status": "done",
    "handler": MESSAGES_ROUTE,
    "method": "POST",
}
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


@dataclass
class Scrape:
    """What Prometheus would store: each job's series (sample name -> the
    label sets it has), with the job and instance labels it adds."""

    series: dict[str, dict[str, list[dict[str, str]]]] = field(default_factory=dict)

    def add(self, job: str, text: str) -> None:
        samples = self.series.setdefault(job, {})
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = {**sample.labels, "job": job, "instance": f"{job}:0"}
                samples.setdefault(sample.name, []).append(labels)

    def jobs_of(self, query: Query, metric: str, matchers: tuple[tuple[str, str, str], ...]) -> list[str]:
        jobs = [value for label, op, value in matchers if label == "job" and op == "="]
        for job in jobs:
            assert job in self.series, f"{query.where}: no Prometheus job {job!r}"
        return jobs or [job for job in self.series if metric in self.series[job]]

    def labels_of(self, metric: str, jobs: list[str]) -> set[str]:
        return {label for job in jobs for labels in self.series[job].get(metric, []) for label in labels}


@pytest.fixture(scope="module")
def after_a_run(launched: Launched) -> tuple[Scrape, str]:
    """The scrape of every process after one run, and the run's id."""
    with launched.client() as client:
        created = client.post("/api/agent/conversations", json={})
        assert created.status_code == 201, created.text
        url = f"/api/agent/conversations/{created.json()['id']}/messages"
        with client.stream("POST", url, json={"message": "Summarise my week"}) as response:
            events = list(read_events(response))
    assert events[-1].event == "final", [e.event for e in events]
    scrape = Scrape()
    jobs = prometheus_jobs()
    for job in jobs:
        address = launched.url if job == "gateway" else f"http://127.0.0.1:{launched.metrics_ports[job]}"
        scraped = httpx.get(f"{address}/metrics", timeout=10)
        assert scraped.status_code == 200, job
        scrape.add(job, scraped.text)
    return scrape, str(events[0].data["run_id"])


def test_every_queried_metric_and_label_is_exported(after_a_run: tuple[Scrape, str]) -> None:
    scrape, _ = after_a_run
    checked = 0
    for query in queries():
        where = f"{query.dashboard} / {query.where}: {query.expr}"
        read_labels: set[str] = set(TARGET_LABELS)
        for selector in query.selectors:
            jobs = scrape.jobs_of(query, selector.metric, selector.matchers)
            assert jobs, f"{where}: no process exports {selector.metric}"
            labels = scrape.labels_of(selector.metric, jobs)
            assert labels, f"{where}: {selector.metric} is not exported by {jobs}"
            for label, _op, _value in selector.matchers:
                assert label in labels, f"{where}: {selector.metric} has no label {label!r}"
            read_labels |= labels
            checked += 1
        missing = (query.grouping | ({query.listed_label} - {""})) - read_labels
        assert not missing, f"{where}: no series it reads has the labels {missing}"
    assert checked > 30


def test_the_checks_catch_a_misspelt_metric_or_label(after_a_run: tuple[Scrape, str]) -> None:
    """The scrape-based check is not vacuous: names that are not exported fail it."""
    scrape, _ = after_a_run
    query = read("x", "y", 'sum by (model) (rate(switchboard_llm_tokens_total{job="engine"}[5m]))')
    (selector,) = query.selectors
    assert "model" in scrape.labels_of(
        selector.metric, scrape.jobs_of(query, selector.metric, selector.matchers)
    )
    wrong = read("x", "y", 'rate(switchboard_llm_token_total{job="engine"}[5m])').selectors[0]
    assert not scrape.labels_of(wrong.metric, ["engine"])
    assert "modle" not in scrape.labels_of(selector.metric, ["engine"])
    # Each gRPC service's own metrics are on its job, not on the gateway's.
    assert not scrape.labels_of("grpc_server_handled_total", ["gateway"])
    assert not scrape.labels_of("switchboard_sse_clients", ["engine"])


def series_for(scrape: Scrape, query: Query, needed: set[str]) -> dict[str, str]:
    """A series of the panel's first query that has every ``needed`` label,
    the run's own if there is one."""
    candidates = [
        labels
        for selector in query.selectors
        for job in scrape.jobs_of(query, selector.metric, selector.matchers)
        for labels in scrape.series[job].get(selector.metric, [])
        if needed <= set(labels)
    ]
    assert candidates, f"{query.where}: no series with {needed}"

    def agreement(labels: dict[str, str]) -> int:
        return sum(labels.get(key) == value for key, value in PREFERRED.items() if key in labels)

    return max(candidates, key=agreement)


def wait_for(launched: Launched, found: Callable[[list[ReceivedSpan]], bool], what: str) -> None:
    """Spans reach the receiver in batches: polls until ``found`` holds."""
    deadline = time.monotonic() + 20
    while not found(spans := launched.traces.snapshot()):
        assert time.monotonic() < deadline, f"{what}: not among {len(spans)} spans"
        time.sleep(0.2)


def opens_traces(link: JaegerLink, spans: list[ReceivedSpan]) -> bool:
    """Whether Jaeger's search would find something: a span of the service,
    with the operation's name, carrying the tags: with the series' value, or
    for a value the link spells out (a run's status "failed"), any value, as
    this module's run need not have met it. Jaeger's own ``error`` tag comes
    from a span's status, which the test receiver does not keep."""

    def tagged(span: ReceivedSpan, key: str, value: str) -> bool:
        if key == "error":
            return True
        if key in link.written:
            return key in span.attributes
        return str(span.attributes.get(key)) == value

    return any(
        span.service == link.service
        and (not link.operation or span.name == link.operation)
        and all(tagged(span, key, value) for key, value in link.tags.items())
        for span in spans
    )


def test_every_panels_jaeger_link_finds_traces(launched: Launched, after_a_run: tuple[Scrape, str]) -> None:
    scrape, _ = after_a_run
    opened = 0
    for name, dashboard in load_dashboards().items():
        for panel in panels(dashboard):
            query = read(name, panel["title"], panel["targets"][0]["expr"])
            for link in jaeger_links(panel):
                labels = series_for(scrape, query, field_labels(link["url"]))
                search = resolve(link, labels)
                wait_for(
                    launched,
                    lambda spans, s=search: opens_traces(s, spans),
                    f"{name} / {panel['title']}: {search}",
                )
                opened += 1
    assert opened >= 25


def exemplar_traces(launched: Launched, metric: str) -> set[str]:
    """The trace ids of ``metric``'s exemplars on the engine's OpenMetrics /metrics."""
    url = f"http://127.0.0.1:{launched.metrics_ports['engine']}/metrics"
    response = httpx.get(url, headers={"Accept": OPENMETRICS}, timeout=10)
    assert response.headers["content-type"].startswith("application/openmetrics-text")
    return {
        sample.exemplar.labels["trace_id"]
        for family in openmetrics_families(response.text)
        for sample in family.samples
        if sample.name == metric and sample.exemplar is not None
    }


def test_exemplars_carry_the_traces_of_runs_and_calls(
    launched: Launched, after_a_run: tuple[Scrape, str]
) -> None:
    """Every exemplar's trace id is a trace the processes sent: a run's, for
    the run metrics. (Not necessarily this module's run: another may have
    finished since, in the same bucket, on a shared system.)"""
    _, run_id = after_a_run
    runs = {"switchboard_runs_total", "switchboard_run_duration_seconds_bucket"}
    exemplars = {
        metric: exemplar_traces(launched, metric) for metric in (*runs, "grpc_server_handling_seconds_bucket")
    }
    assert all(exemplars.values()), exemplars

    def sent(spans: list[ReceivedSpan]) -> bool:
        run_traces = {s.trace_id for s in spans if s.run_id}
        every_trace = {s.trace_id for s in spans}
        return run_id in {s.run_id for s in spans} and all(
            traces <= (run_traces if metric in runs else every_trace) for metric, traces in exemplars.items()
        )

    wait_for(launched, sent, f"the exemplars' traces {exemplars}")
