"""MemoryService's note RPCs: proto <-> NotesDomain, nothing else."""

from __future__ import annotations

import grpc

from services.memory.notes.domain import NewNote, NoteFields, NotesDomain
from services.memory.notes.lexical import tags_of
from services.memory.notes.models import Note
from services.memory.notes.recall import Recalled
from services.memory.notes.repository import NoteFilter
from services.memory.projects.servicer import actor_of
from services.shared.time import to_timestamp
from switchboard.memory.v1 import memory_pb2, memory_service_pb2

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


def recalled_to_proto(recalled: Recalled) -> memory_pb2.RecalledNote:
    return memory_pb2.RecalledNote(
        note=note_to_proto(recalled.note),
        score=recalled.score,
        lexical_rank=recalled.lexical_rank,
        embedding_rank=recalled.embedding_rank,
    )


class NotesRpcs:
    """CreateNote, GetNote, ListNotes, UpdateNote, DeleteNote, RecallNotes."""

    _notes: NotesDomain

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
            actor_of(context), request.request_id, new, request.duplicate_policy
        )
        outcome = memory_pb2.SAVE_OUTCOME_MERGED if saved.merged else memory_pb2.SAVE_OUTCOME_CREATED
        return pb.CreateNoteResponse(note=note_to_proto(saved.note), outcome=outcome, reason=saved.reason)

    async def GetNote(
        self, request: pb.GetNoteRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetNoteResponse:
        return pb.GetNoteResponse(
            note=note_to_proto(await self._notes.get_note(actor_of(context), request.id))
        )

    async def ListNotes(
        self, request: pb.ListNotesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListNotesResponse:
        actor = actor_of(context)
        where = NoteFilter(
            member_user_id=actor.user,
            project_id=request.project_id.strip(),
            kind=request.kind,
            tag=request.tag.strip(),
        )
        page = await self._notes.list_notes(actor, where, request.page_size, request.page_token)
        return pb.ListNotesResponse(
            notes=[note_to_proto(n) for n in page.notes], next_page_token=page.next_token
        )

    async def UpdateNote(
        self, request: pb.UpdateNoteRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpdateNoteResponse:
        n = request.note
        values = NoteFields(kind=n.kind, title=n.title, body=n.body, tags=list(n.tags))
        note = await self._notes.update_note(actor_of(context), n.id, values, list(request.update_mask.paths))
        return pb.UpdateNoteResponse(note=note_to_proto(note))

    async def DeleteNote(
        self, request: pb.DeleteNoteRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteNoteResponse:
        await self._notes.delete_note(actor_of(context), request.id)
        return pb.DeleteNoteResponse()

    async def RecallNotes(
        self, request: pb.RecallNotesRequest, context: grpc.aio.ServicerContext
    ) -> pb.RecallNotesResponse:
        recalled = await self._notes.recall(
            actor_of(context),
            request.project_id,
            request.query,
            request.persona,
            request.limit,
            request.mode,
        )
        return pb.RecallNotesResponse(notes=[recalled_to_proto(r) for r in recalled])
