"""A view (gateway.responses.views) takes its fields from its message's
descriptor, and each field it reshapes is declared once: the declaration
types the field in the model and converts its value from the message."""

from __future__ import annotations

import pytest

from gateway import responses
from gateway.responses.views import ProtoView
from switchboard.memory.v1 import memory_pb2, pages_pb2
from switchboard.threads.v1 import threads_pb2


def test_a_view_has_the_message_fields_in_order_with_the_reshaped_ones_typed_and_converted() -> None:
    fields = list(responses.Segment.model_fields)
    assert fields == [field.name for field in threads_pb2.Segment.DESCRIPTOR.fields]
    segment = threads_pb2.Segment(
        first_sequence=5, entry_count=2, state=threads_pb2.SEGMENT_STATE_CLOSED, handoff_summary="résumé"
    )
    body = responses.Segment.from_proto(segment).model_dump(mode="json", exclude_unset=True)
    # int64 printed as text in proto JSON: a number here, as the schema says.
    assert body["first_sequence"] == 5 and body["entry_count"] == 2
    schema = responses.Segment.model_json_schema()["properties"]
    assert schema["first_sequence"]["type"] == "integer"
    # The enum by its short name; the fields not reshaped as proto JSON prints them.
    assert body["state"] == "closed"
    assert body["handoff_summary"] == "résumé"
    assert "open_time" not in body  # an unset Timestamp stays absent


def test_a_nested_view_reshapes_its_own_fields_and_an_unset_one_can_be_null() -> None:
    new_note = memory_pb2.NoteProposal(
        id="p1", note=memory_pb2.Note(kind=memory_pb2.NOTE_KIND_FACT, title="t"), diff=pages_pb2.TextDiff()
    )
    body = responses.NoteProposal.from_proto(new_note).model_dump(mode="json", exclude_unset=True)
    assert body["note"]["kind"] == "fact"
    assert body["target_note"] is None  # present, null: a new note has no target
    assert body["diff"]["added_lines"] == 0
    update = memory_pb2.NoteProposal(id="p2", target_note=memory_pb2.Note(id="n1"))
    assert responses.NoteProposal.proto_dict(update)["target_note"]["id"] == "n1"


def test_a_page_version_is_a_number_even_when_zero() -> None:
    page = pages_pb2.PageVersion(page_id="p", version=3)
    body = responses.PageVersion.from_proto(page).model_dump(exclude_unset=True)
    assert body["version"] == 3 and body["restored_from_version"] == 0


def test_a_route_adds_the_fields_the_message_lacks() -> None:
    note = memory_pb2.Note(id="n", kind=memory_pb2.NOTE_KIND_PREFERENCE)
    body = responses.Note.from_proto(note, score=0.5).model_dump(exclude_unset=True)
    assert body["score"] == 0.5 and body["kind"] == "preference"


def test_the_shared_view_of_a_message_is_declared_before_a_view_nests_it() -> None:
    # Conversation nests AllowedSources: its shared view exists already.
    with pytest.raises(TypeError, match="declare it before"):

        class AllowedSources(ProtoView, proto=threads_pb2.AllowedSources):
            pass
