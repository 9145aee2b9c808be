"""MemoryService.GetChatContext in-process through its real stubs, on SQLite
and PostgreSQL: one call answers what a chat run's six memory reads answer
(RecallNotes, GetPersonalSettings, GetActiveInstructions, GetProjectContext,
ListLiveState, GetHandoffSummary), in English and French, and gives back
recall's embedding of the query for the Skill Router to reuse; an unreadable
instruction page is a state, never an error; another user's conversation
reads like one without a summary."""

from __future__ import annotations

from dataclasses import dataclass

import grpc
import numpy as np
import pytest
from google.protobuf import json_format
from google.protobuf.field_mask_pb2 import FieldMask
from google.protobuf.message import Message

from services.shared.embeddings import HashingEmbedder, TextEmbedding
from switchboard.memory.v1 import (
    handoff_pb2,
    handoff_service_pb2,
    handoff_service_pb2_grpc,
    memory_pb2,
    memory_service_pb2_grpc,
    pages_pb2,
    pages_service_pb2,
    pages_service_pb2_grpc,
)
from switchboard.memory.v1 import memory_service_pb2 as pb
from tests.service.harness import as_user, expect_error

ALICE, BOB = as_user("alice"), as_user("bob")
PROJECT = "default"
THREAD = "conversation-1"


@dataclass
class Stubs:
    memory: memory_service_pb2_grpc.MemoryServiceStub
    pages: pages_service_pb2_grpc.PagesServiceStub
    handoff: handoff_service_pb2_grpc.HandoffServiceStub


@pytest.fixture
def stubs(memory_channel: grpc.aio.Channel) -> Stubs:
    return Stubs(
        memory_service_pb2_grpc.MemoryServiceStub(memory_channel),
        pages_service_pb2_grpc.PagesServiceStub(memory_channel),
        handoff_service_pb2_grpc.HandoffServiceStub(memory_channel),
    )


def as_dict(message: Message) -> dict[str, object]:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


TEXTS = {
    "en": {
        "notes": [
            ("Launch date", "We ship the mobile app on Friday after the QA sign-off."),
            ("Invoice rules", "Invoices for Dupont are sent on Tuesdays."),
        ],
        "context": "Answer in English. The release manager is Lea.",
        "activity": "reviewing the release checklist",
        "query": "When do we ship the mobile app?",
        "objective": "Prepare the mobile release",
    },
    "fr": {
        "notes": [
            ("Date de lancement", "Nous livrons l'application mobile vendredi après la recette."),
            ("Règles de facturation", "Les factures Dupont partent le mardi."),
        ],
        "context": "Réponds en français. La responsable de la livraison est Léa.",
        "activity": "relit la liste de contrôle de la livraison",
        "query": "Quand livrons-nous l'application mobile ?",
        "objective": "Préparer la livraison mobile",
    },
}


async def alice_writes(stubs: Stubs, language: str) -> None:
    """One of everything a chat run reads, for alice."""
    texts = TEXTS[language]
    for title, body in texts["notes"]:
        note = memory_pb2.Note(project_id=PROJECT, kind=memory_pb2.NOTE_KIND_DECISION, title=title, body=body)
        await stubs.memory.CreateNote(pb.CreateNoteRequest(note=note), **ALICE)
    await stubs.memory.UpdatePersonalSettings(
        pb.UpdatePersonalSettingsRequest(
            settings=memory_pb2.PersonalSettings(default_model="offline-strong"),
            update_mask=FieldMask(paths=["default_model"]),
        ),
        **ALICE,
    )
    await stubs.pages.CreateInstructionPage(pages_service_pb2.CreateInstructionPageRequest(), **ALICE)
    await stubs.memory.UpdateProjectContext(
        pb.UpdateProjectContextRequest(
            context=memory_pb2.ProjectContext(project_id=PROJECT, body=texts["context"])
        ),
        **ALICE,
    )
    for agent in ("architect", "qa", "writer"):
        await stubs.memory.SetLiveState(
            pb.SetLiveStateRequest(project_id=PROJECT, agent_id=agent, activity=texts["activity"]), **ALICE
        )
    entry = handoff_pb2.HandoffEntry(
        sequence=1, kind=handoff_pb2.HANDOFF_ENTRY_KIND_OBJECTIVE, text=texts["objective"], requester="alice"
    )
    await stubs.handoff.RecordHandoffEntries(
        handoff_service_pb2.RecordHandoffEntriesRequest(thread_id=THREAD, entries=[entry], private=True),
        **ALICE,
    )
    await stubs.handoff.CheckpointHandoff(
        handoff_service_pb2.CheckpointHandoffRequest(
            thread_id=THREAD, reason=handoff_pb2.HANDOFF_CHECKPOINT_REASON_REQUEST
        ),
        **ALICE,
    )


@pytest.mark.parametrize("language", ["en", "fr"])
async def test_one_call_answers_what_the_six_reads_answer(stubs: Stubs, language: str) -> None:
    await alice_writes(stubs, language)
    query = TEXTS[language]["query"]
    one = await stubs.memory.GetChatContext(
        pb.GetChatContextRequest(
            thread_id=THREAD, project_id=PROJECT, recall_query=query, live_state_page_size=2
        ),
        **ALICE,
    )
    recalled = await stubs.memory.RecallNotes(pb.RecallNotesRequest(project_id=PROJECT, query=query), **ALICE)
    settings = await stubs.memory.GetPersonalSettings(pb.GetPersonalSettingsRequest(), **ALICE)
    active = await stubs.pages.GetActiveInstructions(
        pages_service_pb2.GetActiveInstructionsRequest(), **ALICE
    )
    context = await stubs.memory.GetProjectContext(pb.GetProjectContextRequest(project_id=PROJECT), **ALICE)
    live = await stubs.memory.ListLiveState(pb.ListLiveStateRequest(project_id=PROJECT, page_size=2), **ALICE)
    summary = await stubs.handoff.GetHandoffSummary(
        handoff_service_pb2.GetHandoffSummaryRequest(thread_id=THREAD), **ALICE
    )
    assert [as_dict(n) for n in one.recalled_notes] == [as_dict(n) for n in recalled.notes]
    assert one.recalled_notes[0].note.title == TEXTS[language]["notes"][0][0]
    assert as_dict(one.settings) == as_dict(settings.settings)
    assert one.settings.default_model == "offline-strong"
    assert as_dict(one.active_instructions) == as_dict(active)
    assert one.active_instructions.state == pages_pb2.INSTRUCTION_PAGE_STATE_READABLE
    assert as_dict(one.project_context) == as_dict(context.context)
    assert one.project_context.body == TEXTS[language]["context"]
    assert [as_dict(e) for e in one.live_state] == [as_dict(e) for e in live.entries]
    assert [e.agent_id for e in one.live_state] == ["architect", "qa"]  # the page size holds
    assert as_dict(one.handoff_summary) == as_dict(summary.summary)
    assert TEXTS[language]["objective"] in one.handoff_summary.text


async def test_the_read_mask_names_the_parts_read(stubs: Stubs) -> None:
    await alice_writes(stubs, "en")
    only = await stubs.memory.GetChatContext(
        pb.GetChatContextRequest(
            thread_id=THREAD,
            recall_query=TEXTS["en"]["query"],
            read_mask=FieldMask(paths=["settings", "live_state"]),
        ),
        **ALICE,
    )
    assert only.settings.default_model == "offline-strong" and len(only.live_state) == 3
    assert not only.recalled_notes
    assert not only.HasField("active_instructions") and not only.HasField("project_context")
    assert not only.HasField("handoff_summary")
    await expect_error(
        stubs.memory.GetChatContext(
            pb.GetChatContextRequest(read_mask=FieldMask(paths=["settings", "notes"])), **ALICE
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    await expect_error(
        stubs.memory.GetChatContext(pb.GetChatContextRequest(live_state_page_size=-1), **ALICE),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    await expect_error(
        stubs.memory.GetChatContext(pb.GetChatContextRequest(), timeout=10),
        grpc.StatusCode.UNAUTHENTICATED,
        "ERROR_REASON_UNAUTHENTICATED",
    )


@pytest.mark.parametrize(
    "query", ["When do we ship the mobile app?", "Quand livrons-nous l'application mobile ?"]
)
async def test_what_is_not_written_or_not_the_callers_reads_as_absent(stubs: Stubs, query: str) -> None:
    await alice_writes(stubs, "fr")
    bob = await stubs.memory.GetChatContext(
        pb.GetChatContextRequest(thread_id=THREAD, project_id=PROJECT, recall_query=query), **BOB
    )
    # Alice's conversation summary, notes, context and live state are hers alone.
    assert not bob.HasField("handoff_summary") and not bob.HasField("project_context")
    assert not bob.recalled_notes and not bob.live_state
    assert bob.settings.default_model == "" and bob.settings.user_id == "bob"
    assert bob.active_instructions.state == pages_pb2.INSTRUCTION_PAGE_STATE_NONE


async def test_an_unreadable_instruction_page_is_a_state_not_a_failure(stubs: Stubs) -> None:
    shared = (
        await stubs.pages.CreatePage(
            pages_service_pb2.CreatePageRequest(
                page=pages_pb2.Page(title="Règles partagées", body="Tutoie-moi.", reader_user_ids=["alice"])
            ),
            **BOB,
        )
    ).page
    await stubs.pages.AddInstructionPage(
        pages_service_pb2.AddInstructionPageRequest(page_id=shared.id, make_active=True), **ALICE
    )
    readable = await stubs.memory.GetChatContext(pb.GetChatContextRequest(recall_query="bonjour"), **ALICE)
    assert readable.active_instructions.body == "Tutoie-moi."
    await stubs.pages.SetPageAcl(pages_service_pb2.SetPageAclRequest(page_id=shared.id), **BOB)
    got = await stubs.memory.GetChatContext(pb.GetChatContextRequest(recall_query="hello"), **ALICE)
    page = got.active_instructions
    assert (page.state, page.page_id, page.body) == (
        pages_pb2.INSTRUCTION_PAGE_STATE_UNREADABLE,
        shared.id,
        "",
    )
    assert "no longer readable" in page.notice


@pytest.mark.parametrize("language", ["en", "fr"])
async def test_the_recall_query_embedding_comes_back_for_the_router(stubs: Stubs, language: str) -> None:
    """Recall's own embedding of the query (no persona mixed in), with what
    makes it safe to reuse: the embedder, its dimension, the text's hash."""
    await alice_writes(stubs, language)
    query = TEXTS[language]["query"]
    read = await stubs.memory.GetChatContext(
        pb.GetChatContextRequest(project_id=PROJECT, recall_query=query), **ALICE
    )
    embedded = TextEmbedding.from_proto(read.recall_query_embedding)
    hashing = HashingEmbedder()
    assert embedded is not None and embedded.fits(hashing, query)
    assert (embedded.embedder, embedded.dimension) == ("hashing", 256)
    assert np.array_equal(embedded.vector, hashing.embed([query])[0])


async def test_no_embedding_comes_back_when_recall_embedded_nothing(stubs: Stubs) -> None:
    query = TEXTS["en"]["query"]
    # No note in bob's project: recall has nothing to compare a vector with.
    empty = await stubs.memory.GetChatContext(pb.GetChatContextRequest(recall_query=query), **BOB)
    await alice_writes(stubs, "en")
    unread = await stubs.memory.GetChatContext(
        pb.GetChatContextRequest(recall_query=query, read_mask=FieldMask(paths=["settings"])), **ALICE
    )
    blank = await stubs.memory.GetChatContext(pb.GetChatContextRequest(recall_query="  "), **ALICE)
    for read in (empty, unread, blank):
        assert not read.HasField("recall_query_embedding")
