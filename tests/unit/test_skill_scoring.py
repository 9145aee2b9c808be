"""The Skill Router's pure parts: tokenising, lexical scoring, the decision."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from services.router.domain import (
    Branch,
    Candidate,
    Thresholds,
    decide,
    lexical_score,
    score_skills,
    skill_terms,
    tokenize,
)
from services.router.models import Skill
from services.router.settings import RouterSettings

_MIGRATION = Path(__file__).parents[2] / "services/router/migrations/versions/0001_initial.py"


def _seed_skills() -> list[Skill]:
    spec = importlib.util.spec_from_file_location("router_0001", _MIGRATION)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [Skill(**row) for row in module.SEED_SKILLS]


SEED = _seed_skills()
AUTO_SKILLS = [s for s in SEED if s.auto_use and not s.builtin]
DEFAULTS = RouterSettings()
THRESHOLDS = Thresholds(DEFAULTS.high_threshold, DEFAULTS.low_threshold, DEFAULTS.max_auto_skills)


def candidate(name: str, score: float) -> Candidate:
    return Candidate(skill_id=f"id-{name}", name=name, lexical_score=score, fused_score=score)


def test_tokenize_folds_accents_case_plurals_and_drops_stop_words() -> None:
    assert tokenize("Les RÉUNIONS de l'équipe, puis les actions !") == ["reunion", "equipe", "puis", "action"]
    assert tokenize("the status of the business summaries") == ["status", "business", "summary"]
    assert tokenize("") == [] and tokenize("a I à") == []


def test_lexical_score_is_bounded_and_needs_several_shared_words() -> None:
    terms = skill_terms("meeting-notes-to-actions", "Turn meeting notes into action items")
    assert "meeting" in terms and "note" in terms and "action" in terms
    assert lexical_score(tokenize("turn my meeting notes into action items"), terms) == 1.0
    assert lexical_score(tokenize("notes"), terms) == pytest.approx(1 / 3)  # one shared word: weak evidence
    assert lexical_score(tokenize("what is the weather tomorrow"), terms) == 0.0
    assert lexical_score([], terms) == 0.0
    # Extra unrelated words lower the score; it stays within 0..1.
    diluted = lexical_score(tokenize("meeting notes action items budget paris weather lunch"), terms)
    assert 0.0 < diluted < 1.0


def test_lexical_score_is_accent_insensitive() -> None:
    terms = skill_terms("x", "Transformer un compte rendu de réunion en actions")
    assert lexical_score(tokenize("compte rendu de REUNION"), terms) == lexical_score(
        tokenize("compte rendu de réunion"), terms
    )
    assert lexical_score(tokenize("compte rendu de reunion"), terms) == 1.0


def test_long_request_is_not_diluted_to_nothing() -> None:
    terms = skill_terms("meeting-notes-to-actions", SEED[0].description)
    pasted = " ".join(f"word{i}" for i in range(200))
    score = lexical_score(
        tokenize(f"Turn these meeting notes into action items with owners: {pasted}"), terms
    )
    assert score >= THRESHOLDS.midpoint


def test_score_skills_ranks_best_first_with_fused_equal_to_lexical() -> None:
    ranked = score_skills("Draft a reply to this email from Marc", AUTO_SKILLS)
    assert ranked[0].name == "email-reply-draft"
    assert [c.fused_score for c in ranked] == sorted((c.fused_score for c in ranked), reverse=True)
    assert all(c.fused_score == c.lexical_score and c.embedding_score == 0.0 for c in ranked)


# A small labelled set checking the default thresholds (the 30-request set of
# seed 002 §8 replaces it when the full catalog lands).
LABELLED = [
    ("Turn these meeting notes into action items with owners", ["meeting-notes-to-actions"]),
    ("Extract the action items and decisions from this meeting", ["meeting-notes-to-actions"]),
    ("Transforme le compte rendu de la réunion en actions", ["meeting-notes-to-actions"]),
    ("Write the weekly status report for the Atlas project", ["weekly-status-report"]),
    ("Rédige le point d'avancement hebdomadaire du projet", ["weekly-status-report"]),
    ("Draft a reply to this email from Marc", ["email-reply-draft"]),
    ("Rédiger une réponse à ce courriel", ["email-reply-draft"]),
    ("What is the capital of Australia?", []),
    ("Quelle est la météo à Paris demain ?", []),
    ("Write a poem about autumn", []),
    ("How many days until the next release?", []),
    ("Translate this paragraph into German", []),
    ("Summarize this document into key points", []),
    ("notes", []),
    ("Prepare action items for the project", []),
]


@pytest.mark.parametrize(("text", "expected"), LABELLED)
def test_default_thresholds_on_labelled_requests(text: str, expected: list[str]) -> None:
    chosen, decision = decide(score_skills(text, AUTO_SKILLS), THRESHOLDS)
    assert [c.name for c in chosen] == expected, decision
    if expected:
        assert decision.branch is Branch.HIGH


def test_decide_high_applies_at_most_max_auto_skills_above_high() -> None:
    candidates = [candidate("a", 0.9), candidate("b", 0.8), candidate("c", 0.7), candidate("d", 0.5)]
    chosen, decision = decide(candidates, Thresholds(high=0.6, low=0.3, max_auto_skills=2))
    assert [c.name for c in chosen] == ["a", "b"]
    assert decision.branch is Branch.HIGH and decision.arbiter == ""
    assert [c.name for c in decision.candidates] == ["a", "b", "c", "d"]
    assert (decision.high_threshold, decision.low_threshold) == (0.6, 0.3)
    one, _ = decide(candidates, Thresholds(high=0.6, low=0.3, max_auto_skills=1))
    assert [c.name for c in one] == ["a"]
    # Only skills above the high threshold, even when fewer than the maximum.
    only, _ = decide([candidate("a", 0.9), candidate("b", 0.59)], Thresholds(0.6, 0.3, 2))
    assert [c.name for c in only] == ["a"]


def test_decide_grey_zone_is_deterministic_at_the_midpoint() -> None:
    thresholds = Thresholds(high=0.6, low=0.3)
    chosen, decision = decide([candidate("a", 0.5), candidate("b", 0.4)], thresholds)
    assert [c.name for c in chosen] == ["a"]
    assert decision.branch is Branch.GREY_DETERMINISTIC and decision.arbiter == "deterministic"
    assert "a" in decision.arbiter_answer
    chosen, decision = decide([candidate("a", 0.35)], thresholds)
    assert chosen == [] and decision.branch is Branch.GREY_DETERMINISTIC
    assert decision.arbiter_answer.startswith("none")


def test_decide_below_low_or_nothing_is_none() -> None:
    chosen, decision = decide([candidate("a", 0.29)], Thresholds(0.6, 0.3))
    assert chosen == [] and decision.branch is Branch.NONE and len(decision.candidates) == 1
    chosen, decision = decide([], Thresholds(0.6, 0.3))
    assert chosen == [] and decision.branch is Branch.NONE and decision.candidates == ()


def test_decision_keeps_the_top_eight_candidates() -> None:
    candidates = [candidate(f"s{i:02}", 0.1 - i / 1000) for i in range(12)]
    _, decision = decide(candidates, Thresholds(0.6, 0.3))
    assert [c.name for c in decision.candidates] == [f"s{i:02}" for i in range(8)]
