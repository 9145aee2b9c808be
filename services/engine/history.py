"""A conversation's earlier turns, as a chat run's model receives them.

After the instruction layers and before the current message, the model gets
the turns of the conversation, oldest first: each user message, the tool
calls the model made with their results (replayed in the provider's own
format), and the answer. They must fit the model's context window beside the
rest of the prompt and the answer's reserve. When they do not, the oldest
turns are folded into the conversation's persisted summary (memory's
incremental, bounded handoff summariser) and the model gets the summary plus
the most recent turns that fit. Folding is incremental: a run reads only the
turns after the summary's last folded entry.

The split is a pure function (:func:`split`), so its rule is tested without
any service.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from services.engine.providers.base import ChatMessage, ToolCallChunk
from services.engine.tokens import Counter, TokenCounters, message_tokens
from switchboard.memory.v1 import handoff_pb2
from switchboard.threads.v1 import threads_pb2

# A summary holds at most 4,096 characters (memory's bound); room for it is
# kept whenever turns are folded, so the summary never pushes turns out.
SUMMARY_MAX_CHARS = 4096
SUMMARY_HEADING = "# Earlier in this conversation (summary of the turns no longer shown)"


@dataclass(frozen=True)
class Turn:
    """One exchange: the user's message and what the run that answered it
    added (tool calls, their results, the answer)."""

    run_id: str
    entries: tuple[threads_pb2.Entry, ...]
    messages: tuple[ChatMessage, ...]
    tokens: int


def _messages(entries: Sequence[threads_pb2.Entry]) -> list[ChatMessage]:
    """The entries of one turn as chat messages. A tool call whose result was
    never recorded (the run stopped mid-call) is left out with its message,
    since a provider refuses a call without its result; so is an empty
    assistant message."""
    answered = {e.tool_call_id for e in entries if e.role == threads_pb2.ROLE_TOOL and e.tool_call_id}
    messages: list[ChatMessage] = []
    for entry in entries:
        if entry.role == threads_pb2.ROLE_USER:
            messages.append(ChatMessage("user", entry.content))
        elif entry.role == threads_pb2.ROLE_ASSISTANT:
            calls = tuple(
                ToolCallChunk(call.id, call.name, call.arguments)
                for call in entry.tool_calls
                if call.id in answered
            )
            if entry.content or calls:
                messages.append(ChatMessage("assistant", entry.content, tool_calls=calls))
        elif entry.role == threads_pb2.ROLE_TOOL:
            called = any(c.call_id == entry.tool_call_id for m in messages for c in m.tool_calls)
            if called:
                messages.append(ChatMessage("tool", entry.content, tool_call_id=entry.tool_call_id))
    return messages


def _tokens(messages: Sequence[ChatMessage], counter: Counter) -> int:
    return sum(message_tokens(counter, m) for m in messages)


@dataclass
class _Kept:
    messages: tuple[ChatMessage, ...]
    chars: int
    # By counter name, for the counters whose counts never change (an exact
    # vocabulary, the offline words): an estimate follows reported usage.
    tokens: dict[str, int]


# What a kept turn counts for besides its text (its key and records), so
# that turns with no text are bounded too.
TURN_OVERHEAD_CHARS = 200


class TurnCache:
    """The messages of turns already built, and their exact token counts.
    Entries never change once written, so a run of a long conversation
    builds and counts only the turns the last run did not have, instead of
    every earlier turn again (the entries themselves are kept between runs
    too: services/engine/entry_log.py). Bounded by the characters of the
    messages kept (and an overhead per turn), least recently used first out."""

    def __init__(self, max_chars: int) -> None:
        self._max_chars = max_chars
        # By the turn's first and last entry and how many it has: a run's
        # entries are appended in order, so a turn that grew has a new key.
        self._kept: OrderedDict[tuple[str, str, int], _Kept] = OrderedDict()
        self._chars = 0

    def turn(self, group: Sequence[threads_pb2.Entry], counter: Counter) -> Turn | None:
        if not group[0].id:  # entries that were never stored have no identity to key on
            return _turn(group, counter)
        key = (group[0].id, group[-1].id, len(group))
        kept = self._kept.get(key)
        if kept is None:
            messages = tuple(_messages(group))
            text = sum(len(m.content) + sum(len(c.arguments) for c in m.tool_calls) for m in messages)
            kept = _Kept(messages, TURN_OVERHEAD_CHARS + text, {})
            self._keep(key, kept)
        else:
            self._kept.move_to_end(key)
        if not kept.messages:
            return None
        exact = not TokenCounters.corrects(counter)
        tokens = kept.tokens.get(counter.name) if exact else None
        if tokens is None:
            tokens = _tokens(kept.messages, counter)
            if exact:
                kept.tokens[counter.name] = tokens
        return Turn(group[0].run_id, tuple(group), kept.messages, tokens)

    def _keep(self, key: tuple[str, str, int], kept: _Kept) -> None:
        if kept.chars > self._max_chars:
            return
        self._kept[key] = kept
        self._chars += kept.chars
        while self._chars > self._max_chars:
            _, dropped = self._kept.popitem(last=False)
            self._chars -= dropped.chars


def _turn(group: Sequence[threads_pb2.Entry], counter: Counter) -> Turn | None:
    """The turn of one run's entries, counted; None when nothing of it can be sent."""
    messages = tuple(_messages(group))
    return Turn(group[0].run_id, tuple(group), messages, _tokens(messages, counter)) if messages else None


def turns(
    entries: Sequence[threads_pb2.Entry], counter: Counter, cache: TurnCache | None = None
) -> list[Turn]:
    """Entries (oldest first) grouped into turns by the run that wrote them."""
    groups: list[list[threads_pb2.Entry]] = []
    for entry in entries:
        if groups and groups[-1][0].run_id == entry.run_id and entry.role != threads_pb2.ROLE_USER:
            groups[-1].append(entry)
        else:
            groups.append([entry])
    built = (cache.turn(group, counter) if cache else _turn(group, counter) for group in groups)
    return [turn for turn in built if turn is not None]


def split(
    all_turns: Sequence[Turn], budget: int, summary_tokens: int, summary_reserve: int
) -> tuple[list[Turn], list[Turn]]:
    """(turns to fold into the summary, turns the model gets). Everything is
    kept when it fits beside the current summary; otherwise room for a full
    summary is kept and the newest turns that fit follow it, the others
    (the oldest) are folded."""
    if sum(t.tokens for t in all_turns) + summary_tokens <= budget:
        return [], list(all_turns)
    room = budget - max(summary_tokens, summary_reserve)
    kept: list[Turn] = []
    used = 0
    for turn in reversed(all_turns):
        if used + turn.tokens > room:
            break
        kept.append(turn)
        used += turn.tokens
    kept.reverse()
    return list(all_turns[: len(all_turns) - len(kept)]), kept


def handoff_entries(folded: Sequence[Turn]) -> list[handoff_pb2.HandoffEntry]:
    """Folded turns as entries of the summariser: the user's messages are
    requests, the answers close them. Tool results are left out: they are
    data a tool read, never instructions, so their text must not become a
    decision or an objective of the summary."""
    kinds = {
        threads_pb2.ROLE_USER: handoff_pb2.HANDOFF_ENTRY_KIND_REQUEST,
        threads_pb2.ROLE_ASSISTANT: handoff_pb2.HANDOFF_ENTRY_KIND_ANSWER,
    }
    entries = []
    for turn in folded:
        for entry in turn.entries:
            if entry.role not in kinds:
                continue
            text = entry.content
            if entry.role == threads_pb2.ROLE_ASSISTANT and entry.tool_calls and not text:
                text = "called " + ", ".join(f"{c.name}({c.arguments})" for c in entry.tool_calls)
            entries.append(
                handoff_pb2.HandoffEntry(
                    sequence=entry.sequence,
                    author_agent_id="assistant" if entry.role != threads_pb2.ROLE_USER else "",
                    requester="user",
                    correlation_id=entry.run_id,
                    kind=kinds[entry.role],
                    text=text,
                )
            )
    return entries


@dataclass(frozen=True)
class History:
    """What a chat run's model gets of its conversation, and its record."""

    summary: str
    summary_tokens: int
    folded_now: int
    turns: tuple[Turn, ...]
    # Why something is missing: memory could not fold, etc.
    note: str = ""

    @property
    def messages(self) -> list[ChatMessage]:
        return [m for turn in self.turns for m in turn.messages]

    @property
    def tokens(self) -> int:
        return sum(t.tokens for t in self.turns)

    def summary_text(self) -> str:
        return f"{SUMMARY_HEADING}\n{self.summary}" if self.summary else ""

    def layers(self) -> list[dict[str, object]]:
        summary = self.summary_text()
        folded = (
            f"{self.folded_now} older turns folded into the summary by this run" if self.folded_now else ""
        )
        return [
            {
                "key": "conversation_summary",
                "present": bool(summary),
                "size_chars": len(summary),
                "size_tokens": self.summary_tokens,
                "item_count": self.folded_now,
                "note": folded,
            },
            {
                "key": "history",
                "present": bool(self.turns),
                "size_chars": sum(len(m.content) for m in self.messages),
                "size_tokens": self.tokens,
                "item_count": len(self.turns),
                "note": self.note,
            },
        ]
