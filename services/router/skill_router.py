"""The Skill Router: hybrid candidates over
skill descriptions, the threshold decision, LLM arbitration in the grey zone,
and the decision record. No database and no gRPC here.

For a request:

1. **Candidates.** Two rankings over the skills the caller may get
   automatically (enabled, effective ``auto_use``, a description, never a
   built-in): lexical (:func:`lexical_score`, accent-folded words shared with
   the skill's name and description) and embedding (cosine between the
   request and the description, :mod:`services.shared.embeddings`), each cut
   to its top 8. They are fused by reciprocal rank fusion, k = 60
   (:func:`services.shared.search.rrf_fuse`), **weighted by the score that
   earned each rank**: ``fused = (lex / (60 + r_lex) + cos / (60 + r_emb)) /
   rrf_max(2)``, so a skill ranked first by both with perfect scores gets 1.0.
   Plain RRF only sees ranks: the best skill for "what is the capital of
   Australia?" would score like a perfect match, and no threshold could tell
   them apart. Weighted, the scores carry the evidence and the ranks order
   near-ties. With a cross-lingual embedder, the embedding ranking alone at
   full scale (``cos / (60 + r_emb) / rrf_max(1)``) is a floor of the fused
   score: a French request shares no word with an English description, and
   a lexical ranking that cannot see the match must not halve it (on the
   labelled fixture it did: cross-lingual matches at cosine 0.5 fused to
   0.25, in the grey zone, below same-language skills that shared one stray
   word). The hashing embedder measures spelling, which the lexical ranking
   sees too: no floor. The best 8 fused are the candidates.
2. **Decision** on the best fused score. At or above the high threshold, the
   candidates above it are applied, at most ``max_auto_skills`` (``high``).
   Between the thresholds (the grey zone) an :class:`Arbiter` is asked to
   choose among the grey candidates or say "none" (``grey-llm``), unless the
   request is offline, arbitration is disabled or no arbiter is configured:
   then the best candidate is applied if it reaches the midpoint of the zone
   (``grey-deterministic``). Below the low threshold, nothing (``none``).
   Forced skills never reach this module (``forced``).

The candidates are scored on what the request asks, not on the text it
carries, and a request for a built-in task (translate, summarise...) gets
no automatic skill whatever the scores: services/router/request_parts.py.
The arbiter's question, its raw answer and its short justification are kept
in the decision record, so "Why this skill?" can show what it was asked.

The thresholds are fitted on the labelled fixture by ``python -m
services.router fit-thresholds`` (services/router/fit.py).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Protocol

import numpy as np

from services.shared.embeddings import Embedder, TextEmbedding, Vectors, embed, text_sha256
from services.shared.search import RRF_K, VectorIndex, rrf_fuse, rrf_max
from services.shared.text import fold

# Candidates of each ranking and of the fused list: the top 8.
MAX_CANDIDATES = 8
# How much of the embedding ranking is sorted first (widened while fewer than
# MAX_CANDIDATES of it are eligible): a catalog of 10,000 skills then costs
# a matrix product, not a sort of every skill.
EMBEDDING_DEPTH = 64
# The scores saturate from this many distinct shared words (see lexical_score).
EVIDENCE_WORDS = 3
# A long request (pasted notes...) is judged as if it had at most this many
# distinct content words, so the material it carries does not dilute the
# instruction around it to nothing.
COVERAGE_DENOMINATOR_CAP = 12
# The arbiter's raw answer kept in the decision record.
ARBITER_ANSWER_MAX_CHARS = 500
# The arbiter's justification (its answer after the name line) kept.
ARBITER_JUSTIFICATION_MAX_CHARS = 300
# The arbiter's question kept in the decision record, which a run keeps:
# a run holds references, not copies of big content, so a question over
# this (a long pasted request) is kept cut, marked with "…".
ARBITER_QUESTION_MAX_CHARS = 4_000
# Grey candidates shown to the arbiter.
MAX_ARBITRATED = 3
DETERMINISTIC_ARBITER = "deterministic"
NONE_ANSWER = "none"

_WORD = re.compile(r"[a-z0-9]+")
# Accent-folded, lower case. Function words and request filler, English and French.
_STOPWORDS = frozenset(
    """
    a about all also am an and any are as at be been but by can could do does for from get give got had has
    have he her here him his how i if in into is it its just let me my need no not now of on or our out
    please she so some than that the their them there these they this those to up us want was we were what
    when where which who why will with would you your
    au aux avec ce ces cet cette comment dans de des du elle en est et etre il ils je la le les leur lui ma
    mais me merci mes moi mon ne nous on ou par pas peux peut pour pouvez qu que quel quelle qui sa se ses
    si son stp sur svp ta te tes toi ton tu un une vos votre vous
    """.split()
)


class Branch(StrEnum):
    """Which branch decided: forced, high, the grey zone (by an LLM or by the
    rule), or none."""

    FORCED = "forced"
    HIGH = "high"
    GREY_LLM = "grey-llm"
    GREY_DETERMINISTIC = "grey-deterministic"
    NONE = "none"


@dataclass(frozen=True)
class Candidate:
    skill_id: str
    name: str
    lexical_score: float
    embedding_score: float = 0.0
    fused_score: float = 0.0
    # 1-based rank in each top 8, 0 when not in it.
    lexical_rank: int = 0
    embedding_rank: int = 0


@dataclass(frozen=True)
class Thresholds:
    high: float
    low: float
    max_auto_skills: int = 2

    @property
    def midpoint(self) -> float:
        return (self.low + self.high) / 2


@dataclass(frozen=True)
class Decision:
    """The decision record: enough, on its own, to explain a bad match."""

    branch: Branch
    high_threshold: float
    low_threshold: float
    candidates: tuple[Candidate, ...] = ()
    arbiter: str = ""
    arbiter_answer: str = ""
    arbiter_error: str = ""
    embedder: str = ""
    max_auto_skills: int = 0
    arbitration_allowed: bool = False
    explanation: str = ""
    excluded_count: int = 0
    # What the arbiter model was sent (its system message and the closed
    # question) and the reason it gave after its choice.
    arbiter_instructions: str = ""
    arbiter_question: str = ""
    arbiter_justification: str = ""
    # The built-in task the request asks for: no automatic skill.
    builtin_task: str = ""
    # What the skills were matched on when the request carries material.
    matched_text: str = ""


# Lexical scoring: pure functions.


def _stem(word: str) -> str:
    """Light plural folding only (English and French): items -> item,
    réunions -> reunion, summaries -> summary; "status", "business" unchanged."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    """Content words of ``text``: accent-insensitive, stop words and
    one-character words dropped, plurals folded; in order, repeats kept."""
    return [_stem(w) for w in _WORD.findall(fold(text)) if len(w) > 1 and w not in _STOPWORDS]


def skill_terms(name: str, description: str) -> frozenset[str]:
    """What a skill is matched on lexically: its name's words and its description's."""
    return frozenset(tokenize(name.replace("-", " ")) + tokenize(description))


def embedding_text(name: str, description: str) -> str:
    """What a skill is embedded as."""
    return f"{name.replace('-', ' ')}: {description}"


def lexical_score(request_terms: Collection[str], terms: frozenset[str]) -> float:
    """How well a request matches a skill's terms, in 0..1.

    ``coverage`` is the share of the request's distinct content words that
    the skill's terms contain (the denominator capped at
    ``COVERAGE_DENOMINATOR_CAP``); ``evidence`` grows with the number of
    shared words and saturates at ``EVIDENCE_WORDS``, so that one shared word
    never scores more than 1/3. The score is their product: 1.0 when every
    content word of a request of three or more is the skill's.
    """
    distinct = set(request_terms)
    if not distinct or not terms:
        return 0.0
    return shared_score(len(distinct & terms), len(distinct))


def shared_score(shared: int, distinct: int) -> float:
    """The lexical_score of a skill sharing ``shared`` of a request's
    ``distinct`` content words (both > 0)."""
    coverage = shared / min(distinct, COVERAGE_DENOMINATOR_CAP)
    evidence = min(1.0, shared / EVIDENCE_WORDS)
    return round(min(1.0, coverage) * evidence, 6)


# The index.


@dataclass(frozen=True)
class IndexedSkill:
    """What the router keeps in memory of a catalog skill."""

    id: str
    name: str
    description: str
    body: str
    builtin: bool
    auto_use: bool
    terms: frozenset[str] = field(default=frozenset(), compare=False)


class SkillIndex:
    """Every catalog skill's terms (with an inverted index, so a request only
    scores the skills sharing a word with it) and description embedding.
    Rebuilt from the catalog when its revision moves; only changed
    descriptions are embedded again.

    The vectors all come from ``embedder``: stored ones of another embedder
    or dimension are never loaded. When more skills lack a vector than a
    rebuild may embed on the spot (the embedder changed), the index has no
    embedding half (``missing_vectors`` > 0) until the reindex has run: the
    decision is then lexical only, and its record says so."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.revision: int | None = None
        self.skills: dict[str, IndexedSkill] = {}
        self._postings: dict[str, list[str]] = {}
        self._names: dict[str, str] = {}  # skill id -> name, the lexical ranking's tie-break
        self._vectors: VectorIndex[str] = VectorIndex([], np.zeros((0, embedder.dimension), np.float32))
        # (id, embedded text) -> its vector, so a rebuild embeds only what changed.
        self._cache: dict[tuple[str, str], Vectors] = {}
        self._default_excluded = 0
        self.missing_vectors = 0

    def __len__(self) -> int:
        return len(self.skills)

    @staticmethod
    def default_eligible(skill: IndexedSkill) -> bool:
        """A candidate for a user who changed nothing about this skill."""
        return skill.auto_use and not skill.builtin and bool(skill.description.strip())

    @property
    def default_excluded(self) -> int:
        """Skills that are no candidates for a user who changed nothing."""
        return self._default_excluded

    async def rebuild(
        self,
        skills: Sequence[IndexedSkill],
        revision: int,
        stored: Mapping[str, tuple[str, Vectors]] | None = None,
        embed_limit: int | None = None,
    ) -> dict[str, tuple[str, Vectors]]:
        """Re-indexes ``skills``. Vectors come from this index's cache, then
        from ``stored`` (skill id -> (text hash, vector), of this embedder),
        then are embedded, unless more than ``embed_limit`` are missing.
        Returns what it embedded, to be stored."""
        texts = {s.id: embedding_text(s.name, s.description) for s in skills}
        for skill_id, (digest, vector) in (stored or {}).items():
            if skill_id in texts and digest == text_sha256(texts[skill_id]):
                self._cache.setdefault((skill_id, texts[skill_id]), vector)
        missing = [s.id for s in skills if (s.id, texts[s.id]) not in self._cache]
        fresh: dict[str, tuple[str, Vectors]] = {}
        if missing and (embed_limit is None or len(missing) <= embed_limit):
            rows = await embed(self.embedder, [texts[i] for i in missing])
            for skill_id, row in zip(missing, rows, strict=True):
                self._cache[(skill_id, texts[skill_id])] = row
                fresh[skill_id] = (text_sha256(texts[skill_id]), row)
            missing = []
        self._cache = {
            key: self._cache[key] for key in ((s.id, texts[s.id]) for s in skills) if key in self._cache
        }
        indexed = {s.id: replace(s, terms=skill_terms(s.name, s.description)) for s in skills}
        postings: dict[str, list[str]] = {}
        for skill in indexed.values():
            for term in skill.terms:
                postings.setdefault(term, []).append(skill.id)
        ids = [] if missing else list(indexed)
        matrix = (
            np.stack([self._cache[(i, texts[i])] for i in ids])
            if ids
            else np.zeros((0, self.embedder.dimension), np.float32)
        )
        self.skills, self._postings, self._vectors = indexed, postings, VectorIndex(ids, matrix)
        self._names = {s.id: s.name for s in indexed.values()}
        self._default_excluded = sum(not self.default_eligible(s) for s in indexed.values())
        self.missing_vectors = len(missing)
        self.revision = revision
        return fresh

    async def embed_query(self, text: str, given: TextEmbedding | None = None) -> Vectors:
        """``text``'s row; ``given`` instead when it is this embedder's vector
        of exactly ``text`` (memory embedded the request for its recall)."""
        if given is not None and given.fits(self.embedder, text):
            return given.vector.reshape(1, -1)
        rows: Vectors = await embed(self.embedder, [text])
        return rows[0:1]

    def lexical_top(
        self, request_terms: set[str], eligible: Callable[[IndexedSkill], bool]
    ) -> tuple[dict[str, float], list[str]]:
        """(lexical score of every skill sharing a word with the request, the
        best MAX_CANDIDATES eligible ones by score then name). The scores
        depend on the shared words' count alone: counted from the postings
        and scored once per count, so that a big catalog costs little more
        than a small one; eligibility is asked only going down the ranking."""
        shared: Counter[str] = Counter()
        for term in request_terms:
            shared.update(self._postings.get(term, ()))
        score_of = {count: shared_score(count, len(request_terms)) for count in set(shared.values())}
        lexical = {skill_id: score_of[count] for skill_id, count in shared.items()}
        by_score: dict[float, list[str]] = {}
        for skill_id, score in lexical.items():
            by_score.setdefault(score, []).append(skill_id)
        top: list[str] = []
        for score in sorted(by_score, reverse=True):
            if score <= 0:
                break
            for skill_id in sorted(by_score[score], key=self._names.__getitem__):
                if eligible(self.skills[skill_id]):
                    top.append(skill_id)
                    if len(top) == MAX_CANDIDATES:
                        return lexical, top
        return lexical, top

    def embedding_top(self, query: Vectors, eligible: Callable[[IndexedSkill], bool]) -> dict[str, float]:
        """The cosine (at least 0) of the best MAX_CANDIDATES eligible skills,
        best first. Only the head of the ranking is sorted, widened while too
        few of it are eligible."""
        depth = min(len(self._vectors), EMBEDDING_DEPTH)
        while True:
            cosine: dict[str, float] = {}
            for skill_id, score in self._vectors.search(query, depth):
                if eligible(self.skills[skill_id]):
                    cosine[skill_id] = max(0.0, score)
                    if len(cosine) == MAX_CANDIDATES:
                        return cosine
            if depth >= len(self._vectors):
                return cosine
            depth = min(len(self._vectors), depth * 8)

    def candidates(
        self, text: str, query: Vectors, eligible: Callable[[IndexedSkill], bool]
    ) -> list[Candidate]:
        """The fused top 8 among the ``eligible`` skills, best first."""
        request_terms = set(tokenize(text))
        lexical, lexical_top = self.lexical_top(request_terms, eligible)
        cosine = self.embedding_top(query, eligible)
        embedding_top = [i for i in cosine if cosine[i] > 0]
        lexical_rrf = rrf_fuse([lexical_top])
        embedding_rrf = rrf_fuse([embedding_top])
        scale = rrf_max(2, RRF_K)
        alone = rrf_max(1, RRF_K) if self.embedder.cross_lingual else float("inf")
        ranked = []
        for skill_id in {*lexical_top, *embedding_top}:
            lex, emb = lexical.get(skill_id, 0.0), cosine.get(skill_id, 0.0)
            semantic = emb * embedding_rrf.get(skill_id, 0.0)
            fused = max((lex * lexical_rrf.get(skill_id, 0.0) + semantic) / scale, semantic / alone)
            ranked.append(
                Candidate(
                    skill_id,
                    self.skills[skill_id].name,
                    lexical_score=round(lex, 6),
                    embedding_score=round(emb, 6),
                    fused_score=round(fused, 6),
                    lexical_rank=lexical_top.index(skill_id) + 1 if skill_id in lexical_rrf else 0,
                    embedding_rank=embedding_top.index(skill_id) + 1 if skill_id in embedding_rrf else 0,
                )
            )
        ranked.sort(key=lambda c: (-c.fused_score, c.name))
        return ranked[:MAX_CANDIDATES]


# The decision.


@dataclass(frozen=True)
class ArbiterPrompt:
    """What the arbiter model is sent, exactly: kept in the decision record."""

    instructions: str
    question: str


class Arbiter(Protocol):
    """Decides the grey zone: a short closed LLM call.
    ``prompt`` writes the closed question from the request and the grey
    candidates' names and descriptions; ``arbitrate`` sends that prompt and
    returns the raw answer: one candidate's name or "none" on its first
    line, then a short reason (the router parses it and records it
    truncated, with the prompt)."""

    name: str

    def prompt(self, request: str, candidates: Sequence[tuple[str, str]]) -> ArbiterPrompt: ...

    async def arbitrate(self, prompt: ArbiterPrompt) -> str: ...


def decide(
    candidates: Sequence[Candidate], thresholds: Thresholds, builtin_task: str = ""
) -> tuple[list[Candidate], Branch, str]:
    """The deterministic decision over candidates sorted best first: the
    skills to apply, the branch, and why. A request for a built-in task
    (``builtin_task``, services/router/request_parts.py) gets none."""
    top = candidates[0].fused_score if candidates else 0.0
    if builtin_task:
        return (
            [],
            Branch.NONE,
            f"the request asks for the built-in task {builtin_task} (applied only when forced): "
            "no skill is applied automatically to the text it carries",
        )
    if candidates and top >= thresholds.high:
        chosen = [c for c in candidates if c.fused_score >= thresholds.high][: thresholds.max_auto_skills]
        return chosen, Branch.HIGH, f"{top:.3f} >= high {thresholds.high:.3f}"
    if candidates and top >= thresholds.low:
        best = candidates[0]
        if top >= thresholds.midpoint and thresholds.max_auto_skills > 0:
            return (
                [best],
                Branch.GREY_DETERMINISTIC,
                f"{best.name}: {top:.3f} >= midpoint {thresholds.midpoint:.3f}",
            )
        return (
            [],
            Branch.GREY_DETERMINISTIC,
            f"none: best {best.name} {top:.3f} < midpoint {thresholds.midpoint:.3f}",
        )
    summary = f"best {candidates[0].name} {top:.3f}" if candidates else "no candidate"
    return [], Branch.NONE, f"{summary} < low {thresholds.low:.3f}"


def parse_arbiter_answer(answer: str, names: Collection[str]) -> str | None:
    """The candidate the arbiter chose, or None for "none" and for anything
    that is not exactly one candidate's name (first line, quotes, a trailing
    period and case ignored)."""
    first = answer.strip().splitlines()[0] if answer.strip() else ""
    choice = first.strip().strip("`'\"*").rstrip(".").strip().lower()
    return choice if choice in names else None


def arbiter_justification(answer: str) -> str:
    """The arbiter's short reason: what follows the line naming its choice."""
    lines = answer.strip().splitlines()
    return truncate(" ".join(" ".join(lines[1:]).split()), ARBITER_JUSTIFICATION_MAX_CHARS)


def truncate(text: str, limit: int = ARBITER_ANSWER_MAX_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def route(
    text: str,
    candidates: Sequence[Candidate],
    descriptions: dict[str, str],
    thresholds: Thresholds,
    arbiter: Arbiter | None,
    arbitration_allowed: bool,
    builtin_task: str = "",
) -> tuple[list[Candidate], Decision]:
    """The decision over the candidates, with LLM arbitration in the grey
    zone when allowed and an arbiter exists; the record of it, with what the
    arbiter was asked."""
    chosen, branch, explanation = decide(candidates, thresholds, builtin_task)
    arbiter_name = DETERMINISTIC_ARBITER if branch is Branch.GREY_DETERMINISTIC else ""
    error = justification = ""
    prompt = ArbiterPrompt("", "")
    answer = explanation if branch is Branch.GREY_DETERMINISTIC else ""
    if branch is Branch.GREY_DETERMINISTIC and arbitration_allowed and arbiter is not None:
        grey = [c for c in candidates if thresholds.low <= c.fused_score][:MAX_ARBITRATED]
        prompt = arbiter.prompt(text, [(c.name, descriptions[c.skill_id]) for c in grey])
        try:
            raw = await arbiter.arbitrate(prompt)
        except Exception as exc:  # noqa: BLE001 - an arbiter failure falls back, recorded
            error = truncate(f"arbiter {arbiter.name} failed ({type(exc).__name__}: {exc})")
            answer = truncate(f"{error}; {explanation}")
            explanation = f"arbiter failed, decided at the midpoint: {explanation}"
        else:
            picked = parse_arbiter_answer(raw, {c.name for c in grey})
            chosen = [c for c in grey if c.name == picked][: thresholds.max_auto_skills]
            branch, arbiter_name, answer = Branch.GREY_LLM, arbiter.name, truncate(raw)
            justification = arbiter_justification(raw)
            explanation = f"grey zone, arbiter {arbiter.name} chose {picked or NONE_ANSWER}"
    elif branch is Branch.GREY_DETERMINISTIC:
        why = "arbitration not allowed" if not arbitration_allowed else "no arbiter configured"
        explanation = f"grey zone, {why}: {explanation}"
    return chosen, Decision(
        branch,
        thresholds.high,
        thresholds.low,
        tuple(candidates),
        arbiter=arbiter_name,
        arbiter_answer=answer,
        arbiter_error=error,
        max_auto_skills=thresholds.max_auto_skills,
        arbitration_allowed=arbitration_allowed,
        explanation=explanation,
        arbiter_instructions=prompt.instructions,
        arbiter_question=truncate(prompt.question, ARBITER_QUESTION_MAX_CHARS),
        arbiter_justification=justification,
        builtin_task=builtin_task,
    )
