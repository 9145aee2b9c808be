"""MemoryService: proto <-> domain, nothing else."""

from __future__ import annotations

import grpc

from services.memory.domain import MemoryDomain, NewNote, SettingsValues, instruction_page_ids_of, tags_of
from services.memory.models import Note, PersonalSettings
from services.shared.identity import caller_user
from services.shared.time import to_timestamp
from switchboard.memory.v1 import memory_pb2, memory_service_pb2, memory_service_pb2_grpc


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
    def __init__(self, domain: MemoryDomain) -> None:
        self._domain = domain

    async def CreateNote(
        self, request: memory_service_pb2.CreateNoteRequest, context: grpc.aio.ServicerContext
    ) -> memory_service_pb2.CreateNoteResponse:
        n = request.note
        note = await self._domain.create_note(
            caller_user(context),
            request.request_id,
            NewNote(
                project_id=n.project_id,
                kind=n.kind,
                title=n.title,
                body=n.body,
                tags=list(n.tags),
                author_agent_id=n.author_agent_id,
            ),
        )
        return memory_service_pb2.CreateNoteResponse(note=note_to_proto(note))

    async def RecallNotes(
        self, request: memory_service_pb2.RecallNotesRequest, context: grpc.aio.ServicerContext
    ) -> memory_service_pb2.RecallNotesResponse:
        recalled = await self._domain.recall_notes(
            caller_user(context), request.project_id, request.query, request.persona, request.limit
        )
        return memory_service_pb2.RecallNotesResponse(
            notes=[memory_pb2.RecalledNote(note=note_to_proto(note), score=score) for note, score in recalled]
        )

    async def GetPersonalSettings(
        self, request: memory_service_pb2.GetPersonalSettingsRequest, context: grpc.aio.ServicerContext
    ) -> memory_service_pb2.GetPersonalSettingsResponse:
        settings = await self._domain.get_personal_settings(caller_user(context))
        return memory_service_pb2.GetPersonalSettingsResponse(settings=settings_to_proto(settings))

    async def UpdatePersonalSettings(
        self, request: memory_service_pb2.UpdatePersonalSettingsRequest, context: grpc.aio.ServicerContext
    ) -> memory_service_pb2.UpdatePersonalSettingsResponse:
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
        return memory_service_pb2.UpdatePersonalSettingsResponse(settings=settings_to_proto(settings))
