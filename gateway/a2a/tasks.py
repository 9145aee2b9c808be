"""A run as an A2A task, and its persisted events as A2A stream events, with
the SDK's protobuf types (``a2a.types.a2a_pb2``).

| Switchboard | A2A |
|---|---|
| a run of an agent (an ask) | a task; task id = run id |
| the ask's correlation id | the task's `contextId` |
| running, done, waiting_approval | working, completed, input-required |
| failed or budget_exceeded, cancelled | failed, canceled |
| `step` (started) | status update `working`, its message the step's label |
| `delta` | artifact update of the `answer` artifact (the first chunk replaces, the next append) |
| `final` | the whole `answer` artifact (last chunk), then the final status, its message the answer |
| `error` | status update `failed` (`canceled` for a cancelled run), its message the error |

With the resume-cursor extension active, every event carries the sequence
number of the run event it came from in its metadata, under the
extension's URI: a client that resubscribes with it gets the events after
it, with no gap and no duplicate."""

from __future__ import annotations

from collections.abc import Iterator

from a2a.types import a2a_pb2
from google.protobuf.struct_pb2 import Struct

from switchboard.engine.v1 import engine_pb2
from switchboard.threads.v1 import threads_pb2

# The resume-cursor extension: declared in every card, activated by the
# client with the A2A-Extensions header (gRPC: metadata), and the cursor
# sent back in Last-Event-ID (gRPC: last-event-id).
CURSOR_EXTENSION = "urn:switchboard:a2a:resume-cursor:v1"
CURSOR_PARAMETER = "Last-Event-ID"
ANSWER = "answer"  # the artifact id of a run's answer
# A task's id is its run's, its context id the ask's correlation id (kept on
# the run). Its request id "a2a:<contextId>:<messageId>" makes a resent
# message the same task.
REQUEST_PREFIX = "a2a:"

STATES = {
    engine_pb2.RUN_STATUS_RUNNING: a2a_pb2.TASK_STATE_WORKING,
    engine_pb2.RUN_STATUS_DONE: a2a_pb2.TASK_STATE_COMPLETED,
    engine_pb2.RUN_STATUS_WAITING_APPROVAL: a2a_pb2.TASK_STATE_INPUT_REQUIRED,
    engine_pb2.RUN_STATUS_FAILED: a2a_pb2.TASK_STATE_FAILED,
    engine_pb2.RUN_STATUS_BUDGET_EXCEEDED: a2a_pb2.TASK_STATE_FAILED,
    engine_pb2.RUN_STATUS_CANCELLED: a2a_pb2.TASK_STATE_CANCELED,
}
TERMINAL = frozenset(
    {
        a2a_pb2.TASK_STATE_COMPLETED,
        a2a_pb2.TASK_STATE_FAILED,
        a2a_pb2.TASK_STATE_CANCELED,
        a2a_pb2.TASK_STATE_REJECTED,
    }
)


def request_id(context_id: str, message_id: str) -> str:
    return f"{REQUEST_PREFIX}{context_id}:{message_id}"


def context_of(run: engine_pb2.Run) -> str:
    """The task's context id: its ask's correlation id, however the ask was
    made (the run's id when it named none)."""
    return run.correlation_id or run.id


def history_message(run: engine_pb2.Run, entry: threads_pb2.Entry) -> a2a_pb2.Message:
    """An entry of the run's ask as a message of its task's history: the
    question (with the messageId it was sent with over A2A) or the answer
    (the same message as the ended task's status)."""
    context_id = context_of(run)
    if entry.role == threads_pb2.ROLE_ASSISTANT:
        return agent_message(run.id, context_id, entry.content, f"{run.id}-status")
    sent = run.request_id.rpartition(":")[2] if run.request_id.startswith(REQUEST_PREFIX) else ""
    return a2a_pb2.Message(
        message_id=sent or f"{run.id}-question",
        task_id=run.id,
        context_id=context_id,
        role=a2a_pb2.ROLE_USER,
        parts=[a2a_pb2.Part(text=entry.content)],
    )


def agent_message(task_id: str, context_id: str, text: str, message_id: str) -> a2a_pb2.Message:
    return a2a_pb2.Message(
        message_id=message_id,
        task_id=task_id,
        context_id=context_id,
        role=a2a_pb2.ROLE_AGENT,
        parts=[a2a_pb2.Part(text=text)],
    )


def task_of(run: engine_pb2.Run, answer: str = "", status_text: str = "") -> a2a_pb2.Task:
    """A run as a task: its state, and when given its answer (an artifact)
    and the text of its status message (the answer, or why it failed)."""
    context_id = context_of(run)
    task = a2a_pb2.Task(id=run.id, context_id=context_id)
    task.status.state = STATES.get(run.status, a2a_pb2.TASK_STATE_WORKING)
    stamp = run.finish_time if run.HasField("finish_time") else run.start_time
    task.status.timestamp.CopyFrom(stamp)
    text = status_text or run.error
    if text:
        task.status.message.CopyFrom(agent_message(run.id, context_id, text, f"{run.id}-status"))
    if answer:
        task.artifacts.append(a2a_pb2.Artifact(artifact_id=ANSWER, parts=[a2a_pb2.Part(text=answer)]))
    task.metadata.update({"switchboard_agent_id": run.agent_id})
    return task


Event = a2a_pb2.Task | a2a_pb2.TaskStatusUpdateEvent | a2a_pb2.TaskArtifactUpdateEvent


class TaskEncoder:
    """The A2A events of one run, in order. ``after``: the sequence number a
    resumed stream goes on from (0: the whole run). ``cursor``: write each
    event's sequence number in its metadata (the extension is active)."""

    def __init__(self, task_id: str, context_id: str, after: int = 0, cursor: bool = False) -> None:
        self.task_id, self.context_id = task_id, context_id
        self.after, self.cursor = after, cursor
        self.answer = ""  # the answer so far, whatever was sent
        self.state: a2a_pb2.TaskState = a2a_pb2.TASK_STATE_WORKING
        self.status_text = ""
        self._proposals: list[engine_pb2.ProposalMade] = []

    def encode(self, event: engine_pb2.RunEvent) -> list[Event]:
        """The A2A events this run event gives; none for one at or before
        the resume cursor (its state is still kept)."""
        events = list(self._events(event))
        if event.sequence <= self.after:
            return []
        if self.cursor:
            for item in events:
                item.metadata.update({CURSOR_EXTENSION: {"sequence": event.sequence}})
        return events

    def _status(self, state: a2a_pb2.TaskState, text: str, key: str) -> a2a_pb2.TaskStatusUpdateEvent:
        update = a2a_pb2.TaskStatusUpdateEvent(task_id=self.task_id, context_id=self.context_id)
        update.status.state = state
        update.status.timestamp.GetCurrentTime()
        if text:
            message_id = f"{self.task_id}-{key}"
            update.status.message.CopyFrom(agent_message(self.task_id, self.context_id, text, message_id))
        return update

    def _artifact(self, text: str, *, append: bool, last: bool) -> a2a_pb2.TaskArtifactUpdateEvent:
        artifact = a2a_pb2.Artifact(artifact_id=ANSWER, parts=[a2a_pb2.Part(text=text)])
        return a2a_pb2.TaskArtifactUpdateEvent(
            task_id=self.task_id,
            context_id=self.context_id,
            artifact=artifact,
            append=append,
            last_chunk=last,
        )

    def _events(self, event: engine_pb2.RunEvent) -> Iterator[Event]:
        kind = event.WhichOneof("kind")
        key = str(event.sequence)
        if kind == "step" and event.step.status == engine_pb2.STEP_STATUS_STARTED:
            yield self._status(a2a_pb2.TASK_STATE_WORKING, event.step.label, key)
        elif kind == "delta" and event.delta.text:
            append = bool(self.answer)
            self.answer += event.delta.text
            yield self._artifact(event.delta.text, append=append, last=False)
        elif kind == "proposal":
            self._proposals.append(event.proposal)
        elif kind == "final":
            final = event.final
            self.answer = final.text or self.answer
            waiting = final.status == engine_pb2.RUN_STATUS_WAITING_APPROVAL
            self.state = a2a_pb2.TASK_STATE_INPUT_REQUIRED if waiting else a2a_pb2.TASK_STATE_COMPLETED
            self.status_text = self.answer
            yield self._artifact(self.answer, append=False, last=True)
            status = self._status(self.state, self.status_text, key)
            if waiting and self._proposals:
                # What the decision is about: the proposals awaiting it.
                status.metadata.update({"switchboard_proposals": [_proposal(p) for p in self._proposals]})
            yield status
        elif kind == "error":
            cancelled = event.error.code == "CANCELLED"
            self.state = a2a_pb2.TASK_STATE_CANCELED if cancelled else a2a_pb2.TASK_STATE_FAILED
            self.status_text = event.error.message
            status = self._status(self.state, self.status_text, key)
            status.metadata.update({"switchboard_error_code": event.error.code})
            yield status

    def task(self, run: engine_pb2.Run | None = None) -> a2a_pb2.Task:
        """The task as these events left it (or as ``run`` records it)."""
        if run is not None:
            return task_of(run, self.answer, self.status_text)
        task = a2a_pb2.Task(id=self.task_id, context_id=self.context_id)
        task.status.state = self.state
        task.status.timestamp.GetCurrentTime()
        if self.status_text:
            message = agent_message(self.task_id, self.context_id, self.status_text, f"{self.task_id}-status")
            task.status.message.CopyFrom(message)
        if self.answer:
            task.artifacts.append(
                a2a_pb2.Artifact(artifact_id=ANSWER, parts=[a2a_pb2.Part(text=self.answer)])
            )
        return task


def _proposal(proposal: engine_pb2.ProposalMade) -> dict[str, str]:
    return {
        "proposal_id": proposal.proposal_id,
        "page_id": proposal.page_id,
        "summary": proposal.summary,
        "unified_diff": proposal.unified_diff,
    }


def struct(values: dict[str, str]) -> Struct:
    message = Struct()
    message.update(values)
    return message


def cursor_of(value: str) -> int:
    """A Last-Event-ID as the extension reads it: a sequence number, or the
    "<sequence>.<k>" another encoder wrote (its run event's number)."""
    sequence = value.strip().partition(".")[0]
    return int(sequence) if sequence.isdigit() and len(sequence) <= 18 else -1
