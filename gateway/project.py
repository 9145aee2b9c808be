"""The project every agent shares: its context (the CONTEXT.md
every run receives), the import of a project folder's `.ideai` files, and
the live state (who is doing what, now, until it expires), readable as a
list or watched as Server-Sent Events."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import grpc
from fastapi import Request, Response
from google.protobuf.duration_pb2 import Duration
from sse_starlette import EventSourceResponse

from gateway import deps, params, responses
from gateway.deps import User, rpc
from gateway.enums import LIVE_STATE_EVENT_TYPES, LIVE_STATE_REMOVALS, json_name
from gateway.params import PageSize, PageToken, ProjectId
from gateway.schemas import ImportProjectBody, LiveStateBody, ProjectContextBody
from switchboard.memory.v1 import memory_pb2, memory_service_pb2

router = responses.ApiRouter(prefix="/api/agent")

AgentId = params.Name


@router.get("/project-context", tags=["project"])
async def get_project_context(
    request: Request, user: User, project_id: ProjectId = ""
) -> responses.ProjectContext:
    """The project context every agent's run receives; 404 before one is written."""
    response = await rpc(
        request,
        deps.memory(request).GetProjectContext,
        memory_service_pb2.GetProjectContextRequest(project_id=project_id),
        user,
    )
    return responses.ProjectContext.from_proto(response.context)


@router.put("/project-context", tags=["project"])
async def set_project_context(
    body: ProjectContextBody, request: Request, user: User, project_id: ProjectId = ""
) -> responses.ProjectContext:
    """Replaces the project context; the next run of every agent reads it."""
    response = await rpc(
        request,
        deps.memory(request).UpdateProjectContext,
        memory_service_pb2.UpdateProjectContextRequest(
            context=memory_pb2.ProjectContext(project_id=project_id, body=body.body)
        ),
        user,
    )
    return responses.ProjectContext.from_proto(response.context)


@router.post("/project-context/import", tags=["project"])
async def import_project_files(
    body: ImportProjectBody, request: Request, user: User, project_id: ProjectId = ""
) -> responses.ProjectImport:
    """Imports a project folder's `.ideai/CONTEXT.md` (the context) and
    `.ideai/memory/*.md` (durable notes); other files are skipped, each
    with its reason."""
    response = await rpc(
        request,
        deps.memory(request).ImportProjectFiles,
        memory_service_pb2.ImportProjectFilesRequest(
            project_id=project_id,
            files=[memory_pb2.ProjectFile(path=f.path, content=f.content) for f in body.files],
        ),
        user,
        timeout=deps.settings(request).import_timeout,
    )
    return responses.ProjectImport(items=[responses.ImportItem.from_proto(i) for i in response.items])


@router.get("/live-state", tags=["project"])
async def list_live_state(
    request: Request,
    user: User,
    project_id: ProjectId = "",
    page_size: PageSize = 100,
    page_token: PageToken = "",
) -> responses.LiveStateList:
    """Who is doing what now: the unexpired entries, each with its expiry."""
    response = await rpc(
        request,
        deps.memory(request).ListLiveState,
        memory_service_pb2.ListLiveStateRequest(
            project_id=project_id, page_size=page_size, page_token=page_token
        ),
        user,
    )
    return responses.LiveStateList(
        entries=[responses.LiveStateEntry.from_proto(e) for e in response.entries],
        next_page_token=response.next_page_token,
    )


@router.put("/live-state/{agent_id}", tags=["project"])
async def set_live_state(
    agent_id: AgentId, body: LiveStateBody, request: Request, user: User, project_id: ProjectId = ""
) -> responses.LiveStateEntry:
    """Says what an agent is doing, until `ttl_seconds` (or the service's default) has passed."""
    ttl = None
    if body.ttl_seconds is not None:
        ttl = Duration()
        ttl.FromMilliseconds(round(body.ttl_seconds * 1000))
    response = await rpc(
        request,
        deps.memory(request).SetLiveState,
        memory_service_pb2.SetLiveStateRequest(
            project_id=project_id,
            agent_id=agent_id,
            activity=body.activity,
            detail=body.detail,
            ttl=ttl,
        ),
        user,
    )
    return responses.LiveStateEntry.from_proto(response.entry)


@router.delete("/live-state/{agent_id}", status_code=204, tags=["project"])
async def delete_live_state(
    agent_id: AgentId, request: Request, user: User, project_id: ProjectId = ""
) -> Response:
    await rpc(
        request,
        deps.memory(request).DeleteLiveState,
        memory_service_pb2.DeleteLiveStateRequest(project_id=project_id, agent_id=agent_id),
        user,
    )
    return Response(status_code=204)


@router.get(
    "/live-state/events",
    **responses.event_stream(
        "Server-Sent Events: a snapshot event, then set / removed, each with data {entries, removal}"
    ),
    tags=["project"],
)
async def watch_live_state(request: Request, user: User, project_id: ProjectId = "") -> EventSourceResponse:
    """The live state as SSE: a `snapshot` of every unexpired entry, then a
    `set` or `removed` event (with `removal`: deleted or expired) at each
    change. A reconnecting client gets a fresh snapshot."""
    settings = deps.settings(request)
    stream = deps.memory(request).WatchLiveState(
        memory_service_pb2.WatchLiveStateRequest(project_id=project_id),
        timeout=settings.run_stream_timeout,
        metadata=deps.identity(request, user),
    )

    async def events() -> AsyncIterator[dict[str, str]]:
        try:
            async for response in stream:
                data = {
                    "entries": [responses.LiveStateEntry.proto_dict(e) for e in response.entries],
                    "removal": json_name(LIVE_STATE_REMOVALS, response.removal),
                }
                kind = json_name(LIVE_STATE_EVENT_TYPES, response.type)
                yield {"event": kind, "data": json.dumps(data, separators=(",", ":"))}
        except grpc.aio.AioRpcError as error:
            # The stream ended (deadline, memory restarting): say so; the
            # browser's EventSource reconnects and gets a new snapshot.
            yield {"event": "error", "data": json.dumps({"code": error.code().name})}
        finally:
            stream.cancel()

    return EventSourceResponse(
        events(),
        ping=settings.sse_ping_seconds,
        send_timeout=settings.sse_send_timeout,
        headers={"Cache-Control": "no-store"},
    )
