"""Instruction pages and memory in the browser, against the real processes
(instruction pages, durable memory): the active page is
named in the chat header; editing its text writes a new version that the
next run follows; a version is restored; a page is removed from the list and
added back. Notes are written, found by search, reached from the Sources
panel of a run that recalled them, edited and deleted."""

from __future__ import annotations

import re
import uuid

from playwright.sync_api import Page, expect

from tests.e2e import web
from tests.e2e.conftest import Launched
from tests.e2e.web import create_instruction_page, send, shot

browser = web.browser
page = web.page


def test_an_instruction_page_is_edited_versioned_restored_removed_and_added_back(
    page: Page, launched: Launched
) -> None:
    tag = uuid.uuid4().hex[:6]
    create_instruction_page(page, f"Spare {tag}")
    create_instruction_page(page, f"Tone {tag}")  # created last: the active one
    expect(page.locator("#active-page")).to_have_text(f"Instructions: Tone {tag}")

    page.locator("#active-page").click()  # the reminder opens the editor
    expect(page.locator("#view-instructions")).to_be_visible()
    active = page.locator("#instruction-list li.active")
    expect(active).to_contain_text(f"Tone {tag}")
    expect(active.locator(".badge")).to_have_text("active")
    expect(page.locator("#editor-title")).to_have_value(f"Tone {tag}")
    expect(page.locator("#editor-version")).to_have_text("Version 1")

    body = page.locator("#editor-body").input_value()
    page.fill("#editor-body", body.rstrip("\n") + f"\n- Signature: Edited {tag}\n")
    page.get_by_role("button", name="Save as a new version").click()
    expect(page.locator("#instructions-status")).to_have_text("Saved as version 2.")
    expect(page.locator("#editor-version")).to_have_text("Version 2")
    expect(page.locator("#versions li")).to_have_count(2)
    shot(page, launched, "instructions-editor")

    # Suggestions follow the page type (a page), then the text selected in it.
    chips = page.locator("#page-chips button")
    expect(chips.first).to_have_text("Summarise this page")
    page.locator("#editor-body").evaluate(
        "box => { box.focus(); box.setSelectionRange(0, 30); box.dispatchEvent(new Event('select')); }"
    )
    expect(chips.first).to_have_text("Summarise the selection")
    chips.first.click()
    expect(page.locator("#view-chat")).to_be_visible()
    # The page and the selection go with the message as its context.
    expect(page.locator("#message")).to_have_value(
        re.compile(r"^Summarise the selected text\.\n\n@page:\S+ $")
    )
    expect(page.locator("#run-context")).to_contain_text(f"Page: Tone {tag} · Selection: “")
    expect(page.locator("#message")).to_be_focused()
    expect(page.locator("#log .run")).to_have_count(0)  # prefilled, not sent
    page.fill("#message", "")
    page.get_by_role("button", name="Do not send this context").click()
    expect(page.locator("#run-context")).to_be_hidden()

    # The next run follows the edited page.
    page.get_by_role("link", name="Chat").click()
    expect(send(page, "hello").locator(".answer")).to_contain_text(f"— Edited {tag}")

    page.get_by_role("link", name="Instructions", exact=True).click()
    page.get_by_role("button", name="Restore version 1").click()
    expect(page.locator("#instructions-status")).to_have_text("Version 1 restored as version 3.")
    expect(page.locator("#versions li").first).to_contain_text("restored from version 1")
    expect(page.locator("#editor-body")).not_to_have_value(re.compile("Edited"))
    page.get_by_role("link", name="Chat").click()
    expect(send(page, "hello again").locator(".answer")).not_to_contain_text("Edited")

    # Removed from the list, the page stays and can be added back.
    page.get_by_role("link", name="Instructions", exact=True).click()
    page.get_by_role("button", name=f"Remove Spare {tag} from the list").click()
    expect(page.locator("#instructions-status")).to_contain_text("the page itself stays")
    expect(page.locator("#instruction-list")).not_to_contain_text(f"Spare {tag}")
    page.select_option("#add-existing", label=f"Spare {tag}")
    page.get_by_role("button", name="Add", exact=True).click()
    expect(page.locator("#instruction-list")).to_contain_text(f"Spare {tag}")
    page.get_by_role("button", name=f"Use Spare {tag}").click()
    expect(page.locator("#instruction-list li.active")).to_contain_text(f"Spare {tag}")
    expect(page.locator("#active-page")).to_have_text(f"Instructions: Spare {tag}")

    page.reload()  # stored, and the reminder says so from the start
    web.ready(page)
    expect(page.locator("#active-page")).to_have_text(f"Instructions: Spare {tag}")


def test_notes_are_written_searched_reached_from_a_run_edited_and_deleted(
    page: Page, launched: Launched
) -> None:
    tag = uuid.uuid4().hex[:6]
    title = f"Deploy day {tag}"
    page.get_by_role("link", name="Memory").click()
    expect(page.locator("#view-memory")).to_be_visible()
    page.select_option("#note-kind", "decision")
    page.fill("#note-title", title)
    page.fill("#note-body", "We deploy to production on **Tuesdays** only.")
    page.get_by_role("button", name="Save note").click()
    expect(page.locator("#memory-status")).to_have_text(f'Saved "{title}".')
    note = page.locator("#notes li.note").filter(has_text=title)
    expect(note.locator(".badge")).to_have_text("Decision")
    expect(note.locator(".note-body strong")).to_have_text("Tuesdays")

    page.fill("#note-search", "when do we deploy to production")
    expect(page.locator("#notes-label")).to_contain_text("a run asking this would recall")
    expect(page.locator("#notes li.note").first).to_contain_text(title)
    shot(page, launched, "memory-search")

    # A run recalls it; its Sources panel leads to the note.
    page.get_by_role("link", name="Chat").click()
    run = send(page, "When do we deploy to production?")
    recalled = run.locator(".sources a.recalled-note", has_text=title)
    expect(recalled).to_be_visible()
    recalled.click()
    expect(page.locator("#view-memory")).to_be_visible()
    highlighted = page.locator("#notes li.note.highlight")
    expect(highlighted).to_contain_text(title)

    highlighted.get_by_role("button", name=f"Edit {title}").click()
    page.locator(".note-edit textarea").fill("We deploy on Wednesdays since December.")
    page.get_by_role("button", name="Save note").first.click()
    expect(page.locator("#memory-status")).to_have_text(f'Saved "{title}".')
    expect(page.locator("#notes li.note").filter(has_text=title)).to_contain_text("Wednesdays since December")

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name=f"Delete {title}").click()
    expect(page.locator("#memory-status")).to_have_text(f'Deleted "{title}".')
    expect(page.locator("#notes")).not_to_contain_text(title)
    page.reload()
    web.ready(page)
    expect(page.locator("#notes")).not_to_contain_text(title)
