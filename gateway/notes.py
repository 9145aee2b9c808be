"""The user's durable notes (curated memory): list, search by
meaning and words (the same hybrid recall runs use), write, edit, delete."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import Request, Response
from google.protobuf.field_mask_pb2 import FieldMask

from gateway import deps, params, responses
from gateway.deps import User, rpc
from gateway.enums import NOTE_KINDS, SAVE_OUTCOMES, json_name
from gateway.errors import ApiError
from gateway.params import Id, PageSize, PageToken, ProjectId
from gateway.schemas import NoteBody, UpdateNoteBody
from switchboard.memory.v1 import memory_pb2, memory_service_pb2

router = responses.ApiRouter(prefix="/api/agent")


@router.get("/notes", tags=["notes"])
async def list_notes(
    request: Request,
    user: User,
    q: Annotated[str, params.text(2000, description="search: the recall runs use")] = "",
    project_id: ProjectId = "",
    page_size: PageSize = 100,
    page_token: PageToken = "",
) -> responses.NoteList:
    """The caller's notes, newest first; with `q`, the notes a run asking
    that would recall, best first, each with its `score`."""
    memory = deps.memory(request)
    if q.strip():
        recalled = await rpc(
            request,
            memory.RecallNotes,
            memory_service_pb2.RecallNotesRequest(
                project_id=project_id,
                query=q,
                limit=50,
                mode=memory_pb2.RECALL_MODE_HYBRID,
            ),
            user,
        )
        return responses.NoteList(
            notes=[responses.Note.from_proto(r.note, score=r.score) for r in recalled.notes],
            next_page_token="",
        )
    response = await rpc(
        request,
        memory.ListNotes,
        memory_service_pb2.ListNotesRequest(
            project_id=project_id, page_size=page_size, page_token=page_token
        ),
        user,
    )
    return responses.NoteList(
        notes=[responses.Note.from_proto(n) for n in response.notes], next_page_token=response.next_page_token
    )


@router.post("/notes", status_code=201, tags=["notes"])
async def create_note(
    body: NoteBody, request: Request, user: User, project_id: ProjectId = ""
) -> responses.NoteSaved:
    """Saves a note; one that repeats an existing note is merged into it
    (`outcome`: created or merged)."""
    response = await rpc(
        request,
        deps.memory(request).CreateNote,
        memory_service_pb2.CreateNoteRequest(
            request_id=body.request_id or str(uuid.uuid4()),
            note=memory_pb2.Note(
                project_id=project_id,
                kind=NOTE_KINDS.number(body.kind),
                title=body.title,
                body=body.body,
                tags=body.tags,
            ),
            duplicate_policy=memory_pb2.DUPLICATE_POLICY_MERGE,
        ),
        user,
    )
    return responses.NoteSaved(
        note=responses.Note.from_proto(response.note), outcome=json_name(SAVE_OUTCOMES, response.outcome)
    )


@router.get("/notes/{note_id}", tags=["notes"])
async def get_note(note_id: Id, request: Request, user: User) -> responses.Note:
    response = await rpc(
        request, deps.memory(request).GetNote, memory_service_pb2.GetNoteRequest(id=note_id), user
    )
    return responses.Note.from_proto(response.note)


@router.patch("/notes/{note_id}", tags=["notes"])
async def update_note(note_id: Id, body: UpdateNoteBody, request: Request, user: User) -> responses.Note:
    """Only the fields present are written."""
    fields = body.model_dump(exclude_none=True)
    if not fields:
        raise ApiError(400, "INVALID_ARGUMENT", "give at least one field to change")
    if "kind" in fields:
        fields["kind"] = NOTE_KINDS.number(fields["kind"])
    response = await rpc(
        request,
        deps.memory(request).UpdateNote,
        memory_service_pb2.UpdateNoteRequest(
            note=memory_pb2.Note(id=note_id, **fields), update_mask=FieldMask(paths=sorted(fields))
        ),
        user,
    )
    return responses.Note.from_proto(response.note)


@router.delete("/notes/{note_id}", status_code=204, tags=["notes"])
async def delete_note(note_id: Id, request: Request, user: User) -> Response:
    await rpc(
        request, deps.memory(request).DeleteNote, memory_service_pb2.DeleteNoteRequest(id=note_id), user
    )
    return Response(status_code=204)
