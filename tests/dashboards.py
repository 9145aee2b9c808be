"""The Grafana dashboards of deploy/grafana/dashboards/, read for their tests:
every PromQL query a panel or a variable runs, parsed by a real PromQL parser
(promql-parser, the Rust parser of GreptimeDB), and the links to Jaeger each
panel carries, resolved for given label values."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import promql_parser
import yaml

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
DASHBOARDS = DEPLOY / "grafana" / "dashboards"
# Grafana's interval variables, replaced by a duration before parsing.
INTERVALS = ("$__rate_interval", "$__interval", "$__range")
# The labels Prometheus adds to every series it scrapes (not in /metrics).
TARGET_LABELS = frozenset({"job", "instance"})


@dataclass(frozen=True)
class Selector:
    """A series selector: its metric name and label matchers (name, op, value)."""

    metric: str
    matchers: tuple[tuple[str, str, str], ...]


@dataclass
class Query:
    """A PromQL query of a dashboard and what it reads."""

    dashboard: str
    where: str  # the panel's or variable's title
    expr: str
    selectors: list[Selector] = field(default_factory=list)
    # Labels named by by/without, on/ignoring and group_left/group_right.
    grouping: set[str] = field(default_factory=set)
    # label_values(selector, label): the label whose values the variable lists.
    listed_label: str = ""


def load_dashboards() -> dict[str, dict[str, Any]]:
    """Each dashboard file's JSON, by file name."""
    return {path.name: json.loads(path.read_text()) for path in sorted(DASHBOARDS.glob("*.json"))}


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, those inside collapsed rows too; rows themselves left out."""
    for panel in dashboard.get("panels", []):
        if panel.get("type") == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


def parse(expr: str) -> promql_parser.Expr:
    """The PromQL syntax tree of a Grafana query. Interval variables become a
    duration; other variables ($job...) only ever stand inside a matcher's
    quoted value, where they parse as plain text."""
    for variable in INTERVALS:
        expr = expr.replace(variable, "5m")
    return promql_parser.parse(expr)


def read(dashboard: str, where: str, expr: str) -> Query:
    query = Query(dashboard, where, expr)

    def visit(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            matchers = node.matchers.matchers + [m for group in node.matchers.or_matchers for m in group]
            ops = {"MatchOp.Equal": "=", "MatchOp.NotEqual": "!=", "MatchOp.Re": "=~", "MatchOp.NotRe": "!~"}
            metric = node.name or next((m.value for m in matchers if m.name == "__name__"), "")
            assert metric, f"{where}: a selector without a metric name in {expr}"
            query.selectors.append(
                Selector(
                    metric, tuple((m.name, ops[str(m.op)], m.value) for m in matchers if m.name != "__name__")
                )
            )
        elif isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None:
            query.grouping.update(node.modifier.labels)
        elif isinstance(node, promql_parser.BinaryExpr) and node.modifier is not None:
            if node.modifier.matching is not None:
                query.grouping.update(node.modifier.matching.labels)
            query.grouping.update(node.modifier.group_labels or [])

    promql_parser.walk(parse(expr), visit)
    return query


_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(?P<selector>.+?)\s*,\s*(?P<label>[a-zA-Z_]\w*)\s*\)\s*$")


def queries() -> Iterator[Query]:
    """Every query of every dashboard: its panels' targets and its query
    variables (``label_values(selector, label)``, whose selector is PromQL)."""
    for name, dashboard in load_dashboards().items():
        for panel in panels(dashboard):
            for target in panel.get("targets", []):
                yield read(name, panel["title"], target["expr"])
        for variable in dashboard.get("templating", {}).get("list", []):
            if variable["type"] != "query":
                continue
            definition = (
                variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
            )
            found = _LABEL_VALUES.match(definition)
            assert found, (
                f"{name} variable {variable['name']}: not label_values(selector, label): {definition}"
            )
            query = read(name, f"variable {variable['name']}", found["selector"])
            query.listed_label = found["label"]
            yield query


def prometheus_jobs() -> dict[str, list[str]]:
    """deploy/prometheus.yml's jobs and their targets (host:port)."""
    config = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    return {
        job["job_name"]: [target for group in job["static_configs"] for target in group["targets"]]
        for job in config["scrape_configs"]
    }


@dataclass(frozen=True)
class JaegerLink:
    """A panel link to Jaeger's search page, resolved for some label values."""

    title: str
    service: str
    operation: str
    tags: dict[str, str]
    # Tags whose value the URL spells out (not taken from the series).
    written: frozenset[str] = frozenset()


_FIELD_LABEL = re.compile(r"\$\{__field\.labels\.(\w+)(?::\w+)?\}")


def jaeger_links(panel: dict[str, Any]) -> list[dict[str, Any]]:
    """The panel's data links to Jaeger's search page."""
    links = panel.get("fieldConfig", {}).get("defaults", {}).get("links", [])
    return [link for link in links if link["url"].startswith("${jaeger}/search?")]


def field_labels(url: str) -> set[str]:
    """The series labels a link's URL takes its values from."""
    return set(_FIELD_LABEL.findall(url))


def resolve(link: dict[str, Any], labels: dict[str, str]) -> JaegerLink:
    """The Jaeger search a link opens from a series with these ``labels``."""

    def substitute(text: str) -> str:
        return _FIELD_LABEL.sub(lambda m: labels[m[1]], text)

    params = parse_qs(urlsplit(link["url"]).query)
    service = substitute(unquote(params["service"][0]))
    operation = substitute(unquote(params["operation"][0])) if "operation" in params else ""
    raw_tags = json.loads(unquote(params["tags"][0])) if "tags" in params else {}
    tags = {key: substitute(value) for key, value in raw_tags.items()}
    written = frozenset(key for key, value in raw_tags.items() if not _FIELD_LABEL.search(value))
    return JaegerLink(link["title"], service, operation, tags, written)
