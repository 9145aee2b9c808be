"""A run's persisted events as AG-UI events, with the ``ag-ui-protocol``
package's own types: one run event gives one or more AG-UI events, all
carrying the run event's sequence number as their cursor.

| Switchboard run event | AG-UI events |
|---|---|
| run_started | RUN_STARTED (the client's thread and run ids) |
| step | STEP_STARTED, STEP_FINISHED (the step's key); after the context step, MESSAGES_SNAPSHOT |
| live_state | STATE_SNAPSHOT (snapshot), STATE_DELTA (set: RFC 6902 JSON Patch) |
| delta | TEXT_MESSAGE_START (once per message), TEXT_MESSAGE_CONTENT |
| action | TOOL_CALL_START, TOOL_CALL_ARGS, TOOL_CALL_END, TOOL_CALL_RESULT |
| skill_used, notice, reasoning, proposal | CUSTOM `switchboard.<kind>` |
| final | TEXT_MESSAGE_END, CUSTOM sources and routing, RUN_FINISHED (success, or interrupts) |
| error | TEXT_MESSAGE_END, CUSTOM sources and routing, RUN_ERROR |

The state is the run's project's live state, ``{"live_state": {<agent id>:
<entry as GET /api/agent/live-state shows it>}}``, from the run's own log.
The thread's messages and the run's sources and routing decision are not
in the log: the encoder leaves them empty (:func:`to_fill`) and the route
fills them from the services (gateway.agui.records).

The encoder keeps what is open (the message, the steps) and what a client
holds (the state, a messages snapshot), so that a stream resumed after a
cursor starts as AG-UI requires and as a client that lost its memory needs
(RUN_STARTED, the snapshots, then the message still being written) and goes
on with the events after it."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import jsonpatch
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    MessagesSnapshotEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from gateway.responses import LiveStateEntry
from services.shared.api_json import event_data
from switchboard.engine.v1 import engine_pb2
from switchboard.memory.v1 import memory_pb2

# The metadata key of every event: the sequence number of the run event it
# came from, which a client sends back as Last-Event-ID to resume after it.
CURSOR = "switchboard_cursor"
CUSTOM_PREFIX = "switchboard."
APPROVAL = "approval"  # the reason of a proposal's interrupt
# The run record's parts a run's end carries as CUSTOM events (value: as
# GET /api/agent/runs/{id} shows them); the route fills them in.
RECORD_PARTS = {"sources": "sources", "routing": "router_decision"}
LIVE_STATE = "live_state"  # the state's one key


class AguiEncoder:
    """The AG-UI events of one run, in order, for the client's ``thread_id``
    and ``run_id``; ``after``: the cursor a resumed stream goes on from (0:
    the whole run)."""

    def __init__(self, thread_id: str, run_id: str, after: tuple[int, int] = (0, 0)) -> None:
        self.thread_id, self.run_id, self.after = thread_id, run_id, after
        self._open = OpenParts()
        self.switchboard_run_id = ""
        self._message = ""  # the id of the assistant message being written
        self._messages = 0
        self._steps: list[str] = []
        self._proposals: list[engine_pb2.ProposalMade] = []
        self._started = False  # RUN_STARTED sent on this stream

    def encode(self, event: engine_pb2.RunEvent) -> list[BaseEvent]:
        """The AG-UI events this run event gives on this stream, each with its
        cursor: "<sequence>.<k>" for the k-th event of that run event. Those
        at or before the resume cursor are not sent (their state is kept),
        and the first event sent on a resumed stream is preceded by what
        AG-UI needs open before it: the run's start, the open steps, the
        message or tool call being written."""
        sent: list[BaseEvent] = []
        for number, item in enumerate(self._events(event), 1):
            cursor = (event.sequence, number)
            item.metadata = {CURSOR: f"{cursor[0]}.{cursor[1]}"} if event.sequence else None
            if event.sequence and cursor <= self.after:
                self._open.follow(item)
                continue
            if not self._started and not isinstance(item, RunStartedEvent):
                sent += self._open.reopening(self._run_started())
            self._started = True
            self._open.follow(item)
            sent.append(item)
        return sent

    def _run_started(self) -> RunStartedEvent:
        return RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id)

    def _events(self, event: engine_pb2.RunEvent) -> Iterator[BaseEvent]:
        kind = event.WhichOneof("kind")
        if kind == "run_started":
            self.switchboard_run_id = event.run_id
            yield self._run_started()
        elif kind == "step":
            yield from self._step(event.step)
            if event.step.key == "context" and event.step.status == engine_pb2.STEP_STATUS_COMPLETED:
                # The run's message is in the thread now: the conversation so far.
                yield MessagesSnapshotEvent(messages=[])
        elif kind == "live_state":
            yield from self._live_state(event.live_state)
        elif kind == "delta":
            if event.delta.text:
                if not self._message:
                    self._messages += 1
                    self._message = f"{event.run_id}-{self._messages}"
                    yield TextMessageStartEvent(message_id=self._message, role="assistant")
                yield TextMessageContentEvent(message_id=self._message, delta=event.delta.text)
        elif kind == "action":
            yield from self._close_message()
            yield from self._tool_call(event.run_id, event.sequence, event.action)
        elif kind == "proposal":
            self._proposals.append(event.proposal)
            yield self._custom(event)
        elif kind == "final":
            yield from self._close_message()
            yield from self._close_steps()
            yield from self._record_parts()
            yield self._finished(event)
        elif kind == "error":
            yield from self._close_message()
            yield from self._close_steps()
            if event.sequence:  # a run that ended (not a stream that broke): its record is whole
                yield from self._record_parts()
            yield RunErrorEvent(message=event.error.message, code=event.error.code)
        elif kind is not None:  # skill_used, notice, reasoning
            yield self._custom(event)

    def _step(self, step: engine_pb2.Step) -> Iterator[BaseEvent]:
        if step.status == engine_pb2.STEP_STATUS_STARTED:
            if step.key not in self._steps:
                self._steps.append(step.key)
                yield StepStartedEvent(step_name=step.key)
        elif step.key in self._steps:
            self._steps.remove(step.key)
            yield StepFinishedEvent(step_name=step.key)

    def _live_state(self, change: engine_pb2.LiveStateChanged) -> Iterator[BaseEvent]:
        """The whole state at a snapshot; at an entry set, the JSON Patch from
        the state a client holds (none before a snapshot: nothing to patch)."""
        entries = {e.agent_id: LiveStateEntry.proto_dict(e) for e in change.entries}
        if change.type == memory_pb2.LIVE_STATE_EVENT_TYPE_SNAPSHOT:
            yield StateSnapshotEvent(snapshot={LIVE_STATE: entries})
        elif change.type == memory_pb2.LIVE_STATE_EVENT_TYPE_SET and self._open.state is not None:
            held = self._open.state
            changed = {**held, LIVE_STATE: {**held.get(LIVE_STATE, {}), **entries}}
            delta = jsonpatch.make_patch(held, changed).patch
            if delta:
                yield StateDeltaEvent.model_validate({"delta": delta})

    @staticmethod
    def _record_parts() -> Iterator[BaseEvent]:
        for name in RECORD_PARTS:
            yield CustomEvent(name=f"{CUSTOM_PREFIX}{name}", value=None)

    def _close_message(self) -> Iterator[BaseEvent]:
        if self._message:
            yield TextMessageEndEvent(message_id=self._message)
            self._message = ""

    def _close_steps(self) -> Iterator[BaseEvent]:
        while self._steps:
            yield StepFinishedEvent(step_name=self._steps.pop())

    @staticmethod
    def _tool_call(run_id: str, sequence: int, action: engine_pb2.ActionTaken) -> Iterator[BaseEvent]:
        call_id = action.call_id or f"{run_id}-call-{sequence}"
        yield ToolCallStartEvent(tool_call_id=call_id, tool_call_name=action.tool)
        if action.arguments:
            yield ToolCallArgsEvent(tool_call_id=call_id, delta=action.arguments)
        yield ToolCallEndEvent(tool_call_id=call_id)
        yield ToolCallResultEvent(
            message_id=f"{call_id}-result",
            tool_call_id=call_id,
            content=action.result or action.status,
            role="tool",
        )

    @staticmethod
    def _custom(event: engine_pb2.RunEvent) -> CustomEvent:
        kind = event.WhichOneof("kind") or "unknown"
        return CustomEvent(name=f"{CUSTOM_PREFIX}{kind}", value=event_data(event))

    def _finished(self, event: engine_pb2.RunEvent) -> RunFinishedEvent:
        final = event.final
        result: dict[str, Any] = {
            "text": final.text,
            "provider": final.provider,
            "model": final.model,
            "usage": {"tokens_in": final.usage.tokens_in, "tokens_out": final.usage.tokens_out},
            "switchboard_run_id": event.run_id,
        }
        waiting = final.status == engine_pb2.RUN_STATUS_WAITING_APPROVAL and self._proposals
        if waiting:
            interrupts = [
                Interrupt(
                    id=p.proposal_id,
                    reason=APPROVAL,
                    message=p.summary or p.page_title,
                    metadata={
                        "page_id": p.page_id,
                        "page_title": p.page_title,
                        "unified_diff": p.unified_diff,
                    },
                    response_schema=DECISION_SCHEMA,
                )
                for p in self._proposals
            ]
            outcome: Any = RunFinishedInterruptOutcome(interrupts=interrupts)
        else:
            outcome = RunFinishedSuccessOutcome()
        return RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, result=result, outcome=outcome)


class OpenParts:
    """What is open on an AG-UI stream after the events it has carried: the
    steps, the text message and the tool call being written; and what a
    client of it holds: the state (its snapshot with the deltas applied, as
    the client applies them), and whether it has had the messages."""

    def __init__(self) -> None:
        self.steps: list[str] = []
        self.message = ""
        self.tool_call: ToolCallStartEvent | None = None
        self.state: dict[str, Any] | None = None
        self.messages = False

    def follow(self, event: BaseEvent) -> None:
        if isinstance(event, StateSnapshotEvent):
            self.state = copy.deepcopy(event.snapshot)
        elif isinstance(event, StateDeltaEvent) and self.state is not None:
            self.state = jsonpatch.apply_patch(
                self.state, [op.model_dump(by_alias=True) for op in event.delta]
            )
        elif isinstance(event, MessagesSnapshotEvent):
            self.messages = True
        elif isinstance(event, StepStartedEvent):
            self.steps.append(event.step_name)
        elif isinstance(event, StepFinishedEvent) and event.step_name in self.steps:
            self.steps.remove(event.step_name)
        elif isinstance(event, TextMessageStartEvent):
            self.message = event.message_id
        elif isinstance(event, TextMessageEndEvent):
            self.message = ""
        elif isinstance(event, ToolCallStartEvent):
            self.tool_call = event
        elif isinstance(event, ToolCallEndEvent):
            self.tool_call = None

    def reopening(self, started: RunStartedEvent) -> list[BaseEvent]:
        """What a stream that begins now sends first, so that it is a whole
        AG-UI stream: the run's start, what a client holds by now (the
        messages, the state: snapshots after a connection interruption, as
        AG-UI has them), then what is open, as it was opened."""
        events: list[BaseEvent] = [started]
        if self.messages:
            events.append(MessagesSnapshotEvent(messages=[]))
        if self.state is not None:
            events.append(StateSnapshotEvent(snapshot=copy.deepcopy(self.state)))
        events += [StepStartedEvent(step_name=step) for step in self.steps]
        if self.message:
            events.append(TextMessageStartEvent(message_id=self.message, role="assistant"))
        if self.tool_call is not None:
            events.append(self.tool_call.model_copy(update={"metadata": None}))
        return events


def parse_cursor(value: str) -> tuple[int, int]:
    """A Last-Event-ID: "<sequence>.<k>" as this encoder writes it, or a bare
    sequence (after that run event's last AG-UI event); "" is (0, 0)."""
    if not value:
        return (0, 0)
    sequence, _, number = value.partition(".")
    return (int(sequence), int(number) if number else 1 << 30)


# What a resume entry's payload holds to settle a proposal.
DECISION_SCHEMA = {
    "type": "object",
    "properties": {"decision": {"type": "string", "enum": ["accept", "refuse"]}},
    "required": ["decision"],
}


def to_sse(event: BaseEvent) -> dict[str, str]:
    """One AG-UI event as sse-starlette's dict: its JSON (camelCase, unset
    fields left out, as the package's EventEncoder writes it) and, as the SSE
    id, its cursor (none on an event that is no resume point)."""
    data = event.model_dump_json(by_alias=True, exclude_none=True)
    cursor = (event.metadata or {}).get(CURSOR)
    return {"id": cursor, "data": data} if cursor else {"data": data}


def json_of(event: BaseEvent) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(event.model_dump_json(by_alias=True, exclude_none=True))
    return loaded


def to_fill(event: BaseEvent) -> bool:
    """Whether the route fills ``event`` in from the services: a messages
    snapshot (the thread's messages), the run record's parts (CUSTOM)."""
    if isinstance(event, MessagesSnapshotEvent):
        return True
    return isinstance(event, CustomEvent) and event.name.removeprefix(CUSTOM_PREFIX) in RECORD_PARTS
