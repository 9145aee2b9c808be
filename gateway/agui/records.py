"""What an AG-UI stream carries that the run's log does not, read from the
services when the stream reaches it (gateway.agui.encoder leaves it empty):

- MESSAGES_SNAPSHOT: the thread's messages up to the run's own, oldest
  first (the newest ``MESSAGES_LIMIT``). The thread is append-only, so
  every read of the run, a resumed one included, gives the same snapshot.
- CUSTOM ``switchboard.sources`` and ``switchboard.routing``: the run
  record's sources and router decision, as GET /api/agent/runs/{id} shows
  them; read once the run has ended, when its record is whole."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    CustomEvent,
    FunctionCall,
    Message,
    MessagesSnapshotEvent,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from fastapi import Request

from gateway import deps, responses
from gateway.agui.encoder import CUSTOM_PREFIX, RECORD_PARTS
from gateway.deps import rpc
from switchboard.engine.v1 import engine_pb2, engine_service_pb2
from switchboard.threads.v1 import threads_pb2, threads_service_pb2

View = threads_service_pb2.ListEntriesRequest
# The newest messages a snapshot holds (a long thread's older ones are left
# out: GET /api/agent/conversations/{id}/entries pages through them all).
MESSAGES_LIMIT = 500
# How far back the run's own message is looked for (a later read of an old run).
SEEK_PAGES = 20


@dataclass(frozen=True)
class Thread:
    """The thread of an AG-UI threadId: one of the caller's conversations,
    or an agent's shared thread."""

    conversation_id: str = ""
    agent_id: str = ""

    def view(self) -> View:
        if self.agent_id:
            return View(for_agent=View.ForAgent(agent_id=self.agent_id))
        return View(for_conversation=View.ForConversation(conversation_id=self.conversation_id))


class Records:
    """Fills a stream's events in for ``user``, each read once per stream."""

    def __init__(self, request: Request, user: str, thread: Thread) -> None:
        self._request, self._user, self._thread = request, user, thread
        self._messages: list[Message] | None = None
        self._record: dict[str, Any] | None = None

    async def fill(self, event: BaseEvent, run_id: str) -> BaseEvent | None:
        """``event`` with what it shows; None when there is nothing to show
        (a snapshot without the run's message would empty the client's)."""
        if isinstance(event, MessagesSnapshotEvent):
            if self._messages is None:
                self._messages = await self._thread_messages(run_id)
            return event.model_copy(update={"messages": self._messages}) if self._messages else None
        if isinstance(event, CustomEvent):
            if self._record is None:
                self._record = await self._run_record(run_id)
            value = self._record.get(RECORD_PARTS[event.name.removeprefix(CUSTOM_PREFIX)])
            return event.model_copy(update={"value": value})
        return event

    async def _thread_messages(self, run_id: str) -> list[Message]:
        """Newest first until the run's own message, then the messages
        before it, up to MESSAGES_LIMIT; returned oldest first."""
        kept: list[threads_pb2.Entry] = []
        token = ""
        for _ in range(SEEK_PAGES):
            view = self._thread.view()
            view.descending, view.page_size, view.page_token = True, MESSAGES_LIMIT, token
            page: threads_service_pb2.ListEntriesResponse = await rpc(
                self._request, deps.threads(self._request).ListEntries, view, self._user
            )
            for entry in page.entries:
                if kept or (entry.run_id == run_id and entry.role == threads_pb2.ROLE_USER):
                    kept.append(entry)
                if len(kept) == MESSAGES_LIMIT:
                    break
            token = page.next_page_token
            if not token or len(kept) == MESSAGES_LIMIT:
                break
        return [message for entry in reversed(kept) if (message := _message(entry)) is not None]

    async def _run_record(self, run_id: str) -> dict[str, Any]:
        found: engine_service_pb2.GetRunResponse = await rpc(
            self._request,
            deps.engine(self._request).GetRun,
            engine_service_pb2.GetRunRequest(run_id=run_id),
            self._user,
        )
        run: engine_pb2.Run = found.run
        return responses.Run.proto_dict(run)


def _message(entry: threads_pb2.Entry) -> Message | None:
    """A thread entry as AG-UI's message: its id is the entry's; who spoke
    is its name (the requester of a question, the agent of an answer)."""
    if entry.role == threads_pb2.ROLE_USER:
        return UserMessage(id=entry.id, content=entry.content, name=entry.requester or None)
    if entry.role == threads_pb2.ROLE_ASSISTANT:
        calls = [
            ToolCall(id=c.id, type="function", function=FunctionCall(name=c.name, arguments=c.arguments))
            for c in entry.tool_calls
        ]
        return AssistantMessage(
            id=entry.id,
            content=entry.content or (None if calls else ""),
            name=entry.target or None,
            tool_calls=calls or None,
        )
    if entry.role == threads_pb2.ROLE_TOOL:
        return ToolMessage(id=entry.id, content=entry.content, tool_call_id=entry.tool_call_id)
    return None
