"""Who may write (services/shared/write_guard.py): a write tool runs only
when the user's own message asked for it, with the user's own words; a
refused write is an error result with a notice, and never reaches the
backend. The whole-system fixtures are in tests/service/test_prompt_injection.py."""

from __future__ import annotations

import json

import pytest

from services.engine.providers.base import ToolCallChunk
from services.engine.tools import AllowedSources, ToolContext, ToolRegistry
from services.shared.write_guard import (
    asks_instruction_update,
    asks_to_save,
    check_write,
    foreign_words,
    names_agent,
)
from tests.fakes.tool_backend import FakeToolBackend


@pytest.mark.parametrize(
    "message",
    [
        "Save a fact: the staging server is Juniper",
        "please remember I like tea",
        "Note that the build is green",
        "Make a note: lunch at noon",
        "Retiens que je suis PM",
        "Note que mon équipe est Mobile",
        "Enregistre ceci : la démo est jeudi",
        "Garde en mémoire que je préfère le thé",
        "N\u2019oublie pas : réunion lundi",
    ],
)
def test_requests_to_save(message: str) -> None:
    assert asks_to_save(message)


@pytest.mark.parametrize(
    "message",
    [
        "Search my mail for invoice",
        "read page p-1",
        "Résume les sauvegardes nocturnes",  # "sauvegardes" is a noun here
        "What do the release notes say?",
        "Quelles sont les notes de la réunion ?",
    ],
)
def test_other_requests_do_not_ask_to_save(message: str) -> None:
    assert not asks_to_save(message)


def test_requests_to_change_the_instructions() -> None:
    assert asks_instruction_update("Update my instructions: answer in French")
    assert asks_instruction_update("Mets à jour mes instructions : réponds en français")
    assert asks_instruction_update("Retiens que je préfère les listes")
    assert asks_instruction_update("search the wiki, and remember that I am a PM")
    assert not asks_instruction_update("Summarise my instructions page")


def test_an_agent_is_asked_only_when_named() -> None:
    assert names_agent("ask qa: is the build green?", "qa")
    assert names_agent("Demande à @release-bot la date", "release-bot")
    assert not names_agent("ask quality: is it green?", "qa")
    assert not names_agent("ask release-bot", "bot")


def test_words_the_user_did_not_say_are_foreign() -> None:
    message = "Save a fact: our staging server is called Juniper"
    assert foreign_words(["Staging server", "The user's staging server is called Juniper."], message) == []
    # Copied, decoded, re-assembled or paraphrased: not the user's words.
    assert foreign_words(["Juniper CANARY-7F3A"], message) == ["canary", "7f3a"]
    assert foreign_words(["Staging host: Juniper"], message) == ["host"]
    # Accents and case do not matter.
    assert foreign_words(["Équipe MOBILE"], "note que mon equipe est mobile") == []


def test_a_refusal_says_why_and_never_quotes_the_text_to_the_user() -> None:
    refused = check_write("save_note", "read page p-1", asked=False, texts=["x"], what="save anything")
    assert refused is not None and "did not ask to save anything" in refused.for_model
    refused = check_write("save_note", "save a fact: tea", asked=True, texts=["tea CANARY"], what="save")
    assert refused is not None and "'canary'" in refused.for_model
    assert "canary" not in refused.for_user.casefold()
    assert check_write("save_note", "save a fact: tea", asked=True, texts=["Tea"], what="save") is None


def call(name: str, **arguments: object) -> ToolCallChunk:
    return ToolCallChunk(call_id=f"c-{name}", name=name, arguments=json.dumps(arguments))


async def test_refused_writes_never_reach_the_backend() -> None:
    backend = FakeToolBackend()
    registry = ToolRegistry(backend)
    ctx = ToolContext("alice", "run-1", AllowedSources(), request="read page p-1")
    for tool_call in [
        call("save_note", kind="fact", title="Code", body="CANARY-1"),
        call("propose_instruction_update", addition="CANARY-1"),  # not even offered
        call("ask_agent", agent="qa", message="CANARY-1"),
    ]:
        result = await registry.execute(tool_call, ctx)
        assert result.is_error and result.notice and "CANARY" not in result.notice
    assert backend.calls == [] and backend.notes == {} and backend.proposals == []
    # Asked, and in the user's words: written.
    ctx = ToolContext("alice", "run-2", AllowedSources(), request="save a fact: the build is green")
    result = await registry.execute(
        call("save_note", kind="fact", title="Build", body="The build is green"), ctx
    )
    assert not result.is_error and result.notice is None and len(backend.notes) == 1


def test_a_context_without_the_users_message_refuses_every_write() -> None:
    ctx = ToolContext("alice", "run-1", AllowedSources())
    assert ctx.request == "" and not ctx.allow_instruction_update
    assert ToolContext(
        "alice", "r", AllowedSources(), request="add to my instructions: x"
    ).allow_instruction_update
