"""Asking a remote A2A agent: the question goes out with the a2a-sdk's
client (SendMessage, or its stream when the agent's card declares
streaming), the ask's correlation id as the A2A contextId, through the
outbound guard. Its card is read again at each ask, so an agent that moved
keeps answering.

Whatever the remote does (not answer, answer slowly, fail its task, send
something that is no A2A answer), the ask ends within ``timeout`` with an
answer or :class:`RemoteAgentFailed` saying why: never a hung run."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from a2a.client import ClientConfig, ClientFactory
from a2a.helpers import get_artifact_text, get_message_text
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)

from services.shared.agent_cards import BINDINGS, CardUnreadable, guarded_client, read_card
from services.shared.errors import FailedPrecondition
from services.shared.outbound_urls import UrlPolicy

# States a task ends in without an answer, and states that wait for what
# an ask cannot give (more input, credentials).
FAILED = {
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_REJECTED: "rejected",
    TaskState.TASK_STATE_CANCELED: "was cancelled",
}
WAITING = {
    TaskState.TASK_STATE_INPUT_REQUIRED: "asks for more input",
    TaskState.TASK_STATE_AUTH_REQUIRED: "asks for authentication",
}
# How often a task that is not finished when its answer arrives is read
# again (within the ask's timeout).
POLL_SECONDS = 0.5
MAX_ERROR_CHARS = 500


class RemoteAgentFailed(FailedPrecondition):
    """The remote agent gave no answer; the message says why."""


@dataclass
class RemoteAnswer:
    """What the agent's responses add up to: a message answers at once; a
    task answers with its artifacts' text (or its status message) once it
    completes."""

    text: str = ""
    task_id: str = ""
    state: TaskState = TaskState.TASK_STATE_UNSPECIFIED
    status_text: str = ""
    artifacts: dict[str, str] = field(default_factory=dict)
    answered: bool = False  # a message came back: nothing more to wait for

    def add(self, response: StreamResponse) -> None:
        kind = response.WhichOneof("payload")
        if kind == "message":
            self.text, self.answered = get_message_text(response.message), True
        elif kind == "task":
            self.add_task(response.task)
        elif kind == "status_update":
            self.task_id = response.status_update.task_id or self.task_id
            self._status(response.status_update.status.state, response.status_update.status.message)
        elif kind == "artifact_update":
            update = response.artifact_update
            self.task_id = update.task_id or self.task_id
            text = get_artifact_text(update.artifact, "")
            key = update.artifact.artifact_id
            self.artifacts[key] = self.artifacts.get(key, "") + text if update.append else text
        else:
            raise RemoteAgentFailed("its response holds neither a message nor a task")

    def add_task(self, task: Task) -> None:
        self.task_id = task.id or self.task_id
        self._status(task.status.state, task.status.message)
        if task.artifacts:
            self.artifacts = {a.artifact_id: get_artifact_text(a, "") for a in task.artifacts}

    def _status(self, state: TaskState, message: Message) -> None:
        self.state = state
        self.status_text = get_message_text(message) or self.status_text

    @property
    def finished(self) -> bool:
        return self.answered or self.state in (TaskState.TASK_STATE_COMPLETED, *FAILED, *WAITING)

    def result(self) -> str:
        """The answer's text; RemoteAgentFailed when there is none."""
        if self.state in FAILED:
            why = f": {self.status_text}" if self.status_text else ""
            raise RemoteAgentFailed(f"its task {FAILED[self.state]}{why}")
        if self.state in WAITING:
            raise RemoteAgentFailed(f"its task {WAITING[self.state]}, which an ask cannot give")
        if not self.finished:
            raise RemoteAgentFailed("its answer ended before its task completed")
        text = self.text if self.answered else "\n".join(t for t in self.artifacts.values() if t)
        text = (text or self.status_text).strip()
        if not text:
            raise RemoteAgentFailed("it answered with no text")
        return text


class RemoteAgents:
    """Sends asks to remote A2A agents."""

    def __init__(self, policy: UrlPolicy, timeout: float) -> None:
        """``timeout``: the longest one ask may take, card and answer included."""
        self._policy = policy
        self._timeout = timeout

    async def ask(self, card_url: str, question: str, context_id: str, message_id: str) -> str:
        """The agent's answer to ``question``; RemoteAgentFailed saying why there is none."""
        try:
            async with asyncio.timeout(self._timeout):
                return await self._ask(card_url, question, context_id, message_id)
        except TimeoutError:
            raise RemoteAgentFailed(f"it did not answer within {self._timeout:g} s") from None
        except RemoteAgentFailed:
            raise
        except CardUnreadable as exc:
            raise RemoteAgentFailed(_clip(f"its agent card cannot be used: {exc}")) from None
        except Exception as exc:  # noqa: BLE001 - whatever a foreign server does, the ask ends with why
            raise RemoteAgentFailed(_clip(f"its answer could not be read ({_described(exc)})")) from None

    async def _ask(self, card_url: str, question: str, context_id: str, message_id: str) -> str:
        async with guarded_client(self._policy, self._timeout) as http:
            card = await read_card(http, card_url, self._policy)
            config = ClientConfig(
                streaming=card.capabilities.streaming,
                httpx_client=http,
                supported_protocol_bindings=list(BINDINGS),
            )
            client = ClientFactory(config).create(card)
            request = SendMessageRequest(
                message=Message(
                    message_id=message_id,
                    context_id=context_id,
                    role=Role.ROLE_USER,
                    parts=[Part(text=question)],
                )
            )
            answer = RemoteAnswer()
            async for response in client.send_message(request):
                answer.add(response)
            # An agent that answered before its task finished: read it again.
            while not answer.finished and answer.task_id:
                await asyncio.sleep(POLL_SECONDS)
                answer.add_task(await client.get_task(GetTaskRequest(id=answer.task_id)))
            return answer.result()


def _described(exc: BaseException) -> str:
    message = getattr(exc, "message", None) or str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _clip(text: str) -> str:
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"
