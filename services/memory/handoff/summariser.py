"""The summary model: a :class:`~services.memory.handoff.Summariser` that asks
a configured model to fold new entries into the summary's sections.

The model gets the current sections and the new entries as JSON, and must
answer with the sections as one JSON object; anything else is an error, and
the handoff domain then folds with the rules instead (and records why). The
model may rewrite items freely: the rendering still keeps the five sections
in their order and the 4,096-character bound, whatever it returns."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from services.memory.handoff.domain import (
    MAX_BLOCKERS,
    MAX_DECISIONS,
    MAX_OPEN_REQUESTS,
    HandoffEntry,
    Item,
    SummaryState,
    clip,
)
from services.shared.completion import ModelCompleter
from services.shared.enums import EnumNames
from switchboard.memory.v1 import handoff_pb2

KIND_NAMES = EnumNames(handoff_pb2.HandoffEntryKind)

SYSTEM = """You keep the handoff summary of a shared work thread: what a colleague (or another model) \
needs to carry on the work. You get the current summary and the thread's new entries, as JSON. Fold \
the new entries into the summary and answer with the updated summary only, as one JSON object:
{"objective": string or null, "requests": [{"requester": string, "text": string, "correlation_id": \
string}], "decisions": [string], "blockers": [{"text": string, "correlation_id": string}], \
"last_answer": {"author": string, "requester": string, "text": string, "correlation_id": string} or null}
- objective: what the work is for now (a request or an answer may change it).
- requests: the questions still waiting for an answer; an answer with the same correlation_id closes one.
- decisions: what was settled, oldest first; blockers: what stops the work, minus those lifted.
- last_answer: the latest answer to a correlated request.
Write short items, in the language of the entries. No text outside the JSON object."""


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")
    requester: str = ""
    text: str = Field(min_length=1)
    correlation_id: str = ""


class _Blocker(BaseModel):
    model_config = ConfigDict(extra="ignore")
    text: str = Field(min_length=1)
    correlation_id: str = ""


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")
    author: str = ""
    requester: str = ""
    text: str = Field(min_length=1)
    correlation_id: str = ""


class _Sections(BaseModel):
    model_config = ConfigDict(extra="forbid")
    objective: str | None = None
    requests: list[_Request] = Field(default_factory=list)
    decisions: list[str] = Field(default_factory=list)
    blockers: list[_Blocker] = Field(default_factory=list)
    last_answer: _Answer | None = None


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.S)


def parse_sections(raw: str, sequence: int) -> SummaryState:
    """The model's answer as a summary state; ValueError when it is not the
    JSON object asked for. New items carry ``sequence`` (the newest entry)."""
    fenced = _FENCE.match(raw)
    try:
        sections = _Sections.model_validate_json(fenced.group(1) if fenced else raw.strip())
    except ValidationError as exc:
        raise ValueError(f"the summary model did not answer with the sections: {exc.errors()[:3]}") from exc

    def item(text: str, **extra: str) -> Item:
        return Item(sequence=sequence, text=clip(text), **extra)

    answer = sections.last_answer
    last = None
    if answer is not None:
        last = item(
            answer.text,
            author=answer.author,
            requester=answer.requester,
            correlation_id=answer.correlation_id,
        )
    blockers = tuple(item(b.text, correlation_id=b.correlation_id) for b in sections.blockers)
    return SummaryState(
        objective=item(sections.objective) if sections.objective and sections.objective.strip() else None,
        requests=tuple(
            item(r.text, requester=r.requester, correlation_id=r.correlation_id) for r in sections.requests
        )[-MAX_OPEN_REQUESTS:],
        decisions=tuple(item(d) for d in sections.decisions if d.strip())[-MAX_DECISIONS:],
        blockers=blockers[-MAX_BLOCKERS:],
        last_answer=last,
    )


def question(state: SummaryState, entries: Sequence[HandoffEntry]) -> str:
    """The current sections and the new entries, as the model receives them."""
    current = {
        "objective": state.objective.text if state.objective else None,
        "requests": [asdict(r) for r in state.requests],
        "decisions": [d.text for d in state.decisions],
        "blockers": [{"text": b.text, "correlation_id": b.correlation_id} for b in state.blockers],
        "last_answer": asdict(state.last_answer) if state.last_answer else None,
    }
    new = [
        {
            "sequence": e.sequence,
            "kind": KIND_NAMES.name(e.kind, "note"),
            "author": e.author_agent_id,
            "requester": e.requester,
            "correlation_id": e.correlation_id,
            "text": e.text,
        }
        for e in entries
    ]
    return json.dumps({"summary": current, "new_entries": new}, ensure_ascii=False)


class ModelSummariser:
    def __init__(self, completer: ModelCompleter) -> None:
        self._completer = completer
        self.name = completer.name

    async def fold(self, state: SummaryState, entries: Sequence[HandoffEntry]) -> SummaryState:
        raw = await self._completer.complete(SYSTEM, question(state, entries))
        return parse_sections(raw, max(e.sequence for e in entries))

    async def close(self) -> None:
        await self._completer.close()
