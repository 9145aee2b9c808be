"""PUT /api/agent/pages/{id}/acl in-process over a fake PagesService:
malformed ids and lists are refused before any service (never a 5xx), and a
well-formed request sends the four lists as the contract's SetPageAcl."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from switchboard.memory.v1 import pages_pb2, pages_service_pb2
from tests.unit.test_gateway_streams import FlakyEngine, app_with

PAGE = "0b9e2d2c-7d0c-4f33-9a55-3bd4f5a7c1aa"


class FakePages:
    def __init__(self) -> None:
        self.requests: list[Any] = []

    async def SetPageAcl(self, request: Any, **_: Any) -> Any:  # noqa: N802 - the RPC's name
        self.requests.append(request)
        page = pages_pb2.Page(
            id=request.page_id,
            owner_user_id="alice",
            title="Plan",
            version=1,
            reader_user_ids=request.reader_user_ids,
            editor_user_ids=request.editor_user_ids,
            reader_project_ids=request.reader_project_ids,
            editor_project_ids=request.editor_project_ids,
        )
        return pages_service_pb2.SetPageAclResponse(page=page)


async def put(pages: FakePages, path: str, body: Any) -> httpx.Response:
    app = app_with(FlakyEngine([]))
    app.state.pages = pages
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        return await client.put(path, json=body)


async def test_the_four_lists_reach_set_page_acl() -> None:
    pages = FakePages()
    body = {
        "reader_user_ids": ["bob"],
        "editor_user_ids": ["carol"],
        "reader_project_ids": ["apollo"],
        "editor_project_ids": ["gemini.v2"],
    }
    response = await put(pages, f"/api/agent/pages/{PAGE}/acl", body)
    assert response.status_code == 200, response.text
    [sent] = pages.requests
    assert (sent.page_id, list(sent.reader_project_ids), list(sent.editor_project_ids)) == (
        PAGE,
        ["apollo"],
        ["gemini.v2"],
    )
    assert response.json()["reader_project_ids"] == ["apollo"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (f"/api/agent/pages/{PAGE}/acl", {"reader_project_ids": ["bad id!"]}),
        (f"/api/agent/pages/{PAGE}/acl", {"editor_project_ids": ["x" * 129]}),
        (f"/api/agent/pages/{PAGE}/acl", {"reader_user_ids": ["line\nbreak"]}),
        (f"/api/agent/pages/{PAGE}/acl", {"reader_project_ids": [f"p{n}" for n in range(101)]}),
        (f"/api/agent/pages/{PAGE}/acl", {"owner_user_id": "eve"}),
        (f"/api/agent/pages/{PAGE}/acl", ["apollo"]),
        ("/api/agent/pages/%00/acl", {"reader_user_ids": ["bob"]}),
    ],
)
async def test_malformed_requests_are_refused_before_any_service(path: str, body: Any) -> None:
    pages = FakePages()
    response = await put(pages, path, body)
    assert 400 <= response.status_code < 500, response.text
    assert pages.requests == []
