"""Rules of the router service: the skill catalog, the Skill Router (seed 002
P2-T11..T13, §7.3) and the ``Auto`` model router. No gRPC here.

The Skill Router, for a request:

* forced skills (``/name``) short-circuit it: they are returned, all of them,
  in the order given, and nothing is scored (branch ``forced``);
* otherwise every candidate skill (not built in, ``auto_use``, with a
  description) is scored against the request text (:func:`lexical_score`),
  the best eight are kept in the decision record, and the best score decides:
  at or above the high threshold, up to ``max_auto_skills`` skills above it
  are applied (``high``); in the grey zone between the thresholds the best
  candidate is applied only if it reaches the midpoint (``grey-deterministic``:
  this skeleton never asks an LLM); below the low threshold, none (``none``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from services.router.model_routing import ModelOption, ModelRoute, route_model
from services.router.models import Skill
from services.router.repository import RouterRepository
from services.shared.errors import InvalidArgument, NotFound, TooLarge
from services.shared.pagination import decode_token, encode_token, page_size

MAX_TEXT_CHARS = 32_000
MAX_FORCED_SKILLS = 16
# Candidates kept in the decision record (seed 002 P2-T11: top 8).
MAX_CANDIDATES = 8
# The scores saturate from this many distinct shared words (see lexical_score).
EVIDENCE_WORDS = 3
# A long request (pasted notes...) is judged as if it had at most this many
# distinct content words, so the material it carries does not dilute the
# instruction around it to nothing.
COVERAGE_DENOMINATOR_CAP = 12
DETERMINISTIC_ARBITER = "deterministic"

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
    """The branch names of seed 002 §7.3."""

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
    # Zero until the embedding index exists; fused_score is then the
    # reciprocal-rank fusion of both rankings, rescaled to 0..1.
    embedding_score: float = 0.0
    fused_score: float = 0.0


@dataclass(frozen=True)
class ChosenSkill:
    skill_id: str
    name: str
    forced: bool
    body: str


@dataclass(frozen=True)
class Decision:
    """The decision record: enough, on its own, to explain a bad match."""

    branch: Branch
    high_threshold: float
    low_threshold: float
    candidates: tuple[Candidate, ...] = ()
    arbiter: str = ""
    arbiter_answer: str = ""


@dataclass(frozen=True)
class SkillRoute:
    skills: tuple[ChosenSkill, ...]
    decision: Decision


@dataclass(frozen=True)
class Thresholds:
    high: float
    low: float
    max_auto_skills: int = 2

    @property
    def midpoint(self) -> float:
        return (self.low + self.high) / 2


# Scoring: pure functions.


def fold(text: str) -> str:
    """Lower case without accents: "Réunion" -> "reunion"."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


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
    """What a skill is matched on: its name's words and its description's."""
    return frozenset(tokenize(name.replace("-", " ")) + tokenize(description))


def lexical_score(request_terms: Sequence[str], terms: frozenset[str]) -> float:
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
    shared = len(distinct & terms)
    coverage = shared / min(len(distinct), COVERAGE_DENOMINATOR_CAP)
    evidence = min(1.0, shared / EVIDENCE_WORDS)
    return round(min(1.0, coverage) * evidence, 6)


def score_skills(text: str, skills: Sequence[Skill]) -> list[Candidate]:
    """Every skill scored against ``text``, best first (ties by name)."""
    request_terms = tokenize(text)
    scored = []
    for skill in skills:
        score = lexical_score(request_terms, skill_terms(skill.name, skill.description))
        scored.append(Candidate(skill.id, skill.name, lexical_score=score, fused_score=score))
    return sorted(scored, key=lambda c: (-c.fused_score, c.name))


def decide(candidates: Sequence[Candidate], thresholds: Thresholds) -> tuple[list[Candidate], Decision]:
    """The automatic decision over candidates sorted best first: the skills
    to apply and the decision record."""
    kept = tuple(candidates[:MAX_CANDIDATES])
    top = kept[0].fused_score if kept else 0.0

    def record(branch: Branch, arbiter: str = "", answer: str = "") -> Decision:
        return Decision(branch, thresholds.high, thresholds.low, kept, arbiter, answer)

    if kept and top >= thresholds.high:
        chosen = [c for c in kept if c.fused_score >= thresholds.high][: thresholds.max_auto_skills]
        return chosen, record(Branch.HIGH)
    if kept and top >= thresholds.low:
        best = kept[0]
        if top >= thresholds.midpoint and thresholds.max_auto_skills > 0:
            answer = f"{best.name}: {top:.3f} >= midpoint {thresholds.midpoint:.3f}"
            return [best], record(Branch.GREY_DETERMINISTIC, DETERMINISTIC_ARBITER, answer)
        answer = f"none: best {best.name} {top:.3f} < midpoint {thresholds.midpoint:.3f}"
        return [], record(Branch.GREY_DETERMINISTIC, DETERMINISTIC_ARBITER, answer)
    return [], record(Branch.NONE)


def _forced_name(raw: str) -> str:
    return raw.strip().removeprefix("/").strip().lower()


class RouterDomain:
    def __init__(
        self, repository: RouterRepository, thresholds: Thresholds, models: Sequence[ModelOption]
    ) -> None:
        self._repo = repository
        self._thresholds = thresholds
        self._models = tuple(models)

    async def list_skills(self, requested_size: int, token: str) -> tuple[Sequence[Skill], str]:
        size = page_size(requested_size)
        after = decode_token(token).get("after", "")
        if not isinstance(after, str):
            raise InvalidArgument("page_token is not a token this service issued", field="page_token")
        rows = await self._repo.list_skills(after, size + 1)
        next_token = encode_token({"after": rows[size - 1].name}) if len(rows) > size else ""
        return rows[:size], next_token

    async def route_skills(self, text: str, forced_skills: Sequence[str]) -> SkillRoute:
        if len(text) > MAX_TEXT_CHARS:
            raise TooLarge(f"text is longer than {MAX_TEXT_CHARS} characters", field="text")
        names = list(dict.fromkeys(n for n in map(_forced_name, forced_skills) if n))
        if len(names) > MAX_FORCED_SKILLS:
            raise InvalidArgument(f"at most {MAX_FORCED_SKILLS} forced skills", field="forced_skills")
        if names:
            return await self._forced(names)
        pool = {skill.id: skill for skill in await self._repo.auto_candidates()}
        chosen, decision = decide(score_skills(text, list(pool.values())), self._thresholds)
        return SkillRoute(
            tuple(ChosenSkill(c.skill_id, c.name, forced=False, body=pool[c.skill_id].body) for c in chosen),
            decision,
        )

    async def _forced(self, names: Sequence[str]) -> SkillRoute:
        """The user forced these: the router does not run, and drops none."""
        found = await self._repo.skills_named(names)
        for name in names:
            if name not in found:
                raise NotFound(f"skill {name!r} not found", skill=name)
        return SkillRoute(
            tuple(ChosenSkill(found[n].id, n, forced=True, body=found[n].body) for n in names),
            Decision(Branch.FORCED, self._thresholds.high, self._thresholds.low),
        )

    def route_model(self, text: str, requested_model: str, default_model: str) -> ModelRoute:
        if len(text) > MAX_TEXT_CHARS:
            raise TooLarge(f"text is longer than {MAX_TEXT_CHARS} characters", field="text")
        return route_model(self._models, text, requested_model, default_model)
