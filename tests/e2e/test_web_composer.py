"""The composer's pickers and proposals that outlive a reload, in the
browser against the real processes: "/" lists the skills with their
descriptions and forces the chosen one; "@" lists the pages and sources the
conversation may read and inserts a mention the run then reads; a pending
proposal shows again after a reload and can still be decided."""

from __future__ import annotations

import re
import uuid

from playwright.sync_api import Page, expect

from tests.e2e import test_web_page, web
from tests.e2e.conftest import Launched
from tests.e2e.web import create_instruction_page, send, shot

# The web page's settings (the test mailbox among them): the two modules share
# one launched system.
LAUNCH_ENV = test_web_page.LAUNCH_ENV

browser = web.browser
page = web.page


def test_slash_opens_the_skills_and_forces_the_chosen_one(page: Page, launched: Launched) -> None:
    box = page.locator("#message")
    box.click()
    box.press_sequentially("/week")
    picker = page.get_by_role("listbox", name="Skills")
    expect(picker).to_be_visible()
    option = picker.get_by_role("option").filter(has_text="/weekly-status-report")
    expect(option).to_be_visible()
    expect(option.locator(".meta")).not_to_be_empty()  # its description
    expect(box).to_have_attribute("aria-activedescendant", re.compile("^pick-"))
    shot(page, launched, "composer-skill-menu")
    box.press("Enter")
    expect(picker).to_be_hidden()
    expect(page.locator("#forced-skills .forced")).to_have_attribute("data-skill", "weekly-status-report")
    expect(box).to_have_value("")
    box.press_sequentially("What is on my plate?")
    page.click("#send")
    run = page.locator("#log .run").last
    expect(run.locator(".steps")).to_contain_text(
        "Skill: weekly-status-report (manual)", timeout=web.RUN_TIMEOUT
    )
    expect(page.locator("#forced-skills")).to_be_hidden()  # forced (a manual skill) for that run only

    # Escape closes the menu without choosing.
    box.press_sequentially("/")
    expect(picker).to_be_visible()
    box.press("ArrowDown")
    box.press("Escape")
    expect(picker).to_be_hidden()
    expect(page.locator("#forced-skills")).to_be_hidden()


def test_a_quick_return_to_the_box_keeps_the_fresh_menu_open(page: Page, launched: Launched) -> None:
    # Leaving the box closes its menu a moment later (so a click on an option
    # lands first); coming back and typing "/" within that moment must not
    # have the new menu closed by the earlier departure.
    box = page.locator("#message")
    box.click()
    page.locator("#search").focus()
    box.press_sequentially("/")
    picker = page.get_by_role("listbox", name="Skills")
    expect(picker).to_be_visible()
    page.wait_for_timeout(400)  # past the close delay of the earlier blur
    expect(picker).to_be_visible()


def test_at_mentions_offer_only_allowed_sources_and_the_run_reads_the_page(
    page: Page, launched: Launched
) -> None:
    title = f"Roadmap {uuid.uuid4().hex[:6]}"
    create_instruction_page(page, title)
    box = page.locator("#message")
    box.click()
    box.press_sequentially("Summarise @Road")
    picker = page.get_by_role("listbox", name="Pages and sources")
    expect(picker.get_by_role("option").filter(has_text=title)).to_be_visible()
    expect(picker).not_to_contain_text("Test mail")  # not ticked in All sources
    box.press("Enter")
    expect(box).to_have_value(re.compile(r"^Summarise @page:[\w-]+ $"))
    page.click("#send")
    run = page.locator("#log .run").last
    expect(run.locator(".sources")).to_contain_text(f"page: {title}", timeout=web.RUN_TIMEOUT)

    # Ticking the mailbox offers it; unticking the workspace takes the pages away.
    page.click("#sources-button")
    page.get_by_label("Test mail").check()
    page.get_by_label("Workspace").uncheck()
    page.click("#sources-button")
    box.click()
    box.press_sequentially("check @")
    expect(picker.get_by_role("option").filter(has_text="Test mail")).to_be_visible()
    expect(picker).not_to_contain_text(title)
    shot(page, launched, "composer-mention-picker")
    box.press("Enter")
    expect(box).to_have_value("check @connector:testmail ")


def test_a_pending_proposal_shows_again_after_a_reload_and_can_be_decided(
    page: Page, launched: Launched
) -> None:
    tag = uuid.uuid4().hex[:6]
    create_instruction_page(page, f"Sign {tag}")
    send(page, f"Remember that signature: Later {tag}")
    page.reload()
    web.ready(page)
    proposal = page.locator("#log .run .proposal")
    expect(proposal).to_have_count(1)
    expect(proposal.locator(".diff .added")).to_have_text(f"+ - Signature: Later {tag}")
    expect(page.locator("#log .run .run-status.status-waiting_approval")).to_be_visible()
    shot(page, launched, "proposal-after-reload")
    proposal.locator(".accept").click()
    expect(proposal.locator(".decision")).to_contain_text("Accepted")
    expect(send(page, "hello").locator(".answer")).to_contain_text(f"— Later {tag}")

    page.reload()
    web.ready(page)
    decided = page.locator("#log .run .proposal")
    expect(decided.locator(".decision")).to_have_text("This proposal was accepted.")
    expect(decided.locator(".accept")).to_be_disabled()


def tab_until(page: Page, selector: str, limit: int = 60) -> None:
    """Presses Tab until the element is focused (keyboard only)."""
    for _ in range(limit):
        if page.evaluate("(s) => document.activeElement === document.querySelector(s)", selector):
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"{selector} is not reachable with Tab")


def test_the_page_works_from_the_keyboard_alone(page: Page) -> None:
    page.evaluate("document.activeElement.blur()")  # back to the top of the page
    tab_until(page, "#message")
    page.keyboard.type("/week")
    expect(page.get_by_role("listbox", name="Skills")).to_be_visible()
    page.keyboard.press("Enter")
    page.keyboard.type("Plan my week")
    page.keyboard.press("Control+Enter")
    run = page.locator("#log .run").last
    expect(run.locator(".steps")).to_contain_text(
        "Skill: weekly-status-report (manual)", timeout=web.RUN_TIMEOUT
    )
    expect(page.locator("#send")).to_be_enabled(timeout=web.RUN_TIMEOUT)

    # The views, from the navigation, by keyboard.
    page.evaluate("document.activeElement.blur()")  # back to the top of the page
    tab_until(page, "#nav a[href='#memory']")
    page.keyboard.press("Enter")
    expect(page.locator("#view-memory")).to_be_visible()
    tab_until(page, "#note-title")
    page.keyboard.type("Keyboard note")
    page.keyboard.press("Tab")
    page.keyboard.type("Written without a mouse.")
    page.keyboard.press("Tab")  # to "Save note"
    page.keyboard.press("Enter")
    expect(page.locator("#memory-status")).to_have_text('Saved "Keyboard note".')
    page.evaluate("document.activeElement.blur()")
    tab_until(page, "#nav a[href='#help']")
    page.keyboard.press("Enter")
    expect(page.locator("#view-help")).to_be_visible()
