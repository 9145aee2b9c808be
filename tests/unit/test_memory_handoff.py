"""Handoff summaries: the deterministic summariser's rules, the stable
section order, and the 4,096-character bound kept by trimming the oldest
lines, never by cutting a line or dropping a section."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from services.memory.handoff.domain import (
    ANSWER,
    BLOCKER,
    DECISION,
    HANDOFF_SUMMARY_MAX_CHARS,
    NOTE,
    OBJECTIVE,
    REQUEST,
    SECTION_TITLES,
    UNBLOCKED,
    HandoffEntry,
    Item,
    RuleSummariser,
    SummaryState,
    render,
)
from switchboard.memory.v1 import handoff_pb2

HEADERS = [f"## {title}" for title in SECTION_TITLES]


def entry(sequence: int, kind: int, text: str, requester: str = "", corr: str = "") -> HandoffEntry:
    return HandoffEntry(sequence, "qa", requester, corr, kind, text)


async def fold(*entries: HandoffEntry, state: SummaryState | None = None) -> SummaryState:
    return await RuleSummariser().fold(state or SummaryState(), entries)


def header_positions(text: str) -> list[int]:
    return [text.index(header + "\n") for header in HEADERS]


def test_kinds_and_titles_match_the_contract() -> None:
    assert SECTION_TITLES == (
        "Current objective",
        "Active requests by requester",
        "Recent decisions",
        "Blockers",
        "Last correlated answer",
    )
    names = {OBJECTIVE: "OBJECTIVE", REQUEST: "REQUEST", ANSWER: "ANSWER", DECISION: "DECISION"}
    names |= {BLOCKER: "BLOCKER", UNBLOCKED: "UNBLOCKED", NOTE: "NOTE"}
    for value, name in names.items():
        assert handoff_pb2.HandoffEntryKind.Name(value) == f"HANDOFF_ENTRY_KIND_{name}"  # type: ignore[arg-type]


def test_an_empty_summary_has_every_section_in_order() -> None:
    rendered = render(SummaryState())
    assert [s.title for s in rendered.sections] == list(SECTION_TITLES)
    assert rendered.text == "\n\n".join(f"{h}\n(none)" for h in HEADERS) + "\n"


async def test_requests_stay_active_until_their_correlated_answer() -> None:
    state = await fold(
        entry(1, OBJECTIVE, "Ship the export feature"),
        entry(2, REQUEST, "Review the schema", "main", "c1"),
        entry(3, REQUEST, "Check the tests", "architect", "c2"),
        entry(4, REQUEST, "Also the docs", "main", "c3"),
        entry(5, ANSWER, "Schema is fine", "main", "c1"),
        entry(6, NOTE, "thinking out loud"),
        entry(7, ANSWER, "an uncorrelated remark", "main"),
        entry(8, REQUEST, "And the API", "main", "c4"),
        entry(9, REQUEST, "More tests", "architect", "c5"),
    )
    rendered = render(state)
    sections = {s.title: s.lines for s in rendered.sections}
    assert sections["Current objective"] == ("Ship the export feature (qa, #1)",)
    # Grouped by requester, ordered by each one's oldest open request:
    # architect (#3) before main (#4, its #2 was answered).
    assert sections["Active requests by requester"] == (
        "- architect: [c2] Check the tests (#3)",
        "- architect: [c5] More tests (#9)",
        "- main: [c3] Also the docs (#4)",
        "- main: [c4] And the API (#8)",
    )
    assert sections["Last correlated answer"] == ("[c1] qa -> main: Schema is fine (#5)",)
    assert header_positions(rendered.text) == sorted(header_positions(rendered.text))


async def test_decisions_blockers_and_unblocking() -> None:
    state = await fold(
        entry(1, DECISION, "Use PostgreSQL in production"),
        entry(2, BLOCKER, "CI runner is down", corr="b1"),
        entry(3, BLOCKER, "Waiting for the design review", corr="b2"),
        entry(4, UNBLOCKED, "CI is back", corr="b1"),
    )
    sections = {s.title: s.lines for s in render(state).sections}
    assert sections["Recent decisions"] == ("- Use PostgreSQL in production (qa, #1)",)
    assert sections["Blockers"] == ("- [b2] Waiting for the design review (qa, #3)",)
    # No explicit objective: the latest open request stands in for it, labelled so.
    state = await fold(entry(5, REQUEST, "Write the changelog", "main", "c9"), state=state)
    assert render(state).sections[0].lines == ("(from the latest request) Write the changelog (qa, #5)",)


async def test_folding_in_two_checkpoints_equals_folding_at_once() -> None:
    entries = [
        entry(i, [REQUEST, ANSWER, DECISION, BLOCKER][i % 4], f"text {i}", f"r{i % 3}", f"c{i // 2}")
        for i in range(1, 41)
    ]
    at_once = await fold(*entries)
    in_two = await fold(*entries[20:], state=await fold(*entries[:20]))
    assert in_two == at_once
    assert SummaryState.from_json(at_once.to_json()) == at_once


async def test_a_long_thread_stays_within_the_bound_trimming_the_oldest_lines() -> None:
    long = "word " * 200  # every item is clipped to ITEM_CHARS
    entries = []
    for i in range(1, 301):
        kind = [REQUEST, DECISION, BLOCKER][i % 3]
        entries.append(entry(i, kind, f"item {i} {long}", f"requester{i % 7}", f"c{i}"))
    entries.append(entry(301, OBJECTIVE, "objective " + long))
    entries.append(entry(302, ANSWER, "answer " + long, "requester1", "c1"))
    state = await fold(*entries)
    full = render(state, max_chars=10**9)
    assert len(full.text) > HANDOFF_SUMMARY_MAX_CHARS  # the bound really has work to do
    bounded = render(state)
    text = bounded.text
    assert len(text) <= HANDOFF_SUMMARY_MAX_CHARS
    positions = header_positions(text)
    assert positions == sorted(positions)
    assert [s.title for s in bounded.sections] == list(SECTION_TITLES)
    # Every line shown is a whole line of the untrimmed rendering (nothing cut mid-line).
    full_lines = set(full.text.splitlines())
    for line in text.splitlines():
        assert line in full_lines or line.startswith("(… "), line
    # What was dropped is the oldest: every shown item is newer than every trimmed one.
    shown = [int(line.rsplit("#", 1)[1].rstrip(")")) for s in bounded.sections[1:4] for line in s.lines]
    kept_items = {i.sequence for i in (*state.requests, *state.decisions, *state.blockers)}
    trimmed = kept_items - set(shown)
    assert trimmed and shown and max(trimmed) < min(shown)
    assert sum(s.trimmed for s in bounded.sections) == len(trimmed)
    assert f"(… {bounded.sections[2].trimmed} older trimmed)" in text


class VerboseSummariser:
    """Stands in for an LLM summariser that ignores any length rule."""

    async def fold(self, state: SummaryState, entries: Sequence[HandoffEntry]) -> SummaryState:
        huge = "x" * 5000
        items = tuple(Item(e.sequence, huge, "llm") for e in entries)
        return replace(
            state,
            objective=Item(1, huge),
            decisions=items,
            last_answer=Item(2, huge, "llm", "main", "c1"),
            blockers=(Item(3, huge, "llm"),),
        )


async def test_the_bound_holds_whatever_the_summariser_returns() -> None:
    state = await VerboseSummariser().fold(SummaryState(), [entry(i, NOTE, "") for i in range(1, 5)])
    rendered = render(state)
    assert len(rendered.text) <= HANDOFF_SUMMARY_MAX_CHARS
    assert header_positions(rendered.text) == sorted(header_positions(rendered.text))


# Marked lines: agents mark decisions, blockers and objectives in their
# words; the rules fill the sections from them, in English and French.


async def test_marked_lines_fill_the_objective_decisions_and_blockers() -> None:
    state = await fold(
        entry(1, REQUEST, "Objective: ship the invoice export by Friday", "main", "c1"),
        entry(
            2,
            ANSWER,
            "Done.\nDecision: CSV with a semicolon separator\n- Blocker: the tax table is missing",
            "main",
            "c1",
        ),
    )
    assert state.objective is not None and state.objective.text == "ship the invoice export by Friday"
    assert [d.text for d in state.decisions] == ["CSV with a semicolon separator"]
    assert [b.text for b in state.blockers] == ["the tax table is missing"]
    text = render(state).text
    for header, line in [
        ("## Current objective", "ship the invoice export by Friday"),
        ("## Recent decisions", "CSV with a semicolon separator"),
        ("## Blockers", "the tax table is missing"),
    ]:
        assert line in text.split(header)[1].split("##")[0]


async def test_french_markers_count_the_same() -> None:
    state = await fold(
        entry(1, REQUEST, "Objectif : livrer l'export vendredi", "main", "c1"),
        entry(2, ANSWER, "**Décision :** séparateur point-virgule\nBloqué : la table manque", "", "c1"),
        entry(3, ANSWER, "Débloqué : la table est arrivée", "", "c1"),
    )
    assert state.objective is not None and state.objective.text == "livrer l'export vendredi"
    assert [d.text for d in state.decisions] == ["séparateur point-virgule"]
    assert state.blockers == ()  # lifted by the correlated "Débloqué"


async def test_words_that_only_look_like_markers_change_nothing() -> None:
    state = await fold(entry(1, NOTE, "Decisions are hard.\nThe blocker list: none\nbut: no", "", "c1"))
    assert state == SummaryState()
