"""Grafana and Prometheus in the compose stack, checked offline: the
provisioning files are what Grafana reads (data sources with the uids the
dashboards use, a dashboard provider where compose mounts the JSON), every
dashboard query parses as PromQL, and every panel links to Jaeger. That the
queried metrics exist is checked against a live scrape in
tests/e2e/test_dashboards.py."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from tests.dashboards import (
    DEPLOY,
    field_labels,
    jaeger_links,
    load_dashboards,
    panels,
    prometheus_jobs,
    queries,
    read,
)

GRAFANA = DEPLOY / "grafana"
COMPOSE = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
GRPC_SERVICES = ("engine", "router", "threads", "memory")
# Variables Grafana defines itself.
BUILT_IN = {"__rate_interval", "__interval", "__range", "__from", "__to", "__field"}


def provisioning(kind: str) -> dict[str, Any]:
    (path,) = (GRAFANA / "provisioning" / kind).glob("*.yaml")
    document = yaml.safe_load(path.read_text())
    assert document["apiVersion"] == 1, path
    return dict(document)


def mounts(service: str) -> dict[str, str]:
    """A compose service's bind mounts: container path -> host path (absolute)."""
    found = {}
    for volume in COMPOSE["services"][service].get("volumes", []):
        source, target, *_ = volume.split(":")
        if source.startswith("."):
            found[target] = str((DEPLOY / source).resolve())
    return found


def container_to_host(service: str, path: str) -> Path:
    """Where a path inside the service's container comes from in the repository."""
    for target, source in mounts(service).items():
        if PurePosixPath(path).is_relative_to(target):
            return Path(source) / PurePosixPath(path).relative_to(target)
    raise AssertionError(f"{path} is not mounted into {service}")


def compose_port(service: str, container_port: int) -> None:
    """The service exists in compose and listens on ``container_port``."""
    assert service in COMPOSE["services"], service
    published = [str(p).rsplit(":", 1)[-1] for p in COMPOSE["services"][service].get("ports", [])]
    assert str(container_port) in published, (service, published)


def test_grafana_reads_the_provisioning_and_dashboards_compose_mounts() -> None:
    assert container_to_host("grafana", "/etc/grafana/provisioning") == (GRAFANA / "provisioning").resolve()
    (provider,) = provisioning("dashboards")["providers"]
    assert provider["type"] == "file"
    folder = container_to_host("grafana", provider["options"]["path"])
    assert folder == (GRAFANA / "dashboards").resolve() and list(folder.glob("*.json"))
    home = COMPOSE["services"]["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert container_to_host("grafana", home).is_file()
    assert (
        container_to_host("prometheus", "/etc/prometheus/prometheus.yml")
        == (DEPLOY / "prometheus.yml").resolve()
    )


def test_the_data_sources_reach_prometheus_and_jaeger_and_exemplars_open_traces() -> None:
    sources = {source["uid"]: source for source in provisioning("datasources")["datasources"]}
    assert {uid: s["type"] for uid, s in sources.items()} == {"prometheus": "prometheus", "jaeger": "jaeger"}
    assert sources["prometheus"]["url"] == "http://prometheus:9090"
    compose_port("prometheus", 9090)
    assert sources["jaeger"]["url"] == "http://jaeger:16686"
    compose_port("jaeger", 16686)
    (destination,) = sources["prometheus"]["jsonData"]["exemplarTraceIdDestinations"]
    # The label the services put their trace ids under (services/shared/metrics.py).
    assert destination == {"name": "trace_id", "datasourceUid": "jaeger"}
    assert "--enable-feature=exemplar-storage" in COMPOSE["services"]["prometheus"]["command"]


def test_prometheus_scrapes_every_process_where_compose_serves_its_metrics() -> None:
    jobs = prometheus_jobs()
    assert set(jobs) == {*GRPC_SERVICES, "gateway"}
    for job, targets in jobs.items():
        ((host, port),) = [target.split(":") for target in targets]
        # The job is the compose service: the dashboards link job X to the traces of switchboard-X.
        assert host == job and job in COMPOSE["services"], targets
        environment = COMPOSE["services"][job]["environment"]
        if job == "gateway":
            compose_port("gateway", int(port))
        else:
            assert environment[f"SWITCHBOARD_{job.upper()}_METRICS_PORT"] == port
            assert environment[f"SWITCHBOARD_{job.upper()}_HOST"] == "0.0.0.0"  # reachable from Prometheus


@pytest.mark.parametrize("name", sorted(load_dashboards()))
def test_each_dashboard_is_well_formed_and_uses_the_provisioned_sources(name: str) -> None:
    dashboard = load_dashboards()[name]
    uids = {source["uid"] for source in provisioning("datasources")["datasources"]}
    assert dashboard["uid"].startswith("switchboard-") and dashboard["title"].startswith("Switchboard / ")
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)), ids
    defined = {variable["name"] for variable in dashboard["templating"]["list"]} | BUILT_IN
    for panel in panels(dashboard):
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["w"] > 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        assert panel["datasource"]["uid"] in uids, panel["title"]
        assert panel["targets"] and panel["description"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "prometheus", panel["title"]
            used = set(re.findall(r"\$\{?(\w+)", target["expr"]))
            assert used <= defined, (panel["title"], used - defined)
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            assert variable["datasource"]["uid"] in uids, variable["name"]


def test_every_panel_links_to_its_traces_in_jaeger() -> None:
    for name, dashboard in load_dashboards().items():
        variables = {variable["name"]: variable for variable in dashboard["templating"]["list"]}
        # Where the browser reaches Jaeger's UI: compose publishes it on this port.
        assert variables["jaeger"]["query"] == "http://localhost:16686", name
        compose_port("jaeger", 16686)
        for panel in panels(dashboard):
            links = jaeger_links(panel)
            assert links, f"{name} / {panel['title']} links to no trace"
            grouped = set().union(*(read(name, panel["title"], t["expr"]).grouping for t in panel["targets"]))
            for link in links:
                # The search covers the dashboard's time range (Jaeger takes microseconds).
                assert "&start=${__from}000&end=${__to}000&lookback=custom" in link["url"], link
                # A link's ${__field.labels.x} needs x on the panel's series: grouped by it.
                assert field_labels(link["url"]) <= grouped, (name, panel["title"], link["url"])


def test_every_query_parses_as_promql_and_reads_metrics_only() -> None:
    every = list(queries())
    assert len(every) > 30
    for query in every:
        assert query.selectors, f"{query.dashboard} / {query.where} reads no metric: {query.expr}"


def test_the_query_reader_finds_metrics_matchers_and_grouping_labels() -> None:
    query = read(
        "x",
        "y",
        'histogram_quantile(0.9, sum by (le, job) (rate(a_bucket{job="gateway", m=~"$m"}[$__rate_interval])))'
        ' / ignoring(status) group_left(extra) sum without (instance) (b_total) or on(job) {__name__="c"}',
    )
    assert [s.metric for s in query.selectors] == ["a_bucket", "b_total", "c"]
    assert query.selectors[0].matchers == (("job", "=", "gateway"), ("m", "=~", "$m"))
    assert query.grouping == {"le", "job", "status", "extra", "instance"}
    with pytest.raises(ValueError):
        read("x", "y", "sum by (le (rate(a[5m]))")
