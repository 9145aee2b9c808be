"""Editing pages (instruction pages among them): the pages a user can read,
an edit that writes a new version, the restore of an older version as a
new one, and the page's ACL (users and projects). Reading a page and its
versions is in gateway.personal."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Request
from google.protobuf.field_mask_pb2 import FieldMask

from gateway import deps, responses
from gateway.deps import User, rpc
from gateway.errors import ApiError
from gateway.params import Id, PageSize, PageToken
from gateway.schemas import PageAclBody, RestoreBody, UpdatePageBody
from switchboard.memory.v1 import pages_pb2, pages_service_pb2

router = responses.ApiRouter(prefix="/api/agent")


@router.get("/pages", tags=["pages"])
async def list_pages(
    request: Request,
    user: User,
    page_size: PageSize = 100,
    page_token: PageToken = "",
) -> responses.PageList:
    """The pages the caller can read: theirs and those shared with them
    (what "add an existing page" to the instruction list offers)."""
    response = await rpc(
        request,
        deps.pages(request).ListPages,
        pages_service_pb2.ListPagesRequest(page_size=page_size, page_token=page_token),
        user,
    )
    return responses.PageList(
        pages=[responses.Page.from_proto(p) for p in response.pages], next_page_token=response.next_page_token
    )


@router.patch("/pages/{page_id}", tags=["pages"])
async def update_page(page_id: Id, body: UpdatePageBody, request: Request, user: User) -> responses.Page:
    """Edits the page's title and/or body: a new version. 409 when
    `expected_version` is given and the page has moved on since."""
    fields = {key: value for key in ("title", "body") if (value := getattr(body, key)) is not None}
    if not fields:
        raise ApiError(400, "INVALID_ARGUMENT", "give a title or a body")
    response = await rpc(
        request,
        deps.pages(request).UpdatePage,
        pages_service_pb2.UpdatePageRequest(
            page=pages_pb2.Page(id=page_id, **fields),
            update_mask=FieldMask(paths=sorted(fields)),
            expected_version=body.expected_version,
        ),
        user,
        idempotent=False,
    )
    return responses.Page.from_proto(response.page)


@router.post("/pages/{page_id}/versions/{version}/restore", tags=["pages"])
async def restore_page_version(
    page_id: Id,
    version: Annotated[int, Path(ge=1, le=2**53)],
    request: Request,
    user: User,
    body: RestoreBody | None = None,
) -> responses.Page:
    """Writes that version's text as a new version (nothing is lost)."""
    response = await rpc(
        request,
        deps.pages(request).RestorePageVersion,
        pages_service_pb2.RestorePageVersionRequest(
            page_id=page_id, version=version, expected_version=body.expected_version if body else 0
        ),
        user,
        idempotent=False,
    )
    return responses.Page.from_proto(response.page)


@router.put("/pages/{page_id}/acl", tags=["pages"])
async def set_page_acl(page_id: Id, body: PageAclBody, request: Request, user: User) -> responses.Page:
    """Replaces who may read and edit the page: users, and projects the
    caller is a member of (their members read it; their editors and owners
    edit it when listed as editor). Owner only: 409 for a reader or editor,
    404 for anyone else and for a project the caller is not in."""
    response = await rpc(
        request,
        deps.pages(request).SetPageAcl,
        pages_service_pb2.SetPageAclRequest(
            page_id=page_id,
            reader_user_ids=body.reader_user_ids,
            editor_user_ids=body.editor_user_ids,
            reader_project_ids=body.reader_project_ids,
            editor_project_ids=body.editor_project_ids,
        ),
        user,
    )
    return responses.Page.from_proto(response.page)
