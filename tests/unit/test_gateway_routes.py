"""The gateway's route table, in-process (no service is called): the routes
the clients rely on are documented in /openapi.json, and every route that
names an object by id is covered by the cross-user matrix the real-process
tier runs (tests/e2e/test_gateway_routes.py) or listed as shared by design."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.app import create_app
from gateway.settings import GatewaySettings
from tests.gateway_routes import MATRIX, OPENAI_MATRIX, PATH_IDS, SHARED_ROUTES


@pytest.fixture(scope="module")
def paths() -> dict[str, Any]:
    """The paths of the document /openapi.json serves (``app.openapi()``)."""
    return dict(create_app(GatewaySettings()).openapi()["paths"])


def test_openapi_documents_every_route(paths: dict[str, Any]) -> None:
    expected = {
        "/api/agent/personal-settings": {"get", "put"},
        "/api/agent/personal-settings/instructions-page": {"post"},
        "/api/agent/conversations/{conversation_id}": {"get", "patch"},
        "/api/agent/conversations/{conversation_id}/sources": {"put"},
        "/api/agent/conversations/{conversation_id}/runs": {"get"},
        "/api/agent/runs/{run_id}": {"get"},
        "/api/agent/runs/{run_id}/cancel": {"post"},
        "/api/agent/runs/{run_id}/feedback": {"post"},
        "/api/agent/proposals/{proposal_id}/accept": {"post"},
        "/api/agent/models": {"get"},
        "/api/agent/sources": {"get"},
        "/api/agent/suggested-actions": {"get"},
        "/api/agent/agents/{agent_id}/asks": {"post"},
        "/api/agent/agents/{agent_id}/entries": {"get"},
        "/api/agent/agents/{agent_id}": {"get", "patch"},
        "/api/agent/agents/{agent_id}/segments": {"get"},
        "/api/agent/agents/{agent_id}/export": {"get"},
        "/api/agent/agents/import": {"post"},
        "/api/agent/project-context": {"get", "put"},
        "/api/agent/project-context/import": {"post"},
        "/api/agent/live-state": {"get"},
        "/api/agent/live-state/events": {"get"},
        "/api/agent/live-state/{agent_id}": {"put", "delete"},
    }
    for path, methods in expected.items():
        assert methods <= set(paths[path]), path


def test_every_route_naming_an_object_is_in_the_matrix(paths: dict[str, Any]) -> None:
    """A new route with an id in its path fails here until the matrix covers it."""
    named = {
        (method.upper(), path) for path, operations in paths.items() if "{" in path for method in operations
    }
    covered = set()
    for method, template, *_ in [*MATRIX, *OPENAI_MATRIX]:
        path = template.split("?")[0]
        for short, long in PATH_IDS.items():
            path = path.replace(short, long)
        covered.add((method, path))
    assert not covered & set(SHARED_ROUTES)
    assert sorted(named - covered - set(SHARED_ROUTES)) == []
