"""The web page in a real browser (Debian's headless Chromium driven by
Playwright) against the real processes, logged in through the launcher's
`/?token=` link: a streamed run with its steps, model, skill and sources;
pinning, renaming and searching conversations; the personalisation menu
and switching the active instruction page;
instruction proposals accepted and refused; the web-only model warning;
suggested actions that only prefill; reloading mid-run resumes the stream.
Screenshots of key states go to test-artifacts/."""

from __future__ import annotations

import json
import re
import uuid

from playwright.sync_api import Locator, Page, expect

from tests.e2e import web
from tests.e2e.conftest import Launched
from tests.e2e.web import RUN_TIMEOUT, HeldRequests, send, shot

MODELS = [
    {"id": f"offline-{p}", "provider": "offline", "model": f"switchboard-offline-{p}", "profile": p}
    for p in ("fast", "balanced", "strong")
] + [
    {
        "id": "offline-web",
        "provider": "offline",
        "model": "switchboard-offline-web",
        "profile": "fast",
        "web_only": True,
    }
]
# Read by tests/e2e/conftest.py: a web-only model and answers slow enough
# (~2 s) to reload mid-run even on a loaded machine. The All-sources popover
# offers the test mailbox because the engine is configured with it (conftest).
LAUNCH_ENV = {
    "SWITCHBOARD_ROUTER_MODELS_JSON": json.dumps(MODELS),
    "SWITCHBOARD_ENGINE_OFFLINE_TOKEN_DELAY": "0.1",
}


# The shared browser fixtures (tests/e2e/web.py).
browser = web.browser
page = web.page


def test_a_streamed_run_shows_steps_answer_model_skill_and_only_the_sources_read(
    page: Page, launched: Launched
) -> None:
    # The conversation allows the test mailbox (All sources popover, persisted).
    page.click("#sources-button")
    expect(page.locator("#sources-popover")).to_be_visible()
    expect(page.locator("#source-workspace")).to_be_checked()
    with page.expect_response(lambda r: r.url.endswith("/sources") and r.request.method == "PUT") as put:
        page.get_by_label("Test mail").check()
    assert put.value.status == 200
    page.click("#sources-button")

    mail = send(page, "check my mail for invoice")
    expect(mail.locator(".answer")).to_contain_text("4711")
    expect(mail.locator(".steps li.completed").first).to_be_visible()
    expect(mail.locator(".steps li.failed")).to_have_count(0)
    expect(mail.locator(".meta")).to_have_text(re.compile(r"^Model: switchboard-offline-\w+$"))
    expect(mail.locator(".sources")).to_contain_text("connector: ")
    shot(page, launched, "run-with-sources")

    report = send(page, "Write the weekly status report for my team")
    expect(report.locator(".steps")).to_contain_text("Reading context")
    expect(report.locator(".steps")).to_contain_text("Skill: weekly-status-report (auto)")
    expect(report.locator(".steps li.completed")).to_have_count(4)  # 3 steps + the skill
    expect(report.locator(".answer")).to_contain_text("You asked: Write the weekly status report")
    expect(report.locator(".skill")).to_have_text("Skill: weekly-status-report")
    # Only what this run read: the skill, not the mailbox the previous run queried.
    sources = report.locator(".sources")
    expect(sources).to_contain_text("skill: weekly-status-report")
    expect(sources).not_to_contain_text("connector")
    sources.get_by_text("Why this skill?").click()
    # The branch as a reader says it, never the record's enum.
    expect(sources.locator(".branch")).to_contain_text("Decision: a clear match (high ")
    expect(sources.locator(".branch")).not_to_contain_text("ROUTE_BRANCH")
    expect(sources.locator(".why li").first).to_contain_text("weekly-status-report")
    sources.locator(".not-relevant").click()
    expect(sources.get_by_role("status")).to_contain_text("weekly-status-report was not relevant")
    expect(sources.locator(".disable-auto")).to_be_visible()
    shot(page, launched, "why-this-skill")

    # After a reload: the history, the model under each answer, the sources kept ticked.
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    expect(page.locator("#log .user")).to_have_text(
        ["check my mail for invoice", "Write the weekly status report for my team"]
    )
    expect(page.locator("#log .meta")).to_have_count(2)
    expect(page.locator("#log .run").last.locator(".skill")).to_have_text("Skill: weekly-status-report")
    page.click("#sources-button")
    expect(page.get_by_label("Test mail")).to_be_checked()


def test_pin_rename_and_find_a_conversation_by_search(page: Page, launched: Launched) -> None:
    """A conversation pinned and renamed is found again by searching its title."""
    title = f"Budget review {uuid.uuid4().hex[:6]}"
    first = page.locator("#conversations li.active")
    expect(first).to_have_count(1)
    conversation_id = first.get_attribute("data-id")
    page.click("#new")  # a newer conversation now tops the list
    expect(page.locator("#conversations li").first).not_to_have_attribute("data-id", str(conversation_id))

    mine = page.locator(f'#conversations li[data-id="{conversation_id}"]')
    mine.locator(".rename").click()
    page.fill(".rename-input", title)
    page.press(".rename-input", "Enter")
    expect(mine.locator(".open")).to_have_text(title)
    mine.locator(".pin").click()
    expect(page.locator("#conversations li").first).to_have_attribute("data-id", str(conversation_id))
    expect(page.locator("#conversations li").first).to_have_class(re.compile("pinned"))
    expect(mine.locator(".pin")).to_have_attribute("aria-pressed", "true")

    page.fill("#search", title.upper())
    expect(page.locator("#conversations li")).to_have_count(1)
    expect(page.locator("#conversations li .open")).to_have_text(title)
    shot(page, launched, "conversation-search")
    page.fill("#search", "no conversation has this title")
    expect(page.locator("#conversations li")).to_have_count(0)

    page.reload()  # stored, not just drawn
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    expect(page.locator("#conversations li").first).to_have_attribute("data-id", str(conversation_id))
    expect(page.locator("#conversations li .open").first).to_have_text(title)


def test_personalisation_proposals_and_switching_the_instruction_page(page: Page, launched: Launched) -> None:
    """The active page changes the next run; a proposal accepted writes a
    version, refused writes nothing."""
    tag = uuid.uuid4().hex[:6]

    def create_page(title: str) -> None:
        page.click("#personalise")
        page.fill("#page-title", title)
        page.click("#create-page")
        expect(page.locator("#instruction-page option:checked")).to_have_text(title)
        page.click("#close-personal")

    def propose(signature: str) -> Locator:
        """ "Remember that ..." ends the run with a proposal shown as a diff."""
        run = send(page, f"Remember that signature: {signature}")
        expect(run.locator(".meta")).to_have_text("")  # no model was called
        proposal = run.locator(".proposal")
        expect(proposal.locator(".diff .added")).to_have_text(f"+ - Signature: {signature}")
        return proposal

    page.click("#personalise")
    expect(page.locator("#personal")).to_be_visible()
    page.fill("#display-name", f"Alice {tag}")
    page.select_option("#avatar", "🦉")
    page.select_option("#chat-mode", "floating")
    page.click("#save-personal")
    expect(page.locator("#personal-status")).to_have_text("Saved.")
    expect(page.locator("#page-notice")).to_contain_text(
        "Anyone who can edit this page changes how your agent behaves"
    )
    page.click("#close-personal")
    expect(page.locator("#name-view")).to_have_text(f"Alice {tag}")
    expect(page.locator("body")).to_have_class("mode-floating")

    create_page(f"Formal {tag}")
    accepted = propose(f"Formal {tag}")
    shot(page, launched, "proposal-diff")
    accepted.locator(".accept").click()
    expect(accepted.locator(".decision")).to_contain_text("Accepted")
    refused = propose(f"Sloppy {tag}")
    refused.locator(".refuse").click()
    expect(refused.locator(".decision")).to_have_text("Refused: nothing was written.")
    # Accepted was written, refused was not: the next answer signs as Formal.
    expect(send(page, "hello").locator(".answer")).to_contain_text(f"— Formal {tag}")

    create_page(f"Casual {tag}")  # created pages become active
    propose(f"Casual {tag}").locator(".accept").click()
    expect(send(page, "hello again").locator(".answer")).to_contain_text(f"— Casual {tag}")

    page.click("#personalise")
    page.select_option("#instruction-page", label=f"Formal {tag}")
    expect(page.locator("#personal-status")).to_have_text("Active instruction page switched.")
    shot(page, launched, "personalisation")
    page.click("#close-personal")
    answer = send(page, "and now?").locator(".answer")
    expect(answer).to_contain_text(f"— Formal {tag}")
    expect(answer).not_to_contain_text("Casual")

    page.reload()  # the settings are stored
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    expect(page.locator("#name-view")).to_have_text(f"Alice {tag}")
    expect(page.locator("#avatar-view")).to_have_text("🦉")
    expect(page.locator("body")).to_have_class("mode-floating")
    page.click("#personalise")
    page.select_option("#chat-mode", "sidebar")
    page.click("#save-personal")
    expect(page.locator("body")).to_have_class("mode-sidebar")


def test_a_web_only_model_unticks_workspace_sources_and_warns_before_sending(
    page: Page, launched: Launched
) -> None:
    page.select_option("#model", "offline-web")
    expect(page.locator("#web-warning")).to_be_visible()
    expect(page.locator("#web-warning")).to_contain_text("web-only")
    expect(page.locator("#source-workspace")).not_to_be_checked()
    expect(page.locator("#source-workspace")).to_be_disabled()

    page.fill("#message", "What is the capital of France?")
    page.click("#send")
    expect(page.locator("#web-confirm")).to_be_visible()
    expect(page.locator("#web-confirm-text")).to_contain_text("will not read your workspace")
    expect(page.locator("#log .run")).to_have_count(0)  # nothing sent yet
    shot(page, launched, "web-only-warning")
    page.click("#web-confirm-send")
    run = page.locator("#log .run")
    expect(run.locator(".meta")).to_have_text("Model: switchboard-offline-web", timeout=RUN_TIMEOUT)
    expect(run.locator('.notice[data-code="WEB_ONLY_MODEL"]')).to_be_visible()
    expect(page.locator("#web-confirm")).to_be_hidden()

    # Back on Auto the conversation's own choice is there again: the untick was for the run.
    page.select_option("#model", "auto")
    expect(page.locator("#source-workspace")).to_be_checked()
    expect(page.locator("#web-warning")).to_be_hidden()


def test_suggested_actions_prefill_the_composer_and_never_start_a_run(page: Page) -> None:
    posted: list[str] = []
    page.on("request", lambda r: posted.append(r.url) if r.method == "POST" else None)
    chips = page.locator("#chips button")
    expect(chips.first).to_be_visible()
    assert 2 <= chips.count() <= 4
    chips.first.click()
    expect(page.locator("#message")).not_to_have_value("")
    expect(page.locator("#message")).to_be_focused()
    expect(page.locator("#log .run")).to_have_count(0)
    assert posted == []


def test_suggested_actions_follow_the_selection_in_the_conversation(page: Page) -> None:
    send(page, "hello there")
    chips = page.locator("#chips button")
    expect(chips.first).to_have_text("Summarise the conversation")
    page.evaluate(
        """() => {
            const range = document.createRange();
            range.selectNodeContents(document.querySelector("#log .run .answer"));
            getSelection().removeAllRanges();
            getSelection().addRange(range);
        }"""
    )
    expect(chips.first).to_have_text("Summarise the selection")
    chips.first.click()
    # The selection goes with the message as its context, not pasted into it.
    expect(page.locator("#message")).to_have_value("Summarise the selected text.")
    expect(page.locator("#run-context")).to_contain_text("Selection: “You asked: hello there")
    expect(page.locator("#log .run")).to_have_count(1)  # prefilled, not sent


def test_a_rename_begun_while_the_answer_streams_survives_the_lists_refresh(page: Page) -> None:
    """The list is drawn again when a run ends; a title being typed meanwhile
    stays, with its focus, and is saved."""
    page.fill("#message", "Write the weekly status report for my team")
    page.click("#send")
    run = page.locator("#log .run").first
    expect(run.locator('.steps li[data-key="generate"]')).to_have_class("started", timeout=RUN_TIMEOUT)
    active = page.locator("#conversations li.active")
    active.locator(".rename").click()
    page.locator(".rename-input").press_sequentially("Rapport d'équipe")
    expect(run).to_have_attribute("data-status", "done", timeout=RUN_TIMEOUT)
    expect(page.locator("#send")).to_be_enabled()  # the list was drawn again after the run
    expect(page.locator(".rename-input")).to_be_focused()
    page.keyboard.type(" — semaine 49")
    page.keyboard.press("Enter")
    expect(active.locator(".open")).to_have_text("Rapport d'équipe — semaine 49")


def test_a_message_sent_while_a_new_conversation_is_created_goes_to_it(page: Page) -> None:
    """The server's answer to New conversation is held back while a message
    is sent: the message waits for it, lands in the new conversation, and
    its run stays in the log."""
    creation = HeldRequests("POST")
    page.route("**/api/agent/conversations", creation)
    with page.expect_request(lambda r: r.method == "POST" and r.url.endswith("/api/agent/conversations")):
        page.click("#new")
    text = "Rédige le rapport hebdomadaire de l'équipe"
    page.fill("#message", text)
    page.click("#send")
    assert len(creation.held) == 1
    creation.release()
    run = page.locator("#log .run")
    expect(run).to_have_count(1)
    expect(run).to_have_attribute("data-status", "done", timeout=RUN_TIMEOUT)
    expect(page.locator("#log .user")).to_have_text([text])
    expect(page.locator("#conversations li.active .open")).to_have_text(text)
    page.reload()  # what the server kept for the conversation the page shows
    web.ready(page)
    expect(page.locator("#log .user")).to_have_text([text])
    expect(page.locator("#log .run")).to_have_attribute("data-status", "done")


def test_a_message_sent_while_the_sources_just_ticked_are_saved_reads_them(page: Page) -> None:
    """The server's answer to saving the sources is held back while a message
    is sent: the message waits for it, and its run reads the mailbox ticked."""
    saved = lambda r: r.request.method == "PUT" and r.url.endswith("/sources")  # noqa: E731
    page.click("#sources-button")
    mail = page.get_by_label("Test mail")
    if mail.is_checked():  # a new conversation starts with the last one's sources
        with page.expect_response(saved):
            mail.uncheck()
    save = HeldRequests("PUT")
    page.route("**/api/agent/conversations/*/sources", save)
    with page.expect_request(lambda r: r.method == "PUT" and r.url.endswith("/sources")):
        mail.check()
    page.click("#sources-button")
    page.fill("#message", "check my mail for invoice")
    page.click("#send")
    assert len(save.held) == 1
    save.release()
    run = page.locator("#log .run")
    expect(run).to_have_attribute("data-status", "done", timeout=RUN_TIMEOUT)
    expect(run.locator(".answer")).to_contain_text("4711")
    expect(run.locator(".sources")).to_contain_text("connector: ")


def test_reloading_mid_run_resumes_the_stream(page: Page, launched: Launched) -> None:
    page.fill("#message", "Write the weekly status report for my team")
    page.click("#send")
    expect(page.locator('#log .run .steps li[data-key="generate"]')).to_have_class(
        "started", timeout=RUN_TIMEOUT
    )
    with page.expect_request(lambda r: "/api/agent/runs/" in r.url and r.url.endswith("/events")):
        page.reload()
    resumed = page.locator('#log .run[data-resumed="true"]')
    expect(resumed).to_have_count(1)
    expect(page.locator("#log .user")).to_have_text(["Write the weekly status report for my team"])
    shot(page, launched, "resumed-mid-run")
    expect(resumed.locator(".meta")).to_have_text(re.compile("^Model: "), timeout=RUN_TIMEOUT)
    expect(resumed.locator(".answer")).to_contain_text("You asked: Write the weekly status report")
    expect(resumed.locator(".steps li.completed")).to_have_count(4)
    expect(resumed.locator(".skill")).to_have_text("Skill: weekly-status-report")
