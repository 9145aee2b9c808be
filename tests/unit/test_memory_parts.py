"""Pure parts of notes, import and live state: the duplicate hash, memory-file
parsing, import paths, and the live-state diff."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from services.memory.context.domain import parse_memory_file, relative_path
from services.memory.context.live_state import EventType, Removal, changes
from services.memory.context.models import LiveState
from services.memory.notes.domain import content_hash
from services.memory.notes.lexical import LexicalIndex, bm25_scores, tokenize
from services.shared.errors import InvalidArgument

SEED = Path(__file__).parents[1] / "fixtures" / "memory" / "project" / ".ideai" / "memory"
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def test_content_hash_ignores_case_accents_punctuation_spacing() -> None:
    assert content_hash("Décision : BD", "Nous  utilisons\nPostgreSQL.") == content_hash(
        "decision bd", "nous utilisons postgresql"
    )
    assert content_hash("a", "b c") != content_hash("a b", "c")  # the title/body split counts
    assert content_hash("x", "postgres") != content_hash("x", "postgresql")


def test_parse_the_seed_memory_file() -> None:
    path = SEED / "agent-context-memory-and-profile-handoff.md"
    parsed = parse_memory_file(str(path), path.read_text())
    assert (parsed.source, parsed.kind, parsed.title) == (
        "agent-context-memory-and-profile-handoff",
        1,
        "Agent Context, Memory, and Profile Handoff",
    )
    assert (
        parsed.body.startswith("Decisions sur l'injection")
        and "## Practical Classification Rule" in parsed.body
    )


def test_parse_without_front_matter_needs_a_kind() -> None:
    with pytest.raises(InvalidArgument, match="metadata.type"):
        parse_memory_file("memory/x.md", "# Title\nbody")
    parsed = parse_memory_file("memory/x.md", "---\ntype: fact\ntags: solo\n---\nplain body")
    assert (parsed.source, parsed.title, parsed.tags, parsed.kind) == ("x", "x", ["solo"], 4)


@pytest.mark.parametrize(
    ("path", "relative"),
    [
        (".ideai/CONTEXT.md", "CONTEXT.md"),
        ("CONTEXT.md", "CONTEXT.md"),
        ("./.ideai/memory/a.md", "memory/a.md"),
        ("memory\\b.md", "memory/b.md"),
        (".ideai/memory/sub/c.md", None),
        (".ideai/memory/../../x.md", None),
        (".ideai/memory/.md", None),
        ("docs/CONTEXT.md", None),
    ],
)
def test_relative_path(path: str, relative: str | None) -> None:
    assert relative_path(path) == relative


def test_lexical_index_matches_bm25_and_only_touches_matching_documents() -> None:
    documents = [tokenize("postgres runs here"), tokenize("sqlite for dev"), []]
    scores = LexicalIndex(documents).scores({"postgres": 1.0, "dev": 0.5})
    assert list(scores) == bm25_scores({"postgres": 1.0, "dev": 0.5}, documents)
    assert scores[0] > 0 and scores[1] > 0 and scores[2] == 0


def entry(agent: str, activity: str, expires_in: int) -> LiveState:
    return LiveState(
        agent_id=agent, activity=activity, update_time=T0, expire_time=T0 + timedelta(seconds=expires_in)
    )


def test_live_changes_removals_first_then_sets() -> None:
    before = {
        "qa": entry("qa", "testing", 10),
        "main": entry("main", "planning", 100),
        "dev": entry("dev", "coding", 100),
    }
    after = {
        "main": entry("main", "planning", 100),
        "dev": entry("dev", "reviewing", 100),
        "ops": entry("ops", "deploy", 100),
    }
    events = changes(before, after, T0 + timedelta(seconds=20))
    assert [(e.type, e.entries[0].agent_id, e.removal) for e in events] == [
        (EventType.REMOVED, "qa", Removal.EXPIRED),
        (EventType.SET, "dev", None),
        (EventType.SET, "ops", None),
    ]
    deleted = changes({"qa": entry("qa", "x", 100)}, {}, T0)
    assert deleted[0].removal == Removal.DELETED
