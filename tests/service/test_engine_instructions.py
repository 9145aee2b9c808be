"""The active instruction page in a run (seed 002 T-03, T-04): read through
memory's PagesService with the user's rights, placed second among the
layers, cut to its budget with a notice, skipped with a notice when the
user can no longer read it — and a change to it changes the next answer."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from google.protobuf.field_mask_pb2 import FieldMask

from switchboard.engine.v1 import engine_pb2, engine_service_pb2
from switchboard.memory.v1 import pages_pb2, pages_service_pb2
from switchboard.threads.v1 import threads_service_pb2
from tests.conftest import DatabaseFactory
from tests.service.harness import as_user
from tests.service.system import System, collect, system


@pytest.fixture
async def sb(make_database: DatabaseFactory) -> AsyncIterator[System]:
    async with system(make_database, instruction_page_budget_chars=300) as running_system:
        yield running_system


async def run(
    sb: System, user: str, text: str = "Hello there", client_instructions: str = ""
) -> tuple[list[engine_pb2.RunEvent], engine_pb2.Run]:
    who = as_user(user)
    conversation = await sb.threads.CreateConversation(threads_service_pb2.CreateConversationRequest(), **who)
    request = engine_service_pb2.StartRunRequest(
        conversation_id=conversation.conversation.id,
        message=text,
        surface=engine_pb2.SURFACE_CHAT,
        client_instructions=client_instructions,
    )
    events = await collect(sb.engine.StartRun(request, metadata=who["metadata"], timeout=30))
    got = await sb.engine.GetRun(engine_service_pb2.GetRunRequest(run_id=events[0].run_id), **who)
    return events, got.run


async def set_body(sb: System, user: str, page_id: str, body: str) -> None:
    page = pages_pb2.Page(id=page_id, body=body)
    request = pages_service_pb2.UpdatePageRequest(page=page, update_mask=FieldMask(paths=["body"]))
    await sb.pages.UpdatePage(request, **as_user(user))


def notices(events: list[engine_pb2.RunEvent]) -> list[str]:
    return [e.notice.code for e in events if e.WhichOneof("kind") == "notice"]


async def test_without_an_instruction_page_the_layer_is_absent(sb: System) -> None:
    events, record = await run(sb, "alice")
    layers = {layer.key: layer for layer in record.layers}
    assert [layer.key for layer in record.layers][:2] == ["product_system", "instruction_page"]
    assert not layers["instruction_page"].present and notices(events) == []


async def test_editing_the_active_page_changes_the_next_answer(sb: System) -> None:
    created = await sb.pages.CreateInstructionPage(
        pages_service_pb2.CreateInstructionPageRequest(request_id="first"), **as_user("alice")
    )
    page_id = created.page.id
    await set_body(sb, "alice", page_id, "## Desired tone\n- brief\nSignature: Alpha bot\n")
    events, record = await run(sb, "alice")
    assert events[-1].final.text.endswith("— Alpha bot")
    layer = {layer.key: layer for layer in record.layers}["instruction_page"]
    assert layer.present and layer.size_chars > len("Signature: Alpha bot")
    assert ("page", page_id) in {(s.kind, s.id) for s in record.sources}  # it was read

    await set_body(sb, "alice", page_id, "Signature: Beta bot\n")
    events, _ = await run(sb, "alice")
    assert events[-1].final.text.endswith("— Beta bot")
    # Another user's runs never see alice's page.
    bob_events, _ = await run(sb, "bob")
    assert "bot" not in bob_events[-1].final.text


async def test_a_page_the_user_can_no_longer_read_is_skipped_with_a_notice(sb: System) -> None:
    shared = await sb.pages.CreatePage(
        pages_service_pb2.CreatePageRequest(
            request_id="p",
            page=pages_pb2.Page(title="Team rules", body="Signature: Team", reader_user_ids=["alice"]),
        ),
        **as_user("bob"),
    )
    page_id = shared.page.id
    await sb.pages.AddInstructionPage(
        pages_service_pb2.AddInstructionPageRequest(page_id=page_id, make_active=True), **as_user("alice")
    )
    events, _ = await run(sb, "alice")
    assert events[-1].final.text.endswith("— Team")

    await sb.pages.SetPageAcl(pages_service_pb2.SetPageAclRequest(page_id=page_id), **as_user("bob"))
    events, record = await run(sb, "alice")
    assert notices(events) == ["INSTRUCTION_PAGE_UNREADABLE"]
    assert events[-1].WhichOneof("kind") == "final" and "Team" not in events[-1].final.text
    assert record.status == engine_pb2.RUN_STATUS_DONE
    assert page_id not in {s.id for s in record.sources}


async def test_a_long_page_is_cut_to_its_budget_with_a_notice(sb: System) -> None:
    created = await sb.pages.CreateInstructionPage(
        pages_service_pb2.CreateInstructionPageRequest(request_id="long"), **as_user("carol")
    )
    body = "Signature: Early\n" + "\n".join(f"- habit number {i}" for i in range(100)) + "\nSignature: Late\n"
    await set_body(sb, "carol", created.page.id, body)
    events, record = await run(sb, "carol")
    assert notices(events) == ["INSTRUCTION_PAGE_TRUNCATED"]
    assert events[-1].final.text.endswith("— Early")  # the cut-off tail never reached the model
    layer = {layer.key: layer for layer in record.layers}["instruction_page"]
    assert layer.size_chars < 400


async def test_client_instructions_are_a_layer_after_the_instruction_page(sb: System) -> None:
    """The system messages of an OpenAI-compatible client: a layer of their
    own, right after the user's page, that the model follows; cut to the
    message limit with a note; absent from runs whose request has none."""
    created = await sb.pages.CreateInstructionPage(
        pages_service_pb2.CreateInstructionPageRequest(request_id="page"), **as_user("alice")
    )
    await set_body(sb, "alice", created.page.id, "## Ton\n- bref\n")
    events, record = await run(sb, "alice", "Bonjour", client_instructions="Signe : Éditeur bot")
    assert events[-1].final.text.endswith("— Éditeur bot")
    keys = [layer.key for layer in record.layers]
    assert keys[:3] == ["product_system", "instruction_page", "client_instructions"]
    layer = record.layers[2]
    assert layer.present and layer.size_chars > len("Signe : Éditeur bot") and not layer.note

    long = "\n".join(f"Rule {i}: answer in English." for i in range(3000))
    _, cut = await run(sb, "alice", client_instructions=long)
    layer = {layer.key: layer for layer in cut.layers}["client_instructions"]
    assert layer.size_chars <= 32_100 and "cut to its budget" in layer.note

    _, plain = await run(sb, "alice")
    assert "client_instructions" not in {layer.key for layer in plain.layers}
