"""MemoryService: proto <-> domain, nothing else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import grpc

from services.memory.context import ContextDomain
from services.memory.domain import MemoryDomain, SettingsValues, instruction_page_ids_of, tags_of
from services.memory.live_state import LiveStateDomain
from services.memory.models import LiveState, Note, PersonalSettings, ProjectContextRow
from services.memory.notes import NewNote, NoteFields, NotesDomain
from services.memory.repository import NoteFilter
from services.shared.identity import caller_user
from services.shared.time import from_duration, from_timestamp, to_timestamp
from switchboard.memory.v1 import memory_pb2, memory_service_pb2, memory_service_pb2_grpc

pb = memory_service_pb2


def note_to_proto(note: Note) -> memory_pb2.Note:
    return memory_pb2.Note(
        id=note.id,
        project_id=note.project_id,
        kind=note.kind,  # type: ignore[arg-type]
        title=note.title,
        body=note.body,
        tags=tags_of(note),
        author_agent_id=note.author_agent_id,
        create_time=to_timestamp(note.create_time),
        update_time=to_timestamp(note.update_time),
        source=note.source or "",
    )


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


def settings_to_proto(settings: PersonalSettings) -> memory_pb2.PersonalSettings:
    return memory_pb2.PersonalSettings(
        user_id=settings.user_id,
        display_name=settings.display_name,
        avatar_json=settings.avatar_json,
        instruction_page_ids=instruction_page_ids_of(settings),
        active_instruction_page_id=settings.active_instruction_page_id,
        chat_mode=settings.chat_mode,  # type: ignore[arg-type]
        default_model=settings.default_model,
    )


class MemoryServicer(memory_service_pb2_grpc.MemoryServiceServicer):
    def __init__(
        self, domain: MemoryDomain, notes: NotesDomain, contexts: ContextDomain, live: LiveStateDomain
    ) -> None:
        self._domain = domain
        self._notes = notes
        self._contexts = contexts
        self._live = live

    # Notes

    async def CreateNote(
        self, request: pb.CreateNoteRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateNoteResponse:
        n = request.note
        new = NewNote(
            project_id=n.project_id,
            kind=n.kind,
            title=n.title,
            body=n.body,
            tags=list(n.tags),
            author_agent_id=n.author_agent_id,
        )
        saved = await self._notes.create_note(
            caller_user(context), request.request_id, new, request.duplicate_policy
        )
        outcome = memory_pb2.SAVE_OUTCOME_MERGED if saved.merged else memory_pb2.SAVE_OUTCOME_CREATED
        return pb.CreateNoteResponse(note=note_to_proto(saved.note), outcome=outcome, reason=saved.reason)

    async def GetNote(
        self, request: pb.GetNoteRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetNoteResponse:
        return pb.GetNoteResponse(
            note=note_to_proto(await self._notes.get_note(caller_user(context), request.id))
        )

    async def ListNotes(
        self, request: pb.ListNotesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListNotesResponse:
        where = NoteFilter(
            owner_user_id=caller_user(context),
            project_id=request.project_id.strip(),
            kind=request.kind,
            tag=request.tag.strip(),
        )
        page = await self._notes.list_notes(where.owner_user_id, where, request.page_size, request.page_token)
        return pb.ListNotesResponse(
            notes=[note_to_proto(n) for n in page.notes], next_page_token=page.next_token
        )

    async def UpdateNote(
        self, request: pb.UpdateNoteRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpdateNoteResponse:
        n = request.note
        values = NoteFields(kind=n.kind, title=n.title, body=n.body, tags=list(n.tags))
        note = await self._notes.update_note(
            caller_user(context), n.id, values, list(request.update_mask.paths)
        )
        return pb.UpdateNoteResponse(note=note_to_proto(note))

    async def DeleteNote(
        self, request: pb.DeleteNoteRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteNoteResponse:
        await self._notes.delete_note(caller_user(context), request.id)
        return pb.DeleteNoteResponse()

    async def RecallNotes(
        self, request: pb.RecallNotesRequest, context: grpc.aio.ServicerContext
    ) -> pb.RecallNotesResponse:
        recalled = await self._notes.recall(
            caller_user(context),
            request.project_id,
            request.query,
            request.persona,
            request.limit,
            request.mode,
        )
        return pb.RecallNotesResponse(
            notes=[
                memory_pb2.RecalledNote(
                    note=note_to_proto(r.note),
                    score=r.score,
                    lexical_rank=r.lexical_rank,
                    embedding_rank=r.embedding_rank,
                )
                for r in recalled
            ]
        )

    # Project context

    async def GetProjectContext(
        self, request: pb.GetProjectContextRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetProjectContextResponse:
        row = await self._contexts.get_context(caller_user(context), request.project_id)
        return pb.GetProjectContextResponse(context=context_to_proto(row))

    async def UpdateProjectContext(
        self, request: pb.UpdateProjectContextRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpdateProjectContextResponse:
        row = await self._contexts.put_context(
            caller_user(context), request.context.project_id, request.context.body
        )
        return pb.UpdateProjectContextResponse(context=context_to_proto(row))

    async def ImportProjectFiles(
        self, request: pb.ImportProjectFilesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ImportProjectFilesResponse:
        report = await self._contexts.import_files(
            caller_user(context), request.project_id, [(f.path, f.content) for f in request.files]
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
            caller_user(context),
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
            caller_user(context), request.project_id, request.page_size, request.page_token
        )
        return pb.ListLiveStateResponse(
            entries=[live_to_proto(row) for row in page.entries], next_page_token=page.next_token
        )

    async def DeleteLiveState(
        self, request: pb.DeleteLiveStateRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteLiveStateResponse:
        await self._live.delete(caller_user(context), request.project_id, request.agent_id)
        return pb.DeleteLiveStateResponse()

    async def ClearLiveState(
        self, request: pb.ClearLiveStateRequest, context: grpc.aio.ServicerContext
    ) -> pb.ClearLiveStateResponse:
        deleted = await self._live.clear(caller_user(context), request.project_id)
        return pb.ClearLiveStateResponse(deleted_count=deleted)

    async def WatchLiveState(
        self, request: pb.WatchLiveStateRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.WatchLiveStateResponse]:
        async for event in self._live.watch(caller_user(context), request.project_id):
            yield pb.WatchLiveStateResponse(
                type=event.type.value,  # type: ignore[arg-type]
                entries=[live_to_proto(row) for row in event.entries],
                removal=event.removal.value if event.removal else 0,  # type: ignore[arg-type]
            )

    # Personal settings

    async def GetPersonalSettings(
        self, request: pb.GetPersonalSettingsRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetPersonalSettingsResponse:
        settings = await self._domain.get_personal_settings(caller_user(context))
        return pb.GetPersonalSettingsResponse(settings=settings_to_proto(settings))

    async def UpdatePersonalSettings(
        self, request: pb.UpdatePersonalSettingsRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpdatePersonalSettingsResponse:
        s = request.settings
        values = SettingsValues(
            display_name=s.display_name,
            avatar_json=s.avatar_json,
            instruction_page_ids=list(s.instruction_page_ids),
            active_instruction_page_id=s.active_instruction_page_id,
            chat_mode=s.chat_mode,
            default_model=s.default_model,
        )
        settings = await self._domain.update_personal_settings(
            caller_user(context), values, list(request.update_mask.paths)
        )
        return pb.UpdatePersonalSettingsResponse(settings=settings_to_proto(settings))
