"""What a remote A2A agent's responses add up to (services/engine/runs/remote.py):
a message, a task with artifacts (whole or streamed in chunks), and every
way a remote can end without an answer, each a RemoteAgentFailed saying why."""

from __future__ import annotations

import pytest
from a2a.helpers import new_text_artifact, new_text_message, new_text_part
from a2a.types.a2a_pb2 import (
    Artifact,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from services.engine.runs.remote import RemoteAgentFailed, RemoteAnswer


def answer_of(*responses: StreamResponse) -> RemoteAnswer:
    answer = RemoteAnswer()
    for response in responses:
        answer.add(response)
    return answer


def status(state: TaskState, text: str = "") -> StreamResponse:
    message = new_text_message(text) if text else None
    return StreamResponse(
        status_update=TaskStatusUpdateEvent(task_id="t", status=TaskStatus(state=state, message=message))
    )


def chunk(text: str, append: bool) -> StreamResponse:
    artifact = Artifact(artifact_id="a", parts=[new_text_part(text)])
    return StreamResponse(
        artifact_update=TaskArtifactUpdateEvent(task_id="t", artifact=artifact, append=append)
    )


def test_a_message_is_the_answer() -> None:
    assert (
        answer_of(StreamResponse(message=new_text_message("Oui, c'est prêt."))).result() == "Oui, c'est prêt."
    )


def test_a_completed_task_answers_with_its_artifacts() -> None:
    task = Task(
        id="t",
        status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED),
        artifacts=[new_text_artifact("answer", "Décision : mardi.")],
    )
    assert answer_of(StreamResponse(task=task)).result() == "Décision : mardi."


def test_streamed_chunks_are_joined_and_a_replaced_artifact_starts_again() -> None:
    submitted = StreamResponse(task=Task(id="t", status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)))
    answer = answer_of(submitted, chunk("draft", False), chunk("Ship ", False), chunk("on Tuesday.", True))
    assert not answer.finished
    answer.add(status(TaskState.TASK_STATE_COMPLETED))
    assert answer.result() == "Ship on Tuesday." and answer.task_id == "t"


def test_a_completed_task_without_artifacts_answers_with_its_status_message() -> None:
    assert answer_of(status(TaskState.TASK_STATE_COMPLETED, "Done: merged.")).result() == "Done: merged."


@pytest.mark.parametrize(
    ("responses", "why"),
    [
        ([status(TaskState.TASK_STATE_FAILED, "plus de crédit")], "its task failed: plus de crédit"),
        ([status(TaskState.TASK_STATE_REJECTED)], "its task rejected"),
        ([status(TaskState.TASK_STATE_CANCELED)], "its task was cancelled"),
        ([status(TaskState.TASK_STATE_INPUT_REQUIRED, "Which branch?")], "asks for more input"),
        ([status(TaskState.TASK_STATE_AUTH_REQUIRED)], "asks for authentication"),
        ([status(TaskState.TASK_STATE_WORKING), chunk("half an", False)], "ended before its task completed"),
        ([], "ended before its task completed"),
        ([status(TaskState.TASK_STATE_COMPLETED)], "answered with no text"),
        ([StreamResponse(message=new_text_message("   "))], "answered with no text"),
    ],
)
def test_every_end_without_an_answer_says_why(responses: list[StreamResponse], why: str) -> None:
    with pytest.raises(RemoteAgentFailed, match=why):
        answer_of(*responses).result()


def test_an_empty_response_is_malformed() -> None:
    with pytest.raises(RemoteAgentFailed, match="neither a message nor a task"):
        RemoteAnswer().add(StreamResponse())
