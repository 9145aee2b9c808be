"""Seed 002 T-08: the Skill Router on the labelled fixture. The shipped
thresholds are the ones the fit finds with the default embedder (minilm),
their precision and recall are the ones docs/router.md states, and every
decision is recorded in full. Loads the real model once (about 3 s)."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from services.router import fit
from services.router.catalog import BUILTINS, PRESETS
from services.router.settings import RouterSettings
from services.router.skill_router import Branch, SkillIndex, Thresholds, route

FIXTURE = Path(__file__).parents[1] / "fixtures/router/skill_requests.json"
DEFAULTS = RouterSettings()
SHIPPED = Thresholds(DEFAULTS.high_threshold, DEFAULTS.low_threshold, DEFAULTS.max_auto_skills)
# docs/router.md, "Fitted thresholds".
PRECISION, RECALL = 0.933, 0.875


@pytest.fixture(scope="module")
def requests() -> list[fit.Labelled]:
    return fit.load_fixture(FIXTURE)


# Module-scoped and synchronous: the model is loaded and the fixture scored once.
@pytest.fixture(scope="module")
def minilm_index() -> SkillIndex:
    return asyncio.run(fit.default_index("minilm"))


@pytest.fixture(scope="module")
def scored(minilm_index: SkillIndex, requests: list[fit.Labelled]) -> list[fit.Scored]:
    return asyncio.run(fit.score(minilm_index, requests))


def test_fixture_has_ten_of_each_kind_in_french_and_english(requests: list[fit.Labelled]) -> None:
    kinds = Counter(r.kind for r in requests)
    assert kinds["match"] >= 10 and kinds["none"] >= 10 and kinds["grey"] >= 10
    assert {r.lang for r in requests} >= {"en", "fr"}
    presets, builtins = {s["name"] for s in PRESETS}, {s["name"] for s in BUILTINS}
    assert all(r.expected in presets for r in requests if r.kind == "match")
    assert all(r.expected is None for r in requests if r.kind == "none")
    # A label never asks for a built-in: they are never chosen automatically.
    assert not {r.expected for r in requests} & builtins
    assert len({r.text for r in requests}) == len(requests)


def test_shipped_thresholds_are_the_fitted_ones(scored: list[fit.Scored]) -> None:
    best, plateau = fit.fit(scored)
    assert (best.high, best.low) == (SHIPPED.high, SHIPPED.low)
    assert (SHIPPED.high, SHIPPED.low) in plateau


def test_precision_and_recall_at_the_shipped_thresholds(scored: list[fit.Scored]) -> None:
    result = fit.evaluate(scored, SHIPPED)
    assert result.precision == pytest.approx(PRECISION, abs=5e-4)
    assert result.recall == pytest.approx(RECALL, abs=5e-4)
    by_kind: dict[str, list[fit.Outcome]] = {}
    for outcome in result.outcomes:
        by_kind.setdefault(outcome.kind, []).append(outcome)
    # Every precise request gets exactly its skill; no "none" request gets any.
    assert all(o.applied == [o.expected] for o in by_kind["match"]), by_kind["match"]
    assert all(o.applied == [] for o in by_kind["none"]), by_kind["none"]


async def test_every_decision_is_recorded_in_full(scored: list[fit.Scored], minilm_index: SkillIndex) -> None:
    branches = set()
    for item in scored:
        descriptions = {c.skill_id: minilm_index.skills[c.skill_id].description for c in item.candidates}
        chosen, decision = await route(item.request.text, item.candidates, descriptions, SHIPPED, None, False)
        branches.add(decision.branch)
        assert (decision.high_threshold, decision.low_threshold) == (SHIPPED.high, SHIPPED.low)
        assert decision.max_auto_skills == 2 and decision.explanation
        assert 1 <= len(decision.candidates) <= 8
        for c in decision.candidates:
            assert c.skill_id and c.name and 0 <= c.fused_score <= 1
            assert c.lexical_rank or c.embedding_rank
            assert (c.lexical_rank == 0) or c.lexical_score > 0
        if decision.branch is Branch.GREY_DETERMINISTIC:
            assert decision.arbiter == "deterministic" and decision.arbiter_answer
        assert len(chosen) <= 2
    assert branches == {Branch.HIGH, Branch.GREY_DETERMINISTIC, Branch.NONE}


async def test_a_counter_example_counts_against_the_skill_it_rejects(minilm_index: SkillIndex) -> None:
    counter = fit.Labelled(
        "Turn these meeting notes into action items with owners", "counter", None, "meeting-notes-to-actions"
    )
    result = fit.evaluate(await fit.score(minilm_index, [counter]), SHIPPED)
    assert result.false_positives == 1 and result.precision == 0.0
