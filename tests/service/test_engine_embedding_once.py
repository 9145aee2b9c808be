"""One chat run embeds its request once across memory and the router: the
engine passes memory's recall embedding on to the router
(GetChatContextResponse.recall_query_embedding -> RouteMessageRequest.
text_embedding). Counted on the embedder both in-process services share,
against the real engine, memory and router; in English and French."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest

from services.shared.embeddings import HashingEmbedder, Vectors
from switchboard.engine.v1 import engine_pb2
from switchboard.engine.v1 import engine_service_pb2 as pb
from switchboard.memory.v1 import memory_pb2, memory_service_pb2
from switchboard.router.v1 import router_service_pb2
from switchboard.threads.v1 import threads_pb2, threads_service_pb2
from tests.conftest import DatabaseFactory
from tests.service.harness import as_user
from tests.service.system import System, collect, system

ALICE = as_user("alice")
MESSAGES = {
    "en": ("Write the weekly status report", "Status reports go out on Friday"),
    "fr": ("Rédige le rapport d'avancement hebdomadaire", "Le rapport d'avancement part le vendredi"),
}


@pytest.fixture
def embedded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every text the hashing embedder is asked to embed, by any service."""
    texts: list[str] = []
    inner = HashingEmbedder.embed

    def counting(self: HashingEmbedder, batch: Sequence[str]) -> Vectors:
        texts.extend(batch)
        return inner(self, batch)

    monkeypatch.setattr(HashingEmbedder, "embed", counting)
    return texts


@pytest.fixture
async def sb(make_database: DatabaseFactory) -> AsyncIterator[System]:
    async with system(make_database) as running_system:
        yield running_system


async def note(sb: System, title: str) -> None:
    await sb.memory.CreateNote(
        memory_service_pb2.CreateNoteRequest(
            note=memory_pb2.Note(kind=memory_pb2.NOTE_KIND_FACT, title=title, body=title)
        ),
        **ALICE,
    )


async def chat(sb: System, message: str, memory: bool = True) -> engine_pb2.Run:
    request = threads_service_pb2.CreateConversationRequest(title="Embedding once")
    if not memory:
        request.allowed_sources.CopyFrom(threads_pb2.AllowedSources(memory=False))
    conversation = (await sb.threads.CreateConversation(request, **ALICE)).conversation.id
    events = await collect(
        sb.engine.StartRun(pb.StartRunRequest(conversation_id=conversation, message=message), **ALICE)
    )
    run = (await sb.engine.GetRun(pb.GetRunRequest(run_id=events[0].run_id), **ALICE)).run
    assert run.status == engine_pb2.RUN_STATUS_DONE
    return run


@pytest.mark.parametrize("language", ["en", "fr"])
async def test_a_chat_run_embeds_its_request_once(sb: System, embedded: list[str], language: str) -> None:
    message, title = MESSAGES[language]
    await note(sb, title)
    embedded.clear()
    run = await chat(sb, message)
    # Memory recalled with it, and the router matched skills on it.
    assert [s.title for s in run.sources if s.kind == "memory"] == [title]
    assert run.router_decision.skills.candidates and run.router_decision.skills.embedder == "hashing"
    assert embedded.count(message) == 1
    # The same decision as the router's when it embeds the message itself.
    alone = await sb.router.RouteSkills(
        router_service_pb2.RouteSkillsRequest(text=message, offline=True), **ALICE
    )
    assert embedded.count(message) == 2
    assert list(run.router_decision.skills.candidates) == list(alone.decision.candidates)


@pytest.mark.parametrize("language", ["en", "fr"])
async def test_without_recall_the_router_embeds_the_request(
    sb: System, embedded: list[str], language: str
) -> None:
    """Memory off for the conversation, a project without notes, memory
    down: memory embedded nothing, and the router embeds as it always did."""
    message, title = MESSAGES[language]
    embedded.clear()
    await chat(sb, message)  # no note yet: recall compares no vector
    assert embedded.count(message) == 1
    await note(sb, title)
    embedded.clear()
    run = await chat(sb, message, memory=False)
    assert embedded.count(message) == 1 and run.router_decision.skills.candidates
    await sb.services["memory"].stop(None)
    embedded.clear()
    run = await chat(sb, message)
    assert embedded.count(message) == 1 and run.router_decision.skills.candidates
