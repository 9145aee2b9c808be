"""French all the way: every text a run writes for a person — its steps,
notices, refusals, "remember that…" proposal and answer, the instruction
page a user without one gets — is in the run's language (Run.language): the
one the client asked for, else the language of the user's message. The same
flows in English stay English. Exact texts, against a recording OpenAI-wire
provider (tests/fakes/llm_server.py) that keeps what the model received.
(A conversation's title prompt: tests/service/test_engine_context.py.)"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest

from services.memory.pages.templates import TEMPLATES
from switchboard.engine.v1 import engine_pb2, engine_service_pb2
from switchboard.memory.v1 import memory_service_pb2, pages_service_pb2
from switchboard.threads.v1 import threads_pb2, threads_service_pb2
from tests.conftest import DatabaseFactory
from tests.fakes.llm_server import FakeServer, openai_app, serve
from tests.service.harness import as_user, expect_error
from tests.service.system import System, collect, system

ALICE = as_user("alice")
TEMPLATE = {t.language: t for t in TEMPLATES if t.id in ("my-switchboard-ai", "mon-ia-switchboard")}


@pytest.fixture(scope="module")
def recording() -> Iterator[FakeServer]:
    with serve(openai_app) as server:
        yield server


@pytest.fixture
async def sb(make_database: DatabaseFactory, recording: FakeServer) -> AsyncIterator[System]:
    recording.script.reset()
    providers = [{"name": "remote", "kind": "openai", "base_url": f"{recording.url}/v1"}]
    models = [{"id": "remote-model", "provider": "remote", "model": "model-x", "profile": "balanced"}]
    async with system(
        make_database,
        providers_json=json.dumps(providers),
        router_settings={"models_json": json.dumps(models), "arbitration_enabled": False},
        instruction_page_budget_chars=200,
    ) as running_system:
        yield running_system


async def start(
    sb: System,
    text: str,
    language: str = "",
    allowed: threads_pb2.AllowedSources | None = None,
    budget: engine_pb2.Budget | None = None,
) -> list[engine_pb2.RunEvent]:
    chat = await sb.threads.CreateConversation(
        threads_service_pb2.CreateConversationRequest(title="Language", allowed_sources=allowed), **ALICE
    )
    request = engine_service_pb2.StartRunRequest(
        conversation_id=chat.conversation.id,
        message=text,
        requested_model="remote-model",
        surface=engine_pb2.SURFACE_CHAT,
        language=language,
        budget=budget,
    )
    return await collect(sb.engine.StartRun(request, metadata=ALICE["metadata"], timeout=60))


def of_kind(events: list[engine_pb2.RunEvent], kind: str) -> list[Any]:
    return [getattr(e, kind) for e in events if e.WhichOneof("kind") == kind]


def step_labels(events: list[engine_pb2.RunEvent]) -> list[tuple[str, str]]:
    return [(s.key, s.label) for s in of_kind(events, "step") if s.status == engine_pb2.STEP_STATUS_STARTED]


# "Remember that…", by a user who has no instruction page yet.

REMEMBER = {
    "fr": {
        "steps": [
            ("context", "Lecture du contexte"),
            ("proposal", "Préparation d'une modification de vos instructions"),
        ],
        "answer": "J'ajouterais ceci à votre page d'instructions « Mon IA Switchboard » : {fact}. "
        "Rien ne change tant que vous n'acceptez pas la proposition.",
        "reason": "L'utilisateur m'a demandé de retenir : {fact}",
        # The line goes at the end of the template's remember section.
        "after": "- p. ex. je relis les pull requests le matin ; des résumés en puces\n",
    },
    "en": {
        "steps": [("context", "Reading context"), ("proposal", "Preparing a change to your instructions")],
        "answer": 'I would add this to your instruction page "My Switchboard AI": {fact}. '
        "Nothing changes until you accept the proposal.",
        "reason": "The user asked me to remember: {fact}",
        "after": "- e.g. I review pull requests in the morning; summaries as bullet points\n",
    },
}


@pytest.mark.parametrize(
    ("message", "asked", "language", "fact"),
    [
        ("Retiens que je préfère les réponses courtes", "", "fr", "Je préfère les réponses courtes"),
        ("Remember that I prefer short answers", "", "en", "I prefer short answers"),
        # The page's language wins over the message's.
        ("Remember that I prefer short answers", "fr-FR", "fr", "I prefer short answers"),
    ],
)
async def test_remember_proposes_in_the_users_language_from_the_template_of_that_language(
    sb: System, recording: FakeServer, message: str, asked: str, language: str, fact: str
) -> None:
    events = await start(sb, message, asked)
    texts = REMEMBER[language]
    template = TEMPLATE[language]
    assert recording.script.requests == []  # the engine proposes it: no model call
    (started,) = of_kind(events, "run_started")
    assert started.language == language
    assert step_labels(events) == texts["steps"]
    (proposal,) = of_kind(events, "proposal")
    assert (proposal.summary, proposal.page_title) == (fact, template.title)
    assert f"\n {texts['after']}+- {fact}\n" in proposal.unified_diff
    answer = texts["answer"].format(fact=fact)
    assert events[-1].final.text == answer
    assert events[-1].final.status == engine_pb2.RUN_STATUS_WAITING_APPROVAL
    run = (await sb.engine.GetRun(engine_service_pb2.GetRunRequest(run_id=events[0].run_id), **ALICE)).run
    assert run.language == language
    entries = await sb.threads.ListEntries(
        threads_service_pb2.ListEntriesRequest(
            for_conversation=threads_service_pb2.ListEntriesRequest.ForConversation(
                conversation_id=run.conversation_id
            )
        ),
        **ALICE,
    )
    assert [e.content for e in entries.entries] == [message, answer]
    # The page a user without one gets: the template of the run's language.
    page = await sb.pages.GetPage(pages_service_pb2.GetPageRequest(page_id=proposal.page_id), **ALICE)
    assert (page.page.title, page.page.body) == (template.title, template.body)
    stored = await sb.pages.GetProposal(
        pages_service_pb2.GetProposalRequest(proposal_id=proposal.proposal_id), **ALICE
    )
    assert stored.proposal.reason == texts["reason"].format(fact=fact)
    accepted = await sb.pages.AcceptProposal(
        pages_service_pb2.AcceptProposalRequest(proposal_id=proposal.proposal_id), **ALICE
    )
    assert accepted.page.body == template.body.replace(texts["after"], f"{texts['after']}- {fact}\n", 1)


# Notices, steps and refusals of a run that calls the model: the page is cut
# to its budget, a mention the conversation does not allow, a note the agent
# proposes in the user's words, and one it may not write (not their words).

NOTICES = {
    "fr": {
        "message": "Note la roadmap de @page:roadmap pour moi",
        "steps": [
            ("context", "Lecture du contexte"),
            ("routing", "Choix des compétences et du modèle"),
            ("generate", "Rédaction avec model-x"),
            ("tools.memory", "Enregistrement en mémoire"),
            ("tools.memory", "Enregistrement en mémoire"),
            ("generate", "Rédaction avec model-x"),
        ],
        "notices": [
            (
                "INSTRUCTION_PAGE_TRUNCATED",
                "la page d'instructions « Mon IA Switchboard » a été tronquée à ses 200 premiers caractères",
            ),
            (
                "MENTION_NOT_ALLOWED",
                "@page:roadmap ne fait pas partie des sources autorisées de cette conversation : "
                "cette source ne sera pas lue.",
            ),
            ("NOTE_PROPOSED", "la proposition de note {proposal_id} attend une relecture : Roadmap"),
            (
                "WRITE_REFUSED",
                "save_note a été refusé : ce qu'il aurait écrit n'était pas dans les mots de votre message "
                "(un contenu lu pendant l'exécution n'est jamais écrit en mémoire).",
            ),
        ],
    },
    "en": {
        "message": "Note the roadmap of @page:roadmap for me",
        "steps": [
            ("context", "Reading context"),
            ("routing", "Choosing skills and model"),
            ("generate", "Writing with model-x"),
            ("tools.memory", "Saving to memory"),
            ("tools.memory", "Saving to memory"),
            ("generate", "Writing with model-x"),
        ],
        "notices": [
            (
                "INSTRUCTION_PAGE_TRUNCATED",
                "the instruction page 'My Switchboard AI' was cut to its first 200 characters",
            ),
            (
                "MENTION_NOT_ALLOWED",
                "@page:roadmap is not among this conversation's allowed sources; it will not be read.",
            ),
            ("NOTE_PROPOSED", "note proposal {proposal_id} awaits review: Roadmap"),
            (
                "WRITE_REFUSED",
                "save_note was refused: what it would have written was not in the words of your message "
                "(content read in this run is never written to memory).",
            ),
        ],
    },
}


@pytest.mark.parametrize("language", ["fr", "en"])
async def test_a_runs_steps_notices_and_refusals_follow_its_language(
    sb: System, recording: FakeServer, language: str
) -> None:
    expected = NOTICES[language]
    # An instruction page from the template of the user's language, longer than the budget.
    created = await sb.pages.CreateInstructionPage(
        pages_service_pb2.CreateInstructionPageRequest(request_id="page", language=language), **ALICE
    )
    assert created.page.title == TEMPLATE[language].title
    # The message does not ask to save: a note in its words is a proposal for
    # the project; one with other words is refused.
    proposed = {"kind": "fact", "title": "Roadmap", "body": "roadmap"}
    foreign = {"kind": "fact", "title": "Roadmap", "body": "delete every page"}
    calls = [{"name": "save_note", "arguments": proposed}, {"name": "save_note", "arguments": foreign}]
    recording.script.steps = [f"tools:{json.dumps(calls)}", "say:Done."]
    events = await start(sb, expected["message"], allowed=threads_pb2.AllowedSources(workspace=False))
    assert events[-1].final.text == "Done."
    assert step_labels(events) == expected["steps"]
    (note,) = (
        await sb.memory.ListNoteProposals(memory_service_pb2.ListNoteProposalsRequest(), **ALICE)
    ).proposals
    assert [(n.code, n.message) for n in of_kind(events, "notice")] == [
        (code, text.format(proposal_id=note.id)) for code, text in expected["notices"]
    ]
    # What the model received: the message as written, the page cut to its
    # budget; the refusal it read is for it, in English whatever the run's language.
    first, second = recording.script.requests
    assert first["messages"][-1] == {"role": "user", "content": expected["message"]}
    assert TEMPLATE[language].body[:60] in first["messages"][0]["content"]
    refusal = second["messages"][-1]
    assert (
        refusal["role"] == "tool"
        and "refused: a write may only hold the user's own words" in refusal["content"]
    )


@pytest.mark.parametrize(
    ("message", "ending"),
    [
        ("Relis la roadmap et note-la", "budget d'étapes (1) dépassé"),
        ("Read the roadmap and note it", "step budget of 1 exceeded"),
    ],
)
async def test_a_runs_ending_is_said_in_its_language(
    sb: System, recording: FakeServer, message: str, ending: str
) -> None:
    """The model's first call is the budget's one step: its tool call ends
    the run, said in the message's language in the stream and the record."""
    recording.script.steps = ['tool:search_workspace:{"query": "roadmap"}']
    events = await start(sb, message, budget=engine_pb2.Budget(max_steps=1))
    assert (events[-1].error.code, events[-1].error.message) == ("BUDGET_EXCEEDED", ending)
    run = (await sb.engine.GetRun(engine_service_pb2.GetRunRequest(run_id=events[0].run_id), **ALICE)).run
    assert (run.status, run.error) == (engine_pb2.RUN_STATUS_BUDGET_EXCEEDED, ending)
    assert len(recording.script.requests) == 1


async def test_a_malformed_language_tag_is_refused_before_anything_is_written(sb: System) -> None:
    chat = await sb.threads.CreateConversation(threads_service_pb2.CreateConversationRequest(), **ALICE)
    request = engine_service_pb2.StartRunRequest(
        conversation_id=chat.conversation.id, message="Bonjour", language="français"
    )
    await expect_error(
        collect(sb.engine.StartRun(request, **ALICE)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    listed = await sb.engine.ListRuns(
        engine_service_pb2.ListRunsRequest(conversation_id=chat.conversation.id), **ALICE
    )
    assert list(listed.runs) == []
    await expect_error(
        sb.pages.CreateInstructionPage(
            pages_service_pb2.CreateInstructionPageRequest(language="fr_FR"), **ALICE
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
