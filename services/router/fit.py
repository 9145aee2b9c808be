"""Fits the Skill Router's thresholds on the labelled fixture and reports
precision and recall: the default thresholds are the ones that pass the
fixture, not guessed values.

    python -m services.router fit-thresholds [--fixture PATH] [--embedder NAME] [--json]
    python -m services.router fit-thresholds --check HIGH LOW   # evaluate given thresholds only

Every request of the fixture is scored once against the default catalog
(services/router/catalog.py) and the fixture's own ``skills`` (described in
one language only, for the cross-lingual requests) exactly as the service
scores it (same index, same fusion), offline (deterministic grey zone). Then every pair low < high
on a grid of 0.01 is evaluated and the best is kept, in this order:

0. the pairs that reach ``PRECISION_FLOOR`` and ``RECALL_FLOOR`` in every
   language of the fixture separately, if any pair does (French is not
   allowed to pay for English, nor the other way round);
1. F0.5 of the applied skills against the labels (precision: applied skills
   that were the expected one; recall: expected skills that were applied).
   F0.5 weighs precision twice as much as recall: a wrong skill applied in
   silence costs more trust than a skill the user has to ask for by name
   (the first risk of automatic skills) - these are the "prudent defaults";
2. precision, then recall;
3. zone agreement: "match" requests decided in the high branch, "none"
   requests in the none branch, "grey" requests in the grey zone;
4. among the pairs that tie on all of these (a plateau), the one nearest
   the plateau's centre, so that the shipped pair does not sit on the edge
   where one request's score moving by 0.01 changes the result. ``margin``
   reports the distance from the nearest request's top score to the pair's
   thresholds and midpoint.

Counter-examples ("counter": a user said the skill `rejected` was not
relevant) count a false positive when that skill is applied again.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from services.router.catalog import CATALOG
from services.router.request_parts import split_request
from services.router.skill_router import (
    Branch,
    Candidate,
    IndexedSkill,
    SkillIndex,
    Thresholds,
    decide,
)
from services.shared.embeddings import EmbedderName, load_embedder

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_FIXTURE = ROOT / "tests/fixtures/router/skill_requests.json"
GRID_STEP = 0.01
KINDS = ("match", "none", "grey", "counter")
# What the shipped thresholds must reach in each language on the fixture.
PRECISION_FLOOR = 0.9
RECALL_FLOOR = 0.85


@dataclass(frozen=True)
class Labelled:
    text: str
    kind: str
    expected: str | None
    rejected: str | None = None
    lang: str = ""


@dataclass(frozen=True)
class Scored:
    request: Labelled
    candidates: tuple[Candidate, ...]
    # The built-in task the request asks for (request_parts.py): no skill.
    builtin_task: str = ""

    @property
    def top(self) -> float:
        return self.candidates[0].fused_score if self.candidates else 0.0


@dataclass(frozen=True)
class Outcome:
    text: str
    kind: str
    expected: str | None
    applied: list[str]
    branch: str
    top: float


@dataclass(frozen=True)
class Rates:
    precision: float
    recall: float
    true_positives: int
    false_positives: int
    false_negatives: int


def _rates(tp: int, fp: int, fn: int) -> Rates:
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return Rates(round(precision, 4), round(recall, 4), tp, fp, fn)


@dataclass(frozen=True)
class Evaluation:
    high: float
    low: float
    precision: float
    recall: float
    f1: float
    f05: float
    zone_agreement: float
    margin: float
    true_positives: int
    false_positives: int
    false_negatives: int
    outcomes: list[Outcome]
    # Precision and recall of the requests of each language.
    by_language: dict[str, Rates]

    @property
    def meets_floors(self) -> bool:
        return all(
            r.precision >= PRECISION_FLOOR and r.recall >= RECALL_FLOOR for r in self.by_language.values()
        )


def load_fixture(path: Path) -> list[Labelled]:
    data = json.loads(path.read_text(encoding="utf-8"))
    requests = [Labelled(**item) for item in data["requests"]]
    for item in requests:
        if item.kind not in KINDS:
            raise ValueError(f"{path}: unknown kind {item.kind!r} for {item.text!r}")
        if item.kind == "counter" and not item.rejected:
            raise ValueError(f"{path}: counter-example {item.text!r} names no rejected skill")
    return requests


def load_skills(path: Path) -> list[IndexedSkill]:
    """The default catalog and the fixture's own skills."""
    extra = json.loads(path.read_text(encoding="utf-8")).get("skills", [])
    return [
        IndexedSkill(s["id"], s["name"], s["description"], s["body"], s["builtin"], s["auto_use"])
        for s in CATALOG
    ] + [IndexedSkill(s["id"], s["name"], s["description"], s["body"], False, True) for s in extra]


async def default_index(embedder: str, fixture: Path = DEFAULT_FIXTURE) -> SkillIndex:
    index = SkillIndex(load_embedder(embedder))
    await index.rebuild(load_skills(fixture), revision=0)
    return index


async def score(index: SkillIndex, requests: Sequence[Labelled]) -> list[Scored]:
    """Each request's candidates as the service finds them: on its
    instruction, not on the text it carries (request_parts.py)."""
    scored = []
    for item in requests:
        parts = split_request(item.text)
        query = await index.embed_query(parts.instruction)
        candidates = index.candidates(parts.instruction, query, SkillIndex.default_eligible)
        scored.append(Scored(item, tuple(candidates), parts.builtin_task))
    return scored


def _zone_ok(kind: str, branch: Branch) -> bool:
    wanted = {
        "match": {Branch.HIGH},
        "none": {Branch.NONE},
        "grey": {Branch.GREY_DETERMINISTIC},
    }
    return branch in wanted.get(kind, set(Branch))


def evaluate(scored: Sequence[Scored], thresholds: Thresholds) -> Evaluation:
    counts: dict[str, list[int]] = {}  # language -> [tp, fp, fn]
    zone = 0
    outcomes = []
    margin = 1.0
    for item in scored:
        chosen, branch, _ = decide(item.candidates, thresholds, item.builtin_task)
        applied = [c.name for c in chosen]
        label = item.request
        tally = counts.setdefault(label.lang, [0, 0, 0])
        if label.kind == "counter":
            tally[1] += applied.count(label.rejected or "")
        else:
            hit = label.expected is not None and label.expected in applied
            tally[0] += int(hit)
            tally[1] += len(applied) - int(hit)
            tally[2] += int(label.expected is not None and not hit)
        zone += int(_zone_ok(label.kind, branch))
        margin = min(
            margin, *(abs(item.top - t) for t in (thresholds.low, thresholds.high, thresholds.midpoint))
        )
        outcomes.append(Outcome(label.text, label.kind, label.expected, applied, branch.value, item.top))
    tp, fp, fn = (sum(c[i] for c in counts.values()) for i in range(3))
    total = _rates(tp, fp, fn)
    precision, recall = total.precision, total.recall
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    f05 = 1.25 * precision * recall / (0.25 * precision + recall) if precision + recall else 0.0
    return Evaluation(
        thresholds.high,
        thresholds.low,
        precision,
        recall,
        round(f1, 4),
        round(f05, 4),
        round(zone / len(scored), 4) if scored else 0.0,
        round(margin, 4),
        tp,
        fp,
        fn,
        outcomes,
        {lang: _rates(*c) for lang, c in sorted(counts.items())},
    )


def fit(scored: Sequence[Scored], max_auto_skills: int = 2) -> tuple[Evaluation, list[tuple[float, float]]]:
    """The best (high, low) on the grid (see the module docstring), and the
    plateau of pairs that tie with it."""
    steps = [round(i * GRID_STEP, 2) for i in range(1, int(1 / GRID_STEP))]
    results = [
        evaluate(scored, Thresholds(high, low, max_auto_skills))
        for high in steps
        for low in steps
        if low < high
    ]

    def key(r: Evaluation) -> tuple[float, ...]:
        return (float(r.meets_floors), r.f05, r.precision, r.recall, r.zone_agreement)

    best = max(key(r) for r in results)
    plateau = [r for r in results if key(r) == best]
    centre = (sum(r.high for r in plateau) / len(plateau), sum(r.low for r in plateau) / len(plateau))
    chosen = min(plateau, key=lambda r: ((r.high - centre[0]) ** 2 + (r.low - centre[1]) ** 2, r.high, r.low))
    return chosen, [(r.high, r.low) for r in plateau]


def report(
    result: Evaluation, plateau: Sequence[tuple[float, float]], embedder: str, fixture: Path, verbose: bool
) -> str:
    lines = [
        f"fixture {fixture.relative_to(ROOT) if fixture.is_relative_to(ROOT) else fixture} "
        f"({len(result.outcomes)} requests), embedder {embedder}",
        f"high_threshold={result.high:.2f} low_threshold={result.low:.2f} "
        f"(grey-zone midpoint {(result.high + result.low) / 2:.3f})",
        f"precision={result.precision:.3f} recall={result.recall:.3f} f1={result.f1:.3f} "
        f"f0.5={result.f05:.3f} "
        f"zone_agreement={result.zone_agreement:.3f} margin={result.margin:.3f} "
        f"(tp={result.true_positives} fp={result.false_positives} fn={result.false_negatives})",
    ]
    for lang, rates in result.by_language.items():
        lines.append(
            f"  {lang or '-'}: precision={rates.precision:.3f} recall={rates.recall:.3f} "
            f"(tp={rates.true_positives} fp={rates.false_positives} fn={rates.false_negatives})"
        )
    lines.append(
        f"floors (precision >= {PRECISION_FLOOR}, recall >= {RECALL_FLOOR} in each language): "
        + ("met" if result.meets_floors else "NOT met")
    )
    if plateau:
        highs, lows = [h for h, _ in plateau], [lo for _, lo in plateau]
        lines.append(
            f"{len(plateau)} pairs score as well: high {min(highs):.2f}..{max(highs):.2f}, "
            f"low {min(lows):.2f}..{max(lows):.2f}; the shipped pair is the one nearest their centre"
        )
    if verbose:
        lines.append("")
        lines.append(f"{'kind':7} {'top':>6} {'branch':19} {'expected':26} {'applied':26} request")
        for o in result.outcomes:
            mark = "" if (o.applied == ([o.expected] if o.expected else [])) else "  <-"
            lines.append(
                f"{o.kind:7} {o.top:6.3f} {o.branch:19} {o.expected or '-':26} "
                f"{','.join(o.applied) or '-':26} {o.text[:60]}{mark}"
            )
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> tuple[Evaluation, list[tuple[float, float]]]:
    requests = load_fixture(args.fixture)
    scored = await score(await default_index(args.embedder, args.fixture), requests)
    if args.check:
        high, low = args.check
        return evaluate(scored, Thresholds(high, low)), []
    return fit(scored)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m services.router fit-thresholds", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--fixture", type=Path, default=DEFAULT_FIXTURE)
    parser.add_argument(
        "--embedder", default=EmbedderName.USE_MULTILINGUAL.value, choices=[e.value for e in EmbedderName]
    )
    parser.add_argument("--check", type=float, nargs=2, metavar=("HIGH", "LOW"), help="evaluate only")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--quiet", action="store_true", help="no per-request table")
    args = parser.parse_args(argv)
    result, plateau = asyncio.run(run(args))
    if args.json:
        payload: dict[str, Any] = {
            "embedder": args.embedder,
            "fixture": str(args.fixture),
            **asdict(result),
            "plateau": plateau,
        }
        sys.stdout.write(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(report(result, plateau, args.embedder, args.fixture, not args.quiet) + "\n")
