"""Who the caller is (GET /api/agent/me), and the audit log of admin actions
(GET /api/audit, admins only).

The log lives where the actions happen, each written with its action: the
router's table (skill catalog writes), the threads service's table (agent
registry writes), the memory service's table (projects and their members)
and the tokens file's audit file (token creation,
revocation, role changes; the gateway has no database). This route merges
them newest first, paged by keyset on (time, id) with the shared page-token
helper: each source is asked for the events strictly older than the last
one sent, so a page costs one indexed query per service however deep."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Annotated, Any

from fastapi import Query, Request

from gateway import deps, params, responses
from gateway.auth import caller_role
from gateway.deps import User, rpc
from gateway.errors import ApiError
from gateway.tokens import read_audit
from services.shared.errors import InvalidArgument
from services.shared.pagination import as_instant, as_text, page_of, page_request
from services.shared.time import to_timestamp
from switchboard.common.v1 import common_pb2
from switchboard.memory.v1 import projects_service_pb2
from switchboard.router.v1 import router_service_pb2
from switchboard.threads.v1 import threads_service_pb2

router = responses.ApiRouter(prefix="/api")

Position = tuple[datetime, str]


@router.get("/agent/me", tags=["auth"])
async def me(request: Request, user: User) -> responses.Me:
    """The caller's user and role: the page hides what only admins may do."""
    return responses.Me(user=user, role=caller_role(request))


def _read(cursor: dict[str, Any]) -> Position:
    return as_instant(cursor["t"]), as_text(cursor["id"])


def _key(event: dict[str, Any]) -> Position:
    return datetime.fromisoformat(event["create_time"].replace("Z", "+00:00")), event["id"]


def _readable(event: dict[str, Any]) -> bool:
    """An event of the tokens audit file with the fields the page shows (a
    hand-edited line that lacks them is left out, never a 500)."""
    fields = ("id", "actor", "actor_role", "action", "target", "detail", "create_time")
    if not all(isinstance(event.get(name), str) for name in fields):
        return False
    try:
        _key(event)
    except ValueError:
        return False
    return True


def _file_events(request: Request, before: Position | None, limit: int) -> list[dict[str, Any]]:
    path = deps.settings(request).tokens_file
    if path is None:
        return []
    events = [e for e in read_audit(path) if _readable(e)]
    events = [e for e in events if before is None or _key(e) < before]
    return sorted(events, key=_key, reverse=True)[:limit]


async def _service_events(
    request: Request, user: str, before: Position | None, limit: int
) -> list[dict[str, Any]]:
    position = common_pb2.AuditPosition(time=to_timestamp(before[0]), id=before[1]) if before else None
    router, threads, projects = await asyncio.gather(
        rpc(
            request,
            deps.router_stub(request).ListAuditEvents,
            router_service_pb2.ListAuditEventsRequest(page_size=limit, before=position),
            user,
        ),
        rpc(
            request,
            deps.threads(request).ListAuditEvents,
            threads_service_pb2.ListAuditEventsRequest(page_size=limit, before=position),
            user,
        ),
        rpc(
            request,
            deps.projects(request).ListAuditEvents,
            projects_service_pb2.ListAuditEventsRequest(page_size=limit, before=position),
            user,
        ),
    )
    events = (*router.events, *threads.events, *projects.events)
    return [responses.AuditEvent.proto_dict(event) for event in events]


@router.get("/audit", tags=["auth"])
async def audit_log(
    request: Request,
    user: User,
    page_size: Annotated[int, Query(ge=0, le=500)] = 50,
    page_token: params.PageToken = "",
) -> responses.AuditPage:
    """Admin actions, newest first: skill catalog writes, agent registry
    writes, token creation and revocation, role changes; each with who
    (actor, actor_role), what (action, target, detail) and when. 403 for
    anyone but an admin."""
    if caller_role(request) != "admin":
        raise ApiError(
            403, "PERMISSION_DENIED", "the audit log is for admins", reason="ERROR_REASON_PERMISSION_DENIED"
        )
    try:
        size, before = page_request(page_size, page_token, _read)
    except InvalidArgument as error:  # the shared helper's refusal, as HTTP
        raise ApiError(
            400, "INVALID_ARGUMENT", error.message, reason="ERROR_REASON_INVALID_ARGUMENT"
        ) from error
    events = await _service_events(request, user, before, size + 1)
    events += _file_events(request, before, size + 1)
    events.sort(key=_key, reverse=True)
    page, token = page_of(events, size, lambda last: {"t": _key(last)[0].isoformat(), "id": last["id"]})
    # The service events and the tokens file's lines alike, checked by the model.
    return responses.AuditPage(
        events=[responses.AuditEvent.model_validate(event) for event in page], next_page_token=token
    )
