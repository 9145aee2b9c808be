"""The Skill Router's parts without a database: lexical scoring, the index
(hybrid candidates fused by weighted RRF), the decision, the arbiter seam."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from services.router.catalog import BUILTINS, CATALOG, PRESETS
from services.router.skill_router import (
    MAX_CANDIDATES,
    ArbiterPrompt,
    Branch,
    Candidate,
    IndexedSkill,
    SkillIndex,
    Thresholds,
    decide,
    lexical_score,
    parse_arbiter_answer,
    route,
    skill_terms,
    tokenize,
)
from services.shared.embeddings import HashingEmbedder, load_embedder
from services.shared.search import RRF_K

T = Thresholds(high=0.6, low=0.3)


def candidate(name: str, score: float) -> Candidate:
    return Candidate(skill_id=f"id-{name}", name=name, lexical_score=score, fused_score=score)


def indexed(name: str, description: str, *, builtin: bool = False, auto_use: bool = True) -> IndexedSkill:
    return IndexedSkill(f"id-{name}", name, description, f"body of {name}", builtin, auto_use)


async def catalog_index(embedder: str = "hashing") -> SkillIndex:
    index = SkillIndex(load_embedder(embedder))
    await index.rebuild(
        [
            IndexedSkill(s["id"], s["name"], s["description"], s["body"], s["builtin"], s["auto_use"])
            for s in CATALOG
        ],
        revision=1,
    )
    return index


class CountingEmbedder(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]):  # type: ignore[no-untyped-def]
        self.texts.extend(texts)
        return super().embed(texts)


class ScriptedArbiter:
    """A test arbiter: answers what it is told, remembers what it was asked."""

    name = "test-arbiter"

    def __init__(self, answer: str, fail: bool = False) -> None:
        self.answer, self.fail = answer, fail
        self.asked: list[tuple[str, list[tuple[str, str]]]] = []

    def prompt(self, request: str, candidates: Sequence[tuple[str, str]]) -> ArbiterPrompt:
        self.asked.append((request, list(candidates)))
        return ArbiterPrompt("pick one", f"{request} among {[name for name, _ in candidates]}")

    async def arbitrate(self, prompt: ArbiterPrompt) -> str:
        if self.fail:
            raise TimeoutError("no answer in 2 s")
        return self.answer


def test_catalog_has_17_presets_and_6_builtins_with_unique_names_and_ids() -> None:
    assert len(PRESETS) == 17 and len(BUILTINS) == 6
    assert all(not s["builtin"] for s in PRESETS) and all(s["builtin"] for s in BUILTINS)
    assert len({s["name"] for s in CATALOG}) == len({s["id"] for s in CATALOG}) == 23
    assert all(len(s["description"]) > 60 and s["body"] for s in CATALOG)


def test_tokenize_folds_accents_case_plurals_and_drops_stop_words() -> None:
    assert tokenize("Les RÉUNIONS de l'équipe, puis les actions !") == ["reunion", "equipe", "puis", "action"]
    assert tokenize("the status of the business summaries") == ["status", "business", "summary"]
    assert tokenize("") == [] and tokenize("a I à") == []


def test_lexical_score_is_bounded_and_needs_several_shared_words() -> None:
    terms = skill_terms("meeting-notes-to-actions", "Turn meeting notes into action items")
    assert lexical_score(tokenize("turn my meeting notes into action items"), terms) == 1.0
    assert lexical_score(tokenize("notes"), terms) == pytest.approx(1 / 3)  # one shared word: weak evidence
    assert lexical_score(tokenize("what is the weather tomorrow"), terms) == 0.0
    assert lexical_score([], terms) == 0.0
    diluted = lexical_score(tokenize("meeting notes action items budget paris weather lunch"), terms)
    assert 0.0 < diluted < 1.0
    assert (
        lexical_score(tokenize("compte rendu de REUNION"), skill_terms("x", "compte rendu de réunion")) == 1.0
    )


@pytest.mark.parametrize("embedder", ["hashing", "use-multilingual-v3"])
async def test_candidates_fuse_both_rankings_by_score_weighted_rrf(embedder: str) -> None:
    """Weighted RRF of both rankings; with a cross-lingual embedder, never
    below the embedding ranking alone."""
    index = await catalog_index(embedder)
    text = "Turn these meeting notes into action items with owners"
    query = await index.embed_query(text)
    ranked = index.candidates(text, query, SkillIndex.default_eligible)
    top = ranked[0]
    assert top.name == "meeting-notes-to-actions" and top.lexical_rank == 1 and top.embedding_rank == 1
    expected = (top.lexical_score / (RRF_K + 1) + top.embedding_score / (RRF_K + 1)) / (2 / (RRF_K + 1))
    assert top.fused_score == pytest.approx(expected, abs=1e-5)
    for c in ranked:
        lex = c.lexical_score / (RRF_K + c.lexical_rank) if c.lexical_rank else 0.0
        emb = c.embedding_score / (RRF_K + c.embedding_rank) if c.embedding_rank else 0.0
        both, alone = (lex + emb) * (RRF_K + 1) / 2, emb * (RRF_K + 1)
        floor = alone if index.embedder.cross_lingual else 0.0
        assert c.fused_score == pytest.approx(max(both, floor), abs=1e-5)
    assert [c.fused_score for c in ranked] == sorted((c.fused_score for c in ranked), reverse=True)
    assert len(ranked) <= MAX_CANDIDATES
    # Built-ins are never candidates, however well they match.
    translated = index.candidates(
        "Translate this text into another language",
        await index.embed_query("Translate"),
        SkillIndex.default_eligible,
    )
    assert not {c.name for c in translated} & {s["name"] for s in BUILTINS}


async def test_each_ranking_is_the_head_of_the_whole_catalog_ranked_however_big() -> None:
    """The lexical and embedding rankings read only what the request touches
    and the head of the cosine ranking (services/router/skill_router.py), yet
    are exactly what ranking every eligible skill would give: lexical by
    score then name, embedding by cosine then catalog order; with few
    eligible skills the embedding search widens until it has them."""
    import random

    import numpy as np

    from services.router.skill_router import embedding_text

    rng = random.Random(3)
    verbs, things = (
        ["draft", "plan", "review", "track"],
        ["budget", "forecast", "invoice", "roadmap", "board"],
    )
    skills = [
        indexed(
            f"skill-{i:03d}-{rng.choice(things)}",
            f"{rng.choice(verbs)} the {rng.choice(things)} and the {rng.choice(things)} for the team",
            auto_use=i % 5 != 0,
        )
        for i in range(600)
    ]
    index = SkillIndex(load_embedder("hashing"))
    await index.rebuild(skills, revision=1)
    matrix = index.embedder.embed([embedding_text(s.name, s.description) for s in skills])
    eligibility = {
        "default": SkillIndex.default_eligible,
        "one in seven": lambda s: int(s.name[6:9]) % 7 == 0,
        "a handful": lambda s: int(s.name[6:9]) in {5, 250, 599},
    }
    for text in ("draft the budget forecast for the board", "plan", "track invoice roadmap", "weather"):
        terms = set(tokenize(text))
        query = await index.embed_query(text)
        cosines = matrix @ query.reshape(-1)
        for name, eligible in eligibility.items():
            allowed = [i for i, s in enumerate(skills) if eligible(s)]
            scored = {
                skills[i].id: lexical_score(terms, skill_terms(skills[i].name, skills[i].description))
                for i in allowed
            }
            expected_lexical = sorted(
                (i for i, v in scored.items() if v > 0), key=lambda i: (-scored[i], index.skills[i].name)
            )[:MAX_CANDIDATES]
            lexical, top = index.lexical_top(terms, eligible)
            assert top == expected_lexical, (text, name)
            assert all(lexical[i] == scored[i] for i in top)
            by_cosine = sorted(allowed, key=lambda i: (-cosines[i], i))[:MAX_CANDIDATES]
            cosine = index.embedding_top(query, eligible)
            assert list(cosine) == [skills[i].id for i in by_cosine], (text, name)
            assert list(cosine.values()) == pytest.approx([max(0.0, float(cosines[i])) for i in by_cosine])
            assert np.all(np.array(list(cosine.values())) >= 0.0)


async def test_ineligible_skills_are_never_candidates() -> None:
    index = SkillIndex(load_embedder("hashing"))
    await index.rebuild(
        [
            indexed("expense-report", "fill in an expense report for a trip"),
            indexed("expense-report-manual", "fill in an expense report for a trip", auto_use=False),
            indexed("expense-report-builtin", "fill in an expense report for a trip", builtin=True),
            indexed("expense-report-blank", "   "),
        ],
        revision=1,
    )
    text = "fill in my expense report for the Lyon trip"
    ranked = index.candidates(text, await index.embed_query(text), SkillIndex.default_eligible)
    assert [c.name for c in ranked] == ["expense-report"]
    assert index.default_excluded == 3
    nothing = index.candidates(text, await index.embed_query(text), lambda s: False)
    assert nothing == []


async def test_rebuild_embeds_only_changed_descriptions() -> None:
    embedder = CountingEmbedder()
    index = SkillIndex(embedder)
    skills = [indexed("a-skill", "write the quarterly budget"), indexed("b-skill", "plan a team offsite")]
    await index.rebuild(skills, revision=1)
    assert len(embedder.texts) == 2 and index.revision == 1
    await index.rebuild([skills[0], indexed("b-skill", "plan a company offsite in June")], revision=2)
    assert len(embedder.texts) == 3 and "June" in embedder.texts[-1] and index.revision == 2
    await index.rebuild([skills[0]], revision=3)  # b deleted: nothing to embed, gone from the index
    assert len(embedder.texts) == 3 and set(index.skills) == {"id-a-skill"}


def test_decide_high_applies_at_most_max_auto_skills_above_high() -> None:
    candidates = [candidate("a", 0.9), candidate("b", 0.8), candidate("c", 0.7), candidate("d", 0.5)]
    chosen, branch, _ = decide(candidates, Thresholds(high=0.6, low=0.3, max_auto_skills=2))
    assert [c.name for c in chosen] == ["a", "b"] and branch is Branch.HIGH
    one, _, _ = decide(candidates, Thresholds(high=0.6, low=0.3, max_auto_skills=1))
    assert [c.name for c in one] == ["a"]
    only, _, _ = decide([candidate("a", 0.9), candidate("b", 0.59)], T)
    assert [c.name for c in only] == ["a"]


def test_decide_grey_zone_is_deterministic_at_the_midpoint_and_none_below_low() -> None:
    chosen, branch, why = decide([candidate("a", 0.5), candidate("b", 0.4)], T)
    assert [c.name for c in chosen] == ["a"] and branch is Branch.GREY_DETERMINISTIC and "midpoint" in why
    chosen, branch, why = decide([candidate("a", 0.35)], T)
    assert chosen == [] and branch is Branch.GREY_DETERMINISTIC and why.startswith("none")
    chosen, branch, _ = decide([candidate("a", 0.29)], T)
    assert chosen == [] and branch is Branch.NONE
    chosen, branch, why = decide([], T)
    assert chosen == [] and branch is Branch.NONE and "no candidate" in why


def test_parse_arbiter_answer_accepts_only_a_candidate_name() -> None:
    names = {"email-reply-draft", "customer-support-reply"}
    assert (
        parse_arbiter_answer("Email-Reply-Draft.\nBecause the user quotes a mail.", names)
        == "email-reply-draft"
    )
    assert parse_arbiter_answer("`customer-support-reply`", names) == "customer-support-reply"
    assert parse_arbiter_answer("none", names) is None
    assert parse_arbiter_answer("translate", names) is None  # not a grey candidate
    assert parse_arbiter_answer("", names) is None


async def test_grey_zone_with_an_arbiter_is_grey_llm_and_records_its_raw_answer() -> None:
    arbiter = ScriptedArbiter("b\n" + "because " * 200)
    grey = [candidate("a", 0.5), candidate("b", 0.4), candidate("c", 0.1)]
    descriptions = {c.skill_id: f"description of {c.name}" for c in grey}
    chosen, decision = await route("some request", grey, descriptions, T, arbiter, arbitration_allowed=True)
    assert [c.name for c in chosen] == ["b"]
    assert decision.branch is Branch.GREY_LLM and decision.arbiter == "test-arbiter"
    assert decision.arbiter_answer.startswith("b\nbecause") and len(decision.arbiter_answer) == 500
    assert decision.arbitration_allowed and "chose b" in decision.explanation
    # Only the grey candidates (>= low) are shown to the arbiter, with their descriptions.
    assert arbiter.asked == [("some request", [("a", "description of a"), ("b", "description of b")])]
    # The record keeps the prompt as the arbiter made it, and its reason (cut to 300).
    assert (decision.arbiter_instructions, decision.arbiter_question) == (
        "pick one",
        "some request among ['a', 'b']",
    )
    assert decision.arbiter_justification.startswith("because because") and (
        len(decision.arbiter_justification) == 300 and decision.arbiter_justification.endswith("…")
    )
    none_arbiter = ScriptedArbiter("none")
    chosen, decision = await route("x", grey, descriptions, T, none_arbiter, arbitration_allowed=True)
    assert chosen == [] and decision.branch is Branch.GREY_LLM and decision.arbiter_answer == "none"


async def test_offline_or_disabled_arbitration_is_fully_deterministic() -> None:
    arbiter = ScriptedArbiter("b")
    grey = [candidate("a", 0.5), candidate("b", 0.4)]
    descriptions = {c.skill_id: c.name for c in grey}
    chosen, decision = await route("x", grey, descriptions, T, arbiter, arbitration_allowed=False)
    assert [c.name for c in chosen] == ["a"] and arbiter.asked == []
    assert decision.branch is Branch.GREY_DETERMINISTIC and decision.arbiter == "deterministic"
    assert "not allowed" in decision.explanation and "midpoint" in decision.arbiter_answer
    chosen, decision = await route("x", grey, descriptions, T, None, arbitration_allowed=True)
    assert decision.branch is Branch.GREY_DETERMINISTIC and "no arbiter" in decision.explanation


async def test_a_failing_arbiter_falls_back_to_the_midpoint_and_says_so() -> None:
    grey = [candidate("a", 0.5)]
    chosen, decision = await route("x", grey, {"id-a": "a"}, T, ScriptedArbiter("", fail=True), True)
    assert [c.name for c in chosen] == ["a"] and decision.branch is Branch.GREY_DETERMINISTIC
    assert "TimeoutError" in decision.arbiter_answer and "arbiter failed" in decision.explanation
    # Asked, though unanswered: the question stays in the record.
    assert decision.arbiter_question == "x among ['a']" and decision.arbiter_justification == ""


async def test_high_and_none_never_ask_the_arbiter() -> None:
    arbiter = ScriptedArbiter("a")
    for candidates, branch in (([candidate("a", 0.9)], Branch.HIGH), ([candidate("a", 0.1)], Branch.NONE)):
        _, decision = await route("x", candidates, {"id-a": "a"}, T, arbiter, True)
        assert decision.branch is branch and decision.arbiter == "" and decision.arbiter_answer == ""
    assert arbiter.asked == []


async def test_a_request_for_a_built_in_task_gets_no_skill_and_no_arbiter() -> None:
    """Whatever the scores, a request for a built-in task (request_parts.py)
    applies nothing and asks no arbiter; the record says which task."""
    arbiter = ScriptedArbiter("a")
    for candidates in ([candidate("a", 0.9)], [candidate("a", 0.3)]):
        chosen, decision = await route(
            "Translate this: a", candidates, {"id-a": "a"}, T, arbiter, True, builtin_task="translate"
        )
        assert chosen == [] and decision.branch is Branch.NONE and decision.builtin_task == "translate"
        assert "built-in task translate" in decision.explanation
    assert arbiter.asked == []
