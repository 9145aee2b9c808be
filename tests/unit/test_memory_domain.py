"""Pure functions of the memory domain: tokenising, BM25 scoring, ranking,
settings validation. No gRPC, no database."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from services.memory.notes.lexical import (
    MAX_RECALL_LIMIT,
    NOTE_KINDS,
    PERSONA_WEIGHT,
    bm25_scores,
    note_terms,
    rank,
    recall_limit,
    recall_weights,
    tokenize,
)
from services.memory.notes.models import Note
from services.memory.personal.domain import CHAT_MODES, SettingsValues, settings_changes
from services.shared.errors import DomainError, InvalidArgument, TooLarge
from switchboard.memory.v1 import memory_pb2

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def make_note(note_id: str, minutes: int = 0) -> Note:
    return Note(
        id=note_id,
        project_id="p",
        kind=1,
        title=note_id,
        body="b",
        update_time=T0 + timedelta(minutes=minutes),
    )


# Contract


def test_known_enum_values_follow_the_proto() -> None:
    assert set(memory_pb2.NoteKind.values()) - {memory_pb2.NOTE_KIND_UNSPECIFIED} == NOTE_KINDS
    assert set(memory_pb2.ChatMode.values()) - {memory_pb2.CHAT_MODE_UNSPECIFIED} == CHAT_MODES


# Tokenising


@pytest.mark.parametrize(
    ("text", "terms"),
    [
        ("Décision : base de données", ["decision", "base", "de", "donnees"]),
        ("ÉLÈVE naïve Çà où", ["eleve", "naive", "ca", "ou"]),
        ("gRPC/HTTP+SSE, v2_beta", ["grpc", "http", "sse", "v2", "beta"]),
        ("a I x 42 y7", ["42", "y7"]),  # one-character terms are dropped
        ("Straße ﬁle", ["strasse", "file"]),  # casefold and compatibility forms
        ("Привет, мир", ["привет", "мир"]),  # other scripts stay
        ("", []),
        ("  ?! -- ", []),
    ],
)
def test_tokenize(text: str, terms: list[str]) -> None:
    assert tokenize(text) == terms


def test_recall_weights_query_over_persona() -> None:
    weights = recall_weights("Décision DB", "architect, décision maker")
    assert weights == {"decision": 1.0, "db": 1.0, "architect": PERSONA_WEIGHT, "maker": PERSONA_WEIGHT}
    assert recall_weights("", "") == {} and recall_weights("a ?", "b") == {}


def test_note_terms_cover_title_body_and_tags() -> None:
    assert note_terms("Titre", "Corps", ["Étiquette", "x"]) == ["titre", "corps", "etiquette"]


# BM25


def test_bm25_scores_only_matching_documents() -> None:
    documents = [["postgres", "runs"], ["sqlite", "dev"], []]
    scores = bm25_scores({"postgres": 1.0}, documents)
    assert scores[0] > 0 and scores[1] == 0 and scores[2] == 0


def test_bm25_no_documents_or_no_terms() -> None:
    assert bm25_scores({"x": 1.0}, []) == []
    assert bm25_scores({}, [["x"]]) == [0.0]
    assert bm25_scores({"x": 1.0}, [[], []]) == [0.0, 0.0]  # empty documents: no division by zero


def test_bm25_rare_terms_weigh_more() -> None:
    documents = [["common", "rare"], ["common", "other"], ["common", "more"]]
    rare, common_only, _ = bm25_scores({"common": 1.0, "rare": 1.0}, documents)
    assert rare > common_only > 0


def test_bm25_term_frequency_saturates_and_long_documents_are_normalised() -> None:
    once, twice, many = bm25_scores({"x": 1.0}, [["x", "a"], ["x", "x"], ["x"] * 50])
    assert twice > once
    short, long = bm25_scores({"x": 1.0}, [["x", "a"], ["x", *["filler"] * 30]])
    assert short > long
    # k1 bounds the contribution of one term: never more than (k1 + 1) * idf.
    assert many < 2.2 * once


def test_bm25_weights_scale_the_score() -> None:
    documents = [["alpha", "pad"], ["beta", "pad"]]
    alpha, beta = bm25_scores({"alpha": 1.0, "beta": PERSONA_WEIGHT}, documents)
    assert beta == pytest.approx(alpha * PERSONA_WEIGHT)


# Ranking and limits


def test_rank_drops_zero_sorts_by_score_then_recency_then_id() -> None:
    old, new, top, zero = make_note("old", 0), make_note("new", 5), make_note("top", 1), make_note("zero", 9)
    same_time = [make_note("b", 3), make_note("a", 3)]
    scored = [(old, 1.0), (zero, 0.0), (new, 1.0), (top, 2.0), (same_time[0], 0.5), (same_time[1], 0.5)]
    assert [n.id for n, _ in rank(scored, 10)] == ["top", "new", "old", "a", "b"]
    assert [n.id for n, _ in rank(scored, 2)] == ["top", "new"]
    assert rank([], 5) == []


def test_recall_limit() -> None:
    assert recall_limit(0) == 5
    assert recall_limit(7) == 7
    assert recall_limit(MAX_RECALL_LIMIT + 1) == MAX_RECALL_LIMIT
    with pytest.raises(InvalidArgument):
        recall_limit(-1)


# Settings


def test_settings_changes_only_masked_fields() -> None:
    values = SettingsValues(
        display_name="  Ann ",
        avatar={"emoji": "🦊", "hat": {"colour": "red", "size": 2.0}},
        instruction_page_ids=["p1", " p2", "p1"],
        chat_mode=2,
        default_model="m",
    )
    assert settings_changes(values, {"display_name"}) == {"display_name": "Ann"}
    changes = settings_changes(values, {"instruction_page_ids", "chat_mode", "avatar"})
    assert changes == {
        "instruction_page_ids_json": json.dumps(["p1", "p2"]),
        "chat_mode": 2,
        "avatar_json": '{"emoji":"🦊","hat":{"colour":"red","size":2.0}}',
    }
    # An empty avatar in the mask clears it back to the default.
    assert settings_changes(SettingsValues(), {"avatar"}) == {"avatar_json": "{}"}


@pytest.mark.parametrize(
    ("values", "path", "error"),
    [
        (SettingsValues(display_name="x" * 101), "display_name", TooLarge),
        # The contract's Struct makes any avatar an object; its size is still bounded.
        (SettingsValues(avatar={"emoji": "x" * 16_400}), "avatar", TooLarge),
        (SettingsValues(avatar={"hat": ["é" * 1000] * 17}), "avatar", TooLarge),
        (SettingsValues(chat_mode=0), "chat_mode", InvalidArgument),
        (SettingsValues(chat_mode=3), "chat_mode", InvalidArgument),
        (SettingsValues(instruction_page_ids=["ok", ""]), "instruction_page_ids", InvalidArgument),
    ],
)
def test_settings_changes_rejects(values: SettingsValues, path: str, error: type[DomainError]) -> None:
    with pytest.raises(error) as raised:
        settings_changes(values, {path})
    assert type(raised.value) is error
    assert raised.value.metadata["field"] == f"settings.{path}"
