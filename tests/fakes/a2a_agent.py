"""A remote A2A agent for tests: the a2a-sdk's own server (its agent card
route and JSON-RPC endpoint, on Starlette under uvicorn) around a tiny
AgentExecutor that answers deterministically.

Each question is answered from ``replies`` (question -> reply): the reply
comes back as a task whose artifact is streamed in two chunks and which
then completes. A reply ``"fail:<why>"`` fails the task with that status
message; ``"hang"`` never answers. Every question received is recorded with
its contextId, for the test to check what Switchboard sent."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from a2a.helpers import new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Role,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, TransportProtocol
from starlette.applications import Starlette

from tests.fakes.llm_server import serve_app
from tests.processes import free_port

RPC_PATH = "/a2a"


@dataclass(frozen=True)
class Received:
    context_id: str
    text: str


@dataclass
class FakeAgent:
    card_url: str
    replies: dict[str, str]
    received: list[Received] = field(default_factory=list)


class ScriptedExecutor(AgentExecutor):
    def __init__(self, agent: FakeAgent) -> None:
        self._agent = agent

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        question = context.get_user_input()
        task_id, context_id = context.task_id or "", context.context_id or ""
        self._agent.received.append(Received(context_id, question))
        reply = self._agent.replies.get(question, "I was not asked that.")
        await event_queue.enqueue_event(
            Task(id=task_id, context_id=context_id, status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED))
        )
        updater = TaskUpdater(event_queue, task_id, context_id)
        if reply == "hang":
            await asyncio.Event().wait()
        if reply.startswith("fail:"):
            why = new_text_message(reply.removeprefix("fail:"), role=Role.ROLE_AGENT)
            await updater.failed(why)
            return
        await updater.start_work()
        half = len(reply) // 2
        await updater.add_artifact([new_text_part(reply[:half])], artifact_id="answer", name="answer")
        await updater.add_artifact([new_text_part(reply[half:])], artifact_id="answer", append=True)
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


@contextmanager
def serve_agent(name: str, replies: dict[str, str], *, streaming: bool) -> Iterator[FakeAgent]:
    """A remote A2A agent on a free loopback port for the block; its card
    declares ``streaming``."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    agent = FakeAgent(f"{base}{AGENT_CARD_WELL_KNOWN_PATH}", replies)
    card = AgentCard(
        name=name,
        description=f"{name}, a scripted remote agent",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                url=f"{base}{RPC_PATH}", protocol_binding=TransportProtocol.JSONRPC, protocol_version="1.0"
            )
        ],
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(id="answer", name="Answer", description="answers what it is asked", tags=["test"])
        ],
    )
    handler = DefaultRequestHandler(ScriptedExecutor(agent), InMemoryTaskStore(), card)
    app = Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, RPC_PATH)])
    with serve_app(app, port):
        yield agent
