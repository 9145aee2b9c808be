"""Instruction pages through the real stubs: created from a
template on first request, picked, kept several, switched; the active one as
the engine reads it, and reported unreadable once its ACL or the page is gone.
The ids land in the personal settings MemoryService serves."""

from __future__ import annotations

from dataclasses import dataclass

import grpc
import pytest
from google.protobuf.field_mask_pb2 import FieldMask

from services.memory.personal.domain import MAX_INSTRUCTION_PAGES
from switchboard.memory.v1 import (
    memory_pb2,
    memory_service_pb2,
    memory_service_pb2_grpc,
    pages_pb2,
    pages_service_pb2_grpc,
)
from switchboard.memory.v1 import pages_service_pb2 as pb
from tests.service.harness import as_user, expect_error

NOT_FOUND = (grpc.StatusCode.NOT_FOUND, "ERROR_REASON_NOT_FOUND")
PRECONDITION = (grpc.StatusCode.FAILED_PRECONDITION, "ERROR_REASON_FAILED_PRECONDITION")
EXHAUSTED = (grpc.StatusCode.RESOURCE_EXHAUSTED, "ERROR_REASON_QUOTA_EXCEEDED")


@dataclass
class Stubs:
    pages: pages_service_pb2_grpc.PagesServiceStub
    memory: memory_service_pb2_grpc.MemoryServiceStub


@pytest.fixture
def stubs(memory_channel: grpc.aio.Channel) -> Stubs:
    return Stubs(
        pages_service_pb2_grpc.PagesServiceStub(memory_channel),
        memory_service_pb2_grpc.MemoryServiceStub(memory_channel),
    )


async def active(stubs: Stubs, user: str) -> pb.GetActiveInstructionsResponse:
    return await stubs.pages.GetActiveInstructions(pb.GetActiveInstructionsRequest(), **as_user(user))


async def settings(stubs: Stubs, user: str) -> tuple[list[str], str]:
    s = (
        await stubs.memory.GetPersonalSettings(
            memory_service_pb2.GetPersonalSettingsRequest(), **as_user(user)
        )
    ).settings
    return list(s.instruction_page_ids), s.active_instruction_page_id


async def test_first_request_creates_the_private_page_from_the_template(stubs: Stubs) -> None:
    assert (await active(stubs, "alice")).state == pages_pb2.INSTRUCTION_PAGE_STATE_NONE
    created = await stubs.pages.CreateInstructionPage(
        pb.CreateInstructionPageRequest(request_id="first"), **as_user("alice")
    )
    page = created.page
    assert page.title == "My Switchboard AI" and page.owner_user_id == "alice" and page.version == 1
    assert not page.reader_user_ids and not page.editor_user_ids  # private
    for section in (
        "## Desired tone",
        "## What the agent should remember",
        "### My role",
        "### My habits",
        "## Pages and channels to consult first",
    ):
        assert section in page.body
    assert (list(created.instruction_page_ids), created.active_instruction_page_id) == ([page.id], page.id)
    assert await settings(stubs, "alice") == ([page.id], page.id)
    # A retried first request does not make a second page.
    again = await stubs.pages.CreateInstructionPage(
        pb.CreateInstructionPageRequest(request_id="first"), **as_user("alice")
    )
    assert again.page.id == page.id and list(again.instruction_page_ids) == [page.id]
    # The engine reads the active page's text; an edit shows at the next read (the next run).
    got = await active(stubs, "alice")
    assert (got.state, got.page_id, got.body) == (
        pages_pb2.INSTRUCTION_PAGE_STATE_READABLE,
        page.id,
        page.body,
    )
    await stubs.pages.UpdatePage(
        pb.UpdatePageRequest(
            page=pages_pb2.Page(id=page.id, body="Always answer in haiku."),
            update_mask=FieldMask(paths=["body"]),
        ),
        **as_user("alice"),
    )
    got = await active(stubs, "alice")
    assert (got.body, got.version) == ("Always answer in haiku.", 2)
    # Another user is untouched.
    assert (await active(stubs, "bob")).state == pages_pb2.INSTRUCTION_PAGE_STATE_NONE
    assert await settings(stubs, "bob") == ([], "")


async def test_the_shared_page_reminder_is_the_one_the_templates_carry(stubs: Stubs) -> None:
    """The gateway shows the reminder memory returns, never a copy of its own."""
    french = await stubs.pages.CreateInstructionPage(
        pb.CreateInstructionPageRequest(language="fr-CA"), **as_user("alice")
    )
    assert french.shared_page_notice.startswith("Quiconque peut modifier cette page")
    assert f"> {french.shared_page_notice}\n" in french.page.body
    listed = await stubs.pages.ListInstructionPages(pb.ListInstructionPagesRequest(), **as_user("alice"))
    got = await stubs.memory.GetPersonalSettings(
        memory_service_pb2.GetPersonalSettingsRequest(), **as_user("bob")
    )
    assert listed.shared_page_notice == got.shared_page_notice
    assert "Anyone who can edit this page changes how your agent behaves" in got.shared_page_notice


async def test_templates_pick_several_and_switch(stubs: Stubs) -> None:
    templates = (
        await stubs.pages.ListInstructionTemplates(pb.ListInstructionTemplatesRequest(), **as_user("alice"))
    ).templates
    assert templates[0].id == "my-switchboard-ai" and len(templates) >= 2
    # Each template exists in English and in French, with the same sections.
    by_language = {lang: [t for t in templates if t.language == lang] for lang in ("en", "fr")}
    assert [t.title for t in by_language["fr"]] == ["Mon IA Switchboard", "Assistant de chef d'équipe"]
    assert len(by_language["en"]) == len(by_language["fr"]) and len(templates) == 4
    for english, french in zip(by_language["en"], by_language["fr"], strict=True):
        assert english.body.count("\n## ") == french.body.count("\n## ") == 3
    assert "## Ton souhaité" in by_language["fr"][0].body
    french_page = await stubs.pages.CreateInstructionPage(
        pb.CreateInstructionPageRequest(template_id="mon-ia-switchboard"), **as_user("bob")
    )
    assert french_page.page.title == "Mon IA Switchboard"
    assert "Quiconque peut modifier" in french_page.page.body
    first = (
        await stubs.pages.CreateInstructionPage(pb.CreateInstructionPageRequest(), **as_user("alice"))
    ).page
    from_template = await stubs.pages.CreateInstructionPage(
        pb.CreateInstructionPageRequest(template_id=templates[1].id, title="Lead mode"), **as_user("alice")
    )
    assert from_template.page.body == templates[1].body and from_template.page.title == "Lead mode"
    assert from_template.active_instruction_page_id == from_template.page.id
    # Pick an existing page someone shared (readable), without making it active.
    shared = (
        await stubs.pages.CreatePage(
            pb.CreatePageRequest(
                page=pages_pb2.Page(title="Team rules", body="Be brief.", reader_user_ids=["alice"])
            ),
            **as_user("bob"),
        )
    ).page
    added = await stubs.pages.AddInstructionPage(
        pb.AddInstructionPageRequest(page_id=shared.id), **as_user("alice")
    )
    assert list(added.instruction_page_ids) == [first.id, from_template.page.id, shared.id]
    assert added.active_instruction_page_id == from_template.page.id
    switched = await stubs.pages.SetActiveInstructionPage(
        pb.SetActiveInstructionPageRequest(page_id=shared.id), **as_user("alice")
    )
    assert switched.active_instruction_page_id == shared.id
    assert (await active(stubs, "alice")).body == "Be brief."
    listed = await stubs.pages.ListInstructionPages(
        pb.ListInstructionPagesRequest(page_size=2), **as_user("alice")
    )
    assert [(p.page_id, p.active) for p in listed.pages] == [
        (first.id, False),
        (from_template.page.id, False),
    ]
    rest = await stubs.pages.ListInstructionPages(
        pb.ListInstructionPagesRequest(page_token=listed.next_page_token), **as_user("alice")
    )
    assert [(p.page_id, p.active, p.title) for p in rest.pages] == [
        (shared.id, True, "Team rules")
    ] and not rest.next_page_token
    # Removing the active page leaves none active.
    removed = await stubs.pages.RemoveInstructionPage(
        pb.RemoveInstructionPageRequest(page_id=shared.id), **as_user("alice")
    )
    assert shared.id not in removed.instruction_page_ids and removed.active_instruction_page_id == ""
    assert (await active(stubs, "alice")).state == pages_pb2.INSTRUCTION_PAGE_STATE_NONE


async def test_an_active_page_that_became_unreadable_is_reported_not_failed(stubs: Stubs) -> None:
    shared = (
        await stubs.pages.CreatePage(
            pb.CreatePageRequest(
                page=pages_pb2.Page(title="Shared rules", body="x", reader_user_ids=["alice"])
            ),
            **as_user("bob"),
        )
    ).page
    await stubs.pages.AddInstructionPage(
        pb.AddInstructionPageRequest(page_id=shared.id, make_active=True), **as_user("alice")
    )
    assert (await active(stubs, "alice")).state == pages_pb2.INSTRUCTION_PAGE_STATE_READABLE
    # Bob removes Alice from the ACL: the page is skipped with a notice, never an error.
    await stubs.pages.SetPageAcl(pb.SetPageAclRequest(page_id=shared.id), **as_user("bob"))
    got = await active(stubs, "alice")
    assert (got.state, got.page_id, got.body) == (pages_pb2.INSTRUCTION_PAGE_STATE_UNREADABLE, shared.id, "")
    assert "no longer readable" in got.notice
    listed = await stubs.pages.ListInstructionPages(pb.ListInstructionPagesRequest(), **as_user("alice"))
    assert [(p.state, p.title) for p in listed.pages] == [(pages_pb2.INSTRUCTION_PAGE_STATE_UNREADABLE, "")]
    # It cannot be made active again while unreadable; a deleted page reads the same.
    await expect_error(
        stubs.pages.SetActiveInstructionPage(
            pb.SetActiveInstructionPageRequest(page_id=shared.id), **as_user("alice")
        ),
        *PRECONDITION,
    )
    own = (
        await stubs.pages.CreateInstructionPage(pb.CreateInstructionPageRequest(), **as_user("alice"))
    ).page
    await stubs.pages.DeletePage(pb.DeletePageRequest(page_id=own.id), **as_user("alice"))
    assert (await active(stubs, "alice")).state == pages_pb2.INSTRUCTION_PAGE_STATE_UNREADABLE


async def test_errors(stubs: Stubs) -> None:
    alice = as_user("alice")
    await expect_error(
        stubs.pages.CreateInstructionPage(pb.CreateInstructionPageRequest(template_id="nope"), **alice),
        *NOT_FOUND,
    )
    private = (
        await stubs.pages.CreatePage(
            pb.CreatePageRequest(page=pages_pb2.Page(title="Bob only")), **as_user("bob")
        )
    ).page
    await expect_error(
        stubs.pages.AddInstructionPage(pb.AddInstructionPageRequest(page_id=private.id), **alice), *NOT_FOUND
    )
    await expect_error(
        stubs.pages.RemoveInstructionPage(pb.RemoveInstructionPageRequest(page_id=private.id), **alice),
        *NOT_FOUND,
    )
    error = await expect_error(
        stubs.pages.SetActiveInstructionPage(pb.SetActiveInstructionPageRequest(page_id=private.id), **alice),
        *PRECONDITION,
    )
    assert "add it first" in (error.details() or "")
    await expect_error(
        stubs.pages.AddInstructionPage(pb.AddInstructionPageRequest(page_id=" "), **alice),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    # The list is bounded like the settings field it lives in.
    mine = (
        await stubs.pages.CreatePage(pb.CreatePageRequest(page=pages_pb2.Page(title="Mine")), **alice)
    ).page
    full = [f"p{i}" for i in range(MAX_INSTRUCTION_PAGES)]
    await stubs.memory.UpdatePersonalSettings(
        memory_service_pb2.UpdatePersonalSettingsRequest(
            settings=memory_pb2.PersonalSettings(instruction_page_ids=full),
            update_mask=FieldMask(paths=["instruction_page_ids"]),
        ),
        **alice,
    )
    await expect_error(
        stubs.pages.AddInstructionPage(pb.AddInstructionPageRequest(page_id=mine.id), **alice), *EXHAUSTED
    )
    await expect_error(
        stubs.pages.CreateInstructionPage(pb.CreateInstructionPageRequest(), **alice), *EXHAUSTED
    )
