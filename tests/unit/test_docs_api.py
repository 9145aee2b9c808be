"""docs/api.md cannot drift from the gateway: its route tables (the HTTP
API's and the OpenAI-compatible one) list exactly the routes of
/openapi.json with their success statuses, each field table
marked `<!-- fields: Schema -->` lists exactly that schema's fields, the
table of run events lists exactly the event kinds of the contract, each
gRPC service's table lists exactly its RPCs, and the generated response
bodies are those of the current code."""

from __future__ import annotations

import re
from typing import Any

import pytest

from gateway import api_docs
from switchboard.engine.v1 import engine_pb2, engine_service_pb2
from switchboard.memory.v1 import (
    handoff_service_pb2,
    memory_service_pb2,
    pages_service_pb2,
    projects_service_pb2,
)
from switchboard.router.v1 import router_service_pb2
from switchboard.threads.v1 import threads_service_pb2

TEXT = api_docs.DOC.read_text(encoding="utf-8")
# Served, not described in OpenAPI (include_in_schema=False).
# Deleting a conversation item is always refused (400): a route with no
# success, listed in the table for the clients that try.
UNDOCUMENTED_IN_OPENAPI = {
    ("GET", "/healthz"),
    ("GET", "/"),
    ("DELETE", "/v1/conversations/{conv_id}/items/{item_id}"),
}


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    return api_docs.openapi()


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _table_after(marker: str) -> list[list[str]]:
    """The rows of the first table after `marker` (header and rule left out)."""
    lines = TEXT[TEXT.index(marker) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(_cells(line))
    return rows


def test_the_route_table_lists_every_route_with_its_success_statuses(spec: dict[str, Any]) -> None:
    documented: dict[tuple[str, str], set[str]] = {}
    rows = _table_after("## Routes") + _table_after("## OpenAI-compatible routes")
    for method_cell, path_cell, _, success in rows:
        path = path_cell.strip("`")
        for method in re.findall(r"`([A-Z]+)`", method_cell):
            documented[(method, path)] = set(re.findall(r"`(\d{3})`", success))
    served = {
        (method.upper(), path): {code for code in answers["responses"] if code.startswith("2")}
        for path, operations in spec["paths"].items()
        for method, answers in operations.items()
    }
    assert set(documented) - UNDOCUMENTED_IN_OPENAPI == set(served)
    for route, codes in served.items():
        # A row may join methods (GET / POST): its statuses are theirs together.
        assert codes <= documented[route], (route, codes, documented[route])
        row = {c for (m, p), cs in documented.items() if p == route[1] for c in cs}
        assert documented[route] <= row


def test_each_marked_field_table_lists_its_schema_exactly(spec: dict[str, Any]) -> None:
    schemas = spec["components"]["schemas"]
    markers = re.findall(r"<!-- fields: (\w+) -->", TEXT)
    assert len(markers) >= 5
    for name in markers:
        rows = _table_after(f"<!-- fields: {name} -->")
        fields = {field for row in rows for field in re.findall(r"`(\w+)`", row[0])}
        assert fields == set(schemas[name]["properties"]), name


def test_the_run_event_table_lists_every_event_kind() -> None:
    rows = _table_after("| kind | data fields | when |")
    documented = {row[0].strip("`") for row in rows}
    kinds = {field.name for field in engine_pb2.RunEvent.DESCRIPTOR.oneofs_by_name["kind"].fields}
    assert documented == kinds


@pytest.mark.parametrize(
    "module",
    [
        engine_service_pb2,
        router_service_pb2,
        threads_service_pb2,
        memory_service_pb2,
        pages_service_pb2,
        handoff_service_pb2,
        projects_service_pb2,
    ],
    ids=lambda module: module.__name__.rsplit(".", 1)[-1],
)
def test_each_grpc_service_table_lists_its_rpcs(module: Any) -> None:
    for service in module.DESCRIPTOR.services_by_name.values():
        start = TEXT.index(f"\n## {service.name}\n")
        section = TEXT[start : TEXT.index("\n## ", start + 1)]
        documented = set(re.findall(r"^\| `(\w+)`", section, re.MULTILINE))
        assert documented == {method.name for method in service.methods}, service.name


def test_the_response_bodies_are_generated_from_the_current_code(spec: dict[str, Any]) -> None:
    assert api_docs.current(TEXT) == api_docs.render(spec), "run: python -m gateway.api_docs"
