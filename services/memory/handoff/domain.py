"""Incremental handoff summaries of agent threads. No gRPC here.

Summaries are maintained at checkpoints, not only at the moment of a
provider swap (the current provider may be at its limit by then); they keep
stable sections within 4,096 characters, and the raw transcript is never
what a model receives.

How it works: callers record each thread's new entries as they are appended
(idempotent on sequence numbers). At a checkpoint (every N new entries, on
rotation, on request) a :class:`Summariser` folds the pending entries into
the thread's :class:`SummaryState` (the sections as data), and the pending
entries are deleted. :func:`render` turns a state into the text, in the
stable section order, within the bound: when the text is too long it drops
the oldest items of the list sections one by one (each section keeps its
header and says how many lines it dropped), never cutting a line in half.

:class:`RuleSummariser` is deterministic and offline. An LLM summariser plugs
in through the same protocol; the bound is enforced by :func:`render`
whatever the summariser returns.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import Any, Protocol

from services.memory.handoff.models import HandoffPendingEntry, HandoffSummaryRow
from services.memory.handoff.repository import HandoffRepository
from services.shared.errors import InvalidArgument, NotFound, TooLarge
from services.shared.text import fold

log = logging.getLogger(__name__)

# A handoff summary fits in 4,096 characters (the threads service stores
# segment handoffs under the same bound).
HANDOFF_SUMMARY_MAX_CHARS = 4096

SECTION_TITLES = (
    "Current objective",
    "Active requests by requester",
    "Recent decisions",
    "Blockers",
    "Last correlated answer",
)

# HandoffEntryKind of handoff.proto.
OBJECTIVE, REQUEST, ANSWER, DECISION, BLOCKER, UNBLOCKED, NOTE = range(1, 8)
ENTRY_KINDS = frozenset(range(1, 8))
# HandoffCheckpointReason of handoff.proto.
CHECKPOINT_ENTRIES, CHECKPOINT_ROTATION, CHECKPOINT_REQUEST = 1, 2, 3

MAX_ID_CHARS = 128
MAX_ENTRIES_PER_CALL = 1000
# Memory keeps the start of each entry only: the summary quotes at most
# ITEM_CHARS of it.
STORED_ENTRY_CHARS = 2000
# Each quoted text is cut to this many characters, so a single item can never
# fill the summary on its own.
ITEM_CHARS = 300
# Items kept per list section in the state (the rendering may show fewer).
MAX_OPEN_REQUESTS = 50
MAX_DECISIONS = 20
MAX_BLOCKERS = 20


@dataclass(frozen=True)
class HandoffEntry:
    sequence: int
    author_agent_id: str
    requester: str
    correlation_id: str
    kind: int
    text: str


@dataclass(frozen=True)
class Item:
    """One summarised fact, with the sequence of the entry it came from."""

    sequence: int
    text: str
    author: str = ""
    requester: str = ""
    correlation_id: str = ""


@dataclass(frozen=True)
class SummaryState:
    objective: Item | None = None
    requests: tuple[Item, ...] = ()
    decisions: tuple[Item, ...] = ()
    blockers: tuple[Item, ...] = ()
    last_answer: Item | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> SummaryState:
        data: dict[str, Any] = json.loads(text or "{}")

        def item(value: Any) -> Item | None:
            return Item(**value) if value else None

        def items(key: str) -> tuple[Item, ...]:
            return tuple(Item(**value) for value in data.get(key, ()))

        return cls(
            objective=item(data.get("objective")),
            requests=items("requests"),
            decisions=items("decisions"),
            blockers=items("blockers"),
            last_answer=item(data.get("last_answer")),
        )


class Summariser(Protocol):
    """Folds new entries (in sequence order) into a summary state. An LLM
    summariser may rewrite items freely; the rendering bounds the result.
    ``name`` is recorded with each checkpoint it folds."""

    name: str

    async def fold(self, state: SummaryState, entries: Sequence[HandoffEntry]) -> SummaryState: ...


def clip(text: str, limit: int = ITEM_CHARS) -> str:
    """One line of at most ``limit`` characters, cut at a word when possible."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    cut = line[: limit - 1]
    if " " in cut[limit // 2 :]:
        cut = cut[: cut.rindex(" ")]
    return cut + "…"


class RuleSummariser:
    """The deterministic offline summariser:

    * OBJECTIVE sets the current objective;
    * REQUEST opens a request (per requester); an ANSWER with the same
      correlation id closes it and, when correlated, becomes the last
      correlated answer;
    * DECISION and BLOCKER append (newest kept); UNBLOCKED lifts the blockers
      with its correlation id;
    * NOTE changes nothing.

    Whatever the kind, lines of an entry that start with a marker (see
    :func:`marked_lines`: "Decision:", "Blocker:", "Objective:", "Unblocked:",
    and the French "Décision :", "Blocage :", "Objectif :", "Débloqué :")
    also set the objective, add a decision or a blocker, or lift the
    entry's correlated blockers: agents are asked to mark them in their
    answers, so the summary's sections fill from real use.
    """

    name = "rules"

    async def fold(self, state: SummaryState, entries: Sequence[HandoffEntry]) -> SummaryState:
        for entry in entries:
            state = self.fold_one(state, entry)
        return state

    @classmethod
    def fold_one(cls, state: SummaryState, entry: HandoffEntry) -> SummaryState:
        state = cls._fold_kind(state, entry)
        for kind, text in marked_lines(entry.text):
            state = cls._fold_kind(state, replace(entry, kind=kind, text=text))
        return state

    @staticmethod
    def _fold_kind(state: SummaryState, entry: HandoffEntry) -> SummaryState:
        item = Item(
            sequence=entry.sequence,
            text=clip(entry.text),
            author=entry.author_agent_id,
            requester=entry.requester,
            correlation_id=entry.correlation_id,
        )
        corr = entry.correlation_id
        if entry.kind == OBJECTIVE:
            return replace(state, objective=item)
        if entry.kind == REQUEST:
            # A repeated correlation id replaces the earlier wording of the request.
            kept = tuple(r for r in state.requests if not (corr and r.correlation_id == corr))
            return replace(state, requests=(*kept, item)[-MAX_OPEN_REQUESTS:])
        if entry.kind == ANSWER:
            if not corr:
                return state
            open_requests = tuple(r for r in state.requests if r.correlation_id != corr)
            return replace(state, requests=open_requests, last_answer=item)
        if entry.kind == DECISION:
            return replace(state, decisions=(*state.decisions, item)[-MAX_DECISIONS:])
        if entry.kind == BLOCKER:
            return replace(state, blockers=(*state.blockers, item)[-MAX_BLOCKERS:])
        if entry.kind == UNBLOCKED:
            return replace(state, blockers=tuple(b for b in state.blockers if b.correlation_id != corr))
        return state


# Markers: "Decision: …" at the start of a line of an entry. Matched on the
# accent-folded, lower-cased line, so "Décision :" and "DECISION -" count.
_MARKERS = {
    "objective": OBJECTIVE,
    "objectif": OBJECTIVE,
    "goal": OBJECTIVE,
    "decision": DECISION,
    "decided": DECISION,
    "blocker": BLOCKER,
    "blocked": BLOCKER,
    "blocage": BLOCKER,
    "bloque": BLOCKER,
    "unblocked": UNBLOCKED,
    "debloque": UNBLOCKED,
}
_MARKER_LINE = re.compile(
    r"^\s*(?:[-*]\s*)?(?:\*\*)?([A-Za-z\u00c0-\u017f]+)(?:\*\*)?\s*[:\-\u2013]\s*(?:\*\*)?\s*(\S.*)$"
)


def marked_lines(text: str) -> list[tuple[int, str]]:
    """(kind, text) of each line of ``text`` that opens with a marker word
    followed by ":" or "-", in English or French, optionally bulleted or bold."""
    marked = []
    for line in text.splitlines():
        match = _MARKER_LINE.match(line)
        if match is None:
            continue
        kind = _MARKERS.get(fold(match.group(1)))
        if kind is not None:
            marked.append((kind, match.group(2).strip().strip("*").strip()))
    return marked


# Rendering


@dataclass(frozen=True)
class Section:
    title: str
    lines: tuple[str, ...]
    trimmed: int = 0


@dataclass(frozen=True)
class Rendered:
    sections: tuple[Section, ...]
    text: str


def _tag(item: Item) -> str:
    return f"[{item.correlation_id}] " if item.correlation_id else ""


def _by(item: Item) -> str:
    return f" ({item.author}, #{item.sequence})" if item.author else f" (#{item.sequence})"


def _request_line(item: Item) -> str:
    return f"- {item.requester or '(unknown requester)'}: {_tag(item)}{item.text} (#{item.sequence})"


def _sections(
    state: SummaryState, requests: Sequence[Item], decisions: Sequence[Item], blockers: Sequence[Item]
) -> list[Section]:
    objective: tuple[str, ...] = ()
    if state.objective is not None:
        objective = (f"{state.objective.text}{_by(state.objective)}",)
    elif state.requests:
        latest = state.requests[-1]
        objective = (f"(from the latest request) {latest.text}{_by(latest)}",)
    # Grouped by requester, in the order each requester first asked.
    first_seen: dict[str, int] = {}
    for item in state.requests:
        first_seen.setdefault(item.requester, item.sequence)
    grouped = sorted(requests, key=lambda item: (first_seen[item.requester], item.sequence))
    answer: tuple[str, ...] = ()
    if state.last_answer is not None:
        a = state.last_answer
        answer = (
            f"{_tag(a)}{a.author or 'agent'} -> {a.requester or 'requester'}: {a.text} (#{a.sequence})",
        )
    return [
        Section(SECTION_TITLES[0], objective),
        Section(
            SECTION_TITLES[1],
            tuple(_request_line(item) for item in grouped),
            len(state.requests) - len(requests),
        ),
        Section(
            SECTION_TITLES[2],
            tuple(f"- {item.text}{_by(item)}" for item in decisions),
            len(state.decisions) - len(decisions),
        ),
        Section(
            SECTION_TITLES[3],
            tuple(f"- {_tag(item)}{item.text}{_by(item)}" for item in blockers),
            len(state.blockers) - len(blockers),
        ),
        Section(SECTION_TITLES[4], answer),
    ]


def _text(sections: Sequence[Section]) -> str:
    parts = []
    for section in sections:
        lines = list(section.lines) or ["(none)"]
        if section.trimmed:
            lines.append(f"(… {section.trimmed} older trimmed)")
        parts.append(f"## {section.title}\n" + "\n".join(lines))
    return "\n\n".join(parts) + "\n"


_LISTS = ("requests", "decisions", "blockers")


def _without_oldest(state: SummaryState, order: Sequence[tuple[int, str]], k: int) -> Rendered:
    """The rendering without the ``k`` first items of ``order``."""
    dropped = set(order[:k])
    kept = {name: [i for i in getattr(state, name) if (i.sequence, name) not in dropped] for name in _LISTS}
    sections = _sections(state, kept["requests"], kept["decisions"], kept["blockers"])
    return Rendered(tuple(sections), _text(sections))


def render(state: SummaryState, max_chars: int = HANDOFF_SUMMARY_MAX_CHARS) -> Rendered:
    """The summary text, sections in the stable order, at most ``max_chars``:
    the oldest items of the list sections go first; the objective and the
    last answer are cut shorter only if that is still not enough."""
    while True:
        # Items of the list sections, oldest first. Dropping more of them
        # shortens the text (up to a "(… n older trimmed)" note), so bisection
        # finds the fewest oldest items to drop; whatever it returns fits.
        order = sorted((item.sequence, name) for name in _LISTS for item in getattr(state, name))
        best = _without_oldest(state, order, len(order))
        if len(best.text) > max_chars:
            shorter = _shorten(state)
            if shorter == state:
                raise ValueError(f"max_chars {max_chars} cannot hold the section headers")
            state = shorter
            continue
        low, high = 0, len(order)  # dropping ``high`` fits: that is ``best``
        while low < high:
            middle = (low + high) // 2
            candidate = _without_oldest(state, order, middle)
            if len(candidate.text) <= max_chars:
                high, best = middle, candidate
            else:
                low = middle + 1
        return best


def _shorten(state: SummaryState) -> SummaryState:
    """Halves the longer of the two single-item texts (down to 20 characters)."""
    objective, answer = state.objective, state.last_answer
    longer = max((i for i in (objective, answer) if i is not None), key=lambda i: len(i.text), default=None)
    if longer is None or len(longer.text) <= 20:
        return state
    shorter = replace(longer, text=clip(longer.text, max(20, len(longer.text) // 2)))
    if longer is objective:
        return replace(state, objective=shorter)
    return replace(state, last_answer=shorter)


# Domain


@dataclass(frozen=True)
class Summary:
    thread_id: str
    rendered: Rendered
    last_folded_sequence: int
    pending_entries: int
    last_checkpoint_reason: int
    checkpoint_time: datetime | None
    summariser: str = ""
    fallback_reason: str = ""


@dataclass(frozen=True)
class Recorded:
    recorded: int
    checkpointed: bool
    summary: Summary


def check_thread_id(thread_id: str) -> str:
    thread_id = thread_id.strip()
    if not thread_id:
        raise InvalidArgument("thread_id is required", field="thread_id")
    if len(thread_id) > MAX_ID_CHARS:
        raise InvalidArgument(f"thread_id is longer than {MAX_ID_CHARS} characters", field="thread_id")
    return thread_id


def check_entries(entries: Sequence[HandoffEntry]) -> list[HandoffEntry]:
    """Validated entries in sequence order; texts cut to STORED_ENTRY_CHARS."""
    if not entries:
        raise InvalidArgument("entries must not be empty", field="entries")
    if len(entries) > MAX_ENTRIES_PER_CALL:
        raise TooLarge(f"at most {MAX_ENTRIES_PER_CALL} entries per call", field="entries")
    seen: set[int] = set()
    cleaned = []
    for index, entry in enumerate(entries):
        where = f"entries[{index}]"
        if entry.sequence <= 0:
            raise InvalidArgument(
                f"{where}.sequence must be a sequence number (from 1)", field=f"{where}.sequence"
            )
        if entry.sequence in seen:
            raise InvalidArgument(
                f"{where}.sequence {entry.sequence} appears twice", field=f"{where}.sequence"
            )
        seen.add(entry.sequence)
        if entry.kind not in ENTRY_KINDS:
            raise InvalidArgument(f"{where}.kind is required and must be a known kind", field=f"{where}.kind")
        if entry.kind == UNBLOCKED and not entry.correlation_id.strip():
            raise InvalidArgument(
                f"{where}: an UNBLOCKED entry needs the correlation_id of the blocker it lifts",
                field=f"{where}.correlation_id",
            )
        for name in ("author_agent_id", "requester", "correlation_id"):
            if len(getattr(entry, name)) > MAX_ID_CHARS:
                raise InvalidArgument(
                    f"{where}.{name} is longer than {MAX_ID_CHARS} characters", field=f"{where}.{name}"
                )
        cleaned.append(
            replace(
                entry,
                author_agent_id=entry.author_agent_id.strip(),
                requester=entry.requester.strip(),
                correlation_id=entry.correlation_id.strip(),
                text=entry.text[:STORED_ENTRY_CHARS],
            )
        )
    return sorted(cleaned, key=lambda entry: entry.sequence)


def _entry(row: HandoffPendingEntry) -> HandoffEntry:
    return HandoffEntry(
        row.sequence, row.author_agent_id, row.requester, row.correlation_id, row.kind, row.text
    )


class HandoffDomain:
    """``summariser`` folds every checkpoint (the rules), unless a ``model``
    summariser is configured: that one folds first, within ``model_timeout``
    seconds, and on any failure the rules fold instead and the checkpoint
    records why."""

    def __init__(
        self,
        repository: HandoffRepository,
        summariser: Summariser,
        checkpoint_every: int,
        max_chars: int = HANDOFF_SUMMARY_MAX_CHARS,
        model: Summariser | None = None,
        model_timeout: float = 30.0,
    ) -> None:
        self._repo = repository
        self._summariser = summariser
        self._model = model
        self._model_timeout = model_timeout
        self._every = checkpoint_every
        self._max_chars = max_chars

    async def _fold(
        self, state: SummaryState, pending: Sequence[HandoffEntry]
    ) -> tuple[SummaryState, str, str]:
        """(the folded state, who folded it, why the model did not)."""
        reason = ""
        if self._model is not None:
            try:
                async with asyncio.timeout(self._model_timeout):
                    return await self._model.fold(state, pending), self._model.name, ""
            except Exception as exc:  # noqa: BLE001 - any model failure falls back to the rules
                reason = f"{self._model.name} failed ({type(exc).__name__}: {exc}); the rules folded instead"
                log.warning("handoff summary: %s", reason)
        return await self._summariser.fold(state, pending), self._summariser.name, reason[:500]

    async def _row(self, thread_id: str, caller: str) -> HandoffSummaryRow:
        return _owned(await self._repo.get(thread_id), thread_id, caller)

    async def record(
        self, thread_id: str, entries: Sequence[HandoffEntry], caller: str = "", private: bool = False
    ) -> Recorded:
        thread_id = check_thread_id(thread_id)
        cleaned = check_entries(entries)
        rows = [
            HandoffPendingEntry(
                thread_id=thread_id,
                sequence=entry.sequence,
                author_agent_id=entry.author_agent_id,
                requester=entry.requester,
                correlation_id=entry.correlation_id,
                kind=entry.kind,
                text=entry.text,
            )
            for entry in cleaned
        ]
        counts = await self._repo.record(thread_id, rows, caller if private else None)
        if counts is None:
            raise NotFound(f"no handoff entries recorded for thread {thread_id!r}", thread_id=thread_id)
        recorded, pending = counts
        if pending >= self._every:
            return Recorded(recorded, True, await self.checkpoint(thread_id, CHECKPOINT_ENTRIES, caller))
        return Recorded(recorded, False, await self.summary(thread_id, caller))

    async def checkpoint(self, thread_id: str, reason: int, caller: str = "") -> Summary:
        """Folds every pending entry. Optimistic: the fold (maybe an LLM call)
        runs outside any transaction, and the result is stored only if no other
        checkpoint of the thread landed meanwhile; otherwise that one is kept
        and the entries it did not cover are folded on top of it."""
        thread_id = check_thread_id(thread_id)
        if reason not in (CHECKPOINT_ENTRIES, CHECKPOINT_ROTATION, CHECKPOINT_REQUEST):
            raise InvalidArgument("reason must be ROTATION or REQUEST", field="reason")
        for _ in range(5):
            row = await self._row(thread_id, caller)
            pending = [_entry(e) for e in await self._repo.pending(thread_id, row.last_folded_sequence)]
            state = SummaryState.from_json(row.state_json)
            summariser, fallback = row.summariser, row.fallback_reason
            if pending:
                state, summariser, fallback = await self._fold(state, pending)
            last = pending[-1].sequence if pending else row.last_folded_sequence
            if await self._repo.store_checkpoint(
                thread_id, row.last_folded_sequence, last, state.to_json(), reason, summariser, fallback
            ):
                return await self.summary(thread_id, caller)
        return await self.summary(thread_id, caller)

    async def summary(self, thread_id: str, caller: str = "") -> Summary:
        thread_id = check_thread_id(thread_id)
        # The row and the count of its pending entries in one read.
        row, pending = await self._repo.get_with_pending(thread_id)
        return self._summary(_owned(row, thread_id, caller), pending)

    def _summary(self, row: HandoffSummaryRow, pending: int) -> Summary:
        return Summary(
            thread_id=row.thread_id,
            rendered=render(SummaryState.from_json(row.state_json), self._max_chars),
            last_folded_sequence=row.last_folded_sequence,
            pending_entries=pending,
            last_checkpoint_reason=row.last_checkpoint_reason,
            checkpoint_time=row.checkpoint_time,
            summariser=row.summariser,
            fallback_reason=row.fallback_reason,
        )


def _owned(row: HandoffSummaryRow | None, thread_id: str, caller: str) -> HandoffSummaryRow:
    # A private summary (a conversation's) is another user's: exactly like a missing one.
    if row is None or (row.owner_user_id is not None and row.owner_user_id != caller):
        raise NotFound(f"no handoff entries recorded for thread {thread_id!r}", thread_id=thread_id)
    return row
