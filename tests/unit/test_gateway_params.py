"""Every path, query and header parameter of the gateway is bounded at the
edge: a string has a maximum length and (but for a fixed choice) a charset,
an integer a range. New routes are read from the OpenAPI schema, so one
declared with a bare ``str`` fails here. The refusals themselves, against
the real services, are in tests/e2e/test_fuzz.py."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from gateway import params
from gateway.app import create_app
from gateway.settings import GatewaySettings


def _parameters() -> list[tuple[str, dict[str, Any]]]:
    schema = create_app(GatewaySettings()).openapi()
    return [
        (f"{method.upper()} {path} {parameter['in']}:{parameter['name']}", parameter)
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
        for parameter in operation.get("parameters", [])
    ]


PARAMETERS = _parameters()


@pytest.mark.parametrize(("where", "parameter"), PARAMETERS, ids=[w for w, _ in PARAMETERS])
def test_every_parameter_is_bounded(where: str, parameter: dict[str, Any]) -> None:
    schema = parameter["schema"]
    # An optional parameter: its one non-null form is what is bounded.
    forms = [form for form in schema.get("anyOf", [schema]) if form.get("type") != "null"]
    assert len(forms) == 1, where
    schema = forms[0]
    if "enum" in schema:
        return  # one of its listed values
    if schema["type"] == "integer":
        assert "maximum" in schema and "minimum" in schema, where
    elif schema["type"] == "string":
        assert "pattern" in schema, where
        assert "maxLength" in schema or re.fullmatch(r"\^\(?[|a-z]+\)?\$", schema["pattern"]), where
    else:
        assert schema["type"] == "boolean", where


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("5f0c1a2e-8d4b-4c3a-9e71-0a6b2d9c4e01", True),
        ("my-agent", True),
        ("a" * 128, True),
        ("a" * 129, False),
        ("", False),
        ("-leading", False),
        ("a b", False),
        ("a/b", False),
        ("é", False),
        ("a\x00", False),
    ],
)
def test_the_id_pattern(value: str, ok: bool) -> None:
    assert (re.fullmatch(params.ID_PATTERN.strip("^$"), value) is not None and len(value) <= 128) is ok


async def test_a_5000_character_id_is_refused_before_any_service_is_called() -> None:
    """No service runs here: a refusal that reached one would be a 503."""
    app = create_app(GatewaySettings())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        for path in ("/api/agent/runs/{}", "/api/agent/conversations/{}/entries", "/api/agent/notes/{}"):
            response = await client.get(path.format("7" * 5000))
            assert response.status_code == 400, response.text[:300]
            error = response.json()["error"]
            assert error["code"] == "INVALID_ARGUMENT" and error["message"].startswith("path."), error
        response = await client.get("/api/agent/conversations", params={"q": "a\x01"})
        assert response.status_code == 400 and response.json()["error"]["message"].startswith("query.q")
        response = await client.get("/api/agent/runs/x/events", headers={"Last-Event-ID": b"\xb2"})
        assert response.status_code == 400, response.text[:300]
        # The page link's token, outside the schema, is bounded too.
        assert (await client.get("/", params={"token": "t" * 600})).status_code == 400
