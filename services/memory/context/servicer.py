"""MemoryService's project context and live state RPCs: proto <->
ContextDomain and LiveStateDomain, nothing else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import grpc

from services.memory.context.domain import ContextDomain
from services.memory.context.live_state import LiveStateDomain
from services.memory.context.models import LiveState, ProjectContextRow
from services.memory.projects.servicer import actor_of
from services.shared.time import from_duration, from_timestamp, to_timestamp
from switchboard.memory.v1 import memory_pb2, memory_service_pb2

pb = memory_service_pb2


def context_to_proto(row: ProjectContextRow) -> memory_pb2.ProjectContext:
    return memory_pb2.ProjectContext(
        project_id=row.project_id, body=row.body, update_time=to_timestamp(row.update_time)
    )


def live_to_proto(row: LiveState) -> memory_pb2.LiveStateEntry:
    return memory_pb2.LiveStateEntry(
        project_id=row.project_id,
        agent_id=row.agent_id,
        activity=row.activity,
        detail=row.detail,
        update_time=to_timestamp(row.update_time),
        expire_time=to_timestamp(row.expire_time),
    )


class ContextRpcs:
    """GetProjectContext, UpdateProjectContext, ImportProjectFiles, and the
    live state's SetLiveState, ListLiveState, DeleteLiveState,
    ClearLiveState, WatchLiveState."""

    _contexts: ContextDomain
    _live: LiveStateDomain

    async def GetProjectContext(
        self, request: pb.GetProjectContextRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetProjectContextResponse:
        row = await self._contexts.get_context(actor_of(context), request.project_id)
        return pb.GetProjectContextResponse(context=context_to_proto(row))

    async def UpdateProjectContext(
        self, request: pb.UpdateProjectContextRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpdateProjectContextResponse:
        row = await self._contexts.put_context(
            actor_of(context), request.context.project_id, request.context.body
        )
        return pb.UpdateProjectContextResponse(context=context_to_proto(row))

    async def ImportProjectFiles(
        self, request: pb.ImportProjectFilesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ImportProjectFilesResponse:
        report = await self._contexts.import_files(
            actor_of(context), request.project_id, [(f.path, f.content) for f in request.files]
        )
        return pb.ImportProjectFilesResponse(
            items=[
                memory_pb2.ImportItem(
                    path=item.path,
                    outcome=item.outcome.value,  # type: ignore[arg-type]
                    note_id=item.note_id,
                    reason=item.reason,
                )
                for item in report
            ]
        )

    # Live state

    async def SetLiveState(
        self, request: pb.SetLiveStateRequest, context: grpc.aio.ServicerContext
    ) -> pb.SetLiveStateResponse:
        ttl = from_duration(request.ttl, "ttl") if request.HasField("ttl") else None
        expire = None
        if request.HasField("expire_time"):
            expire = from_timestamp(request.expire_time, "expire_time")
        if ttl is not None and ttl == timedelta(0):
            ttl = None
        row = await self._live.set(
            actor_of(context),
            request.project_id,
            request.agent_id,
            request.activity,
            request.detail,
            ttl,
            expire,
        )
        return pb.SetLiveStateResponse(entry=live_to_proto(row))

    async def ListLiveState(
        self, request: pb.ListLiveStateRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListLiveStateResponse:
        page = await self._live.list(
            actor_of(context), request.project_id, request.page_size, request.page_token
        )
        return pb.ListLiveStateResponse(
            entries=[live_to_proto(row) for row in page.entries], next_page_token=page.next_token
        )

    async def DeleteLiveState(
        self, request: pb.DeleteLiveStateRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteLiveStateResponse:
        await self._live.delete(actor_of(context), request.project_id, request.agent_id)
        return pb.DeleteLiveStateResponse()

    async def ClearLiveState(
        self, request: pb.ClearLiveStateRequest, context: grpc.aio.ServicerContext
    ) -> pb.ClearLiveStateResponse:
        deleted = await self._live.clear(actor_of(context), request.project_id)
        return pb.ClearLiveStateResponse(deleted_count=deleted)

    async def WatchLiveState(
        self, request: pb.WatchLiveStateRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.WatchLiveStateResponse]:
        async for event in self._live.watch(actor_of(context), request.project_id):
            yield pb.WatchLiveStateResponse(
                type=event.type.value,  # type: ignore[arg-type]
                entries=[live_to_proto(row) for row in event.entries],
                removal=event.removal.value if event.removal else 0,  # type: ignore[arg-type]
            )
