"""How a run reads in the browser, against the real processes: the Stop
button cancels a streaming run; cancelled, budget exceeded, failed and
waiting for approval each look distinct and give their cause (after a
reload too); a model's Markdown is rendered, its HTML sanitised, and code
blocks have a copy button; a stream that keeps dropping is followed until the
run ends, and one that ends before the run started says so.

The Markdown and the failure come over the real wire from a scripted
OpenAI-compatible model (a local server the engine calls as a provider);
the budget is the engine's step budget, set low so a tool-using run
exceeds it."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e import web
from tests.e2e.conftest import Launched
from tests.e2e.web import (
    RUN_TIMEOUT,
    SCRIPTED_MODEL,
    FailingReconnections,
    create_instruction_page,
    logged_in,
    scripted_provider_env,
    send,
    shot,
    start_scripted_model,
    stream_cut_after,
)

SCRIPTED, stop_scripted = start_scripted_model()
MODELS = [
    {
        "id": "offline-balanced",
        "provider": "offline",
        "model": "switchboard-offline-balanced",
        "profile": "balanced",
    },
    SCRIPTED_MODEL,
]
LAUNCH_ENV = {
    "SWITCHBOARD_ROUTER_MODELS_JSON": json.dumps(MODELS),
    **scripted_provider_env(SCRIPTED),
    # A tool-using run takes three steps (model, tool, model): over this budget.
    "SWITCHBOARD_ENGINE_MAX_RUN_STEPS": "2",
    "SWITCHBOARD_GATEWAY_CONNECTORS_JSON": json.dumps([{"name": "testmail", "title": "Test mail"}]),
    "SWITCHBOARD_ENGINE_OFFLINE_TOKEN_DELAY": "0.05",
}


scripted_model = web.stop_at_module_end(stop_scripted)
# The shared browser fixtures (tests/e2e/web.py).
browser = web.browser
page = web.page


def test_stop_cancels_the_streaming_run_and_it_shows_as_cancelled(page: Page, launched: Launched) -> None:
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    page.fill("#message", "Write a long weekly status report for my team with every detail you know")
    page.click("#send")
    run = page.locator("#log .run").last
    expect(run.locator(".answer")).to_contain_text("You asked", timeout=RUN_TIMEOUT)  # streaming now
    stop = page.get_by_role("button", name="Stop")
    expect(stop).to_be_visible()
    expect(page.locator("#send")).to_be_disabled()
    with page.expect_response(lambda r: r.url.endswith("/cancel") and r.request.method == "POST") as cancel:
        stop.click()
    assert cancel.value.status == 200
    status = run.locator(".run-status")
    expect(status).to_have_class(re.compile("status-cancelled"), timeout=RUN_TIMEOUT)
    expect(status).to_contain_text("Cancelled")
    expect(status).to_contain_text("cancelled by the user")
    expect(stop).to_be_hidden()
    expect(page.locator("#send")).to_be_enabled()
    # Stopped mid-answer: the answer stops short of the model's signature line.
    expect(run.locator(".answer")).not_to_contain_text("This answer comes from")
    shot(page, launched, "run-cancelled")

    # The record says so too: after a reload the run still reads as cancelled.
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    expect(page.locator("#log .run .run-status.status-cancelled")).to_contain_text("cancelled by the user")


def test_endings_look_distinct_with_their_cause(page: Page, launched: Launched) -> None:
    page.click("#sources-button")
    page.get_by_label("Test mail").check()
    page.click("#sources-button")

    over = send(page, "check my mail for invoice")
    expect(over.locator(".run-status")).to_have_class(re.compile("status-budget_exceeded"))
    expect(over.locator(".run-status")).to_contain_text("Budget exceeded")
    expect(over.locator(".run-status")).to_contain_text("step budget of 2 exceeded")

    page.select_option("#model", "scripted")
    failed = send(page, "please fail now")
    expect(failed.locator(".run-status")).to_have_class(re.compile("status-failed"))
    expect(failed.locator(".run-status")).to_contain_text("Failed")
    expect(failed.locator(".run-status")).to_contain_text("refuses this request")

    page.select_option("#model", "offline-balanced")
    create_instruction_page(page, "Signature")
    waiting = send(page, "Remember that signature: Zoé")
    expect(waiting.locator(".run-status")).to_have_class(re.compile("status-waiting_approval"))
    expect(waiting.locator(".run-status")).to_contain_text("Waiting for your approval")
    expect(waiting.locator(".proposal")).to_be_visible()

    done = send(page, "hello")
    expect(done.locator(".run-status")).to_be_hidden()

    # Four looks: no two endings share a background colour.
    colours = {
        block.evaluate("node => getComputedStyle(node).backgroundColor")
        for block in (
            over.locator(".run-status"),
            failed.locator(".run-status"),
            waiting.locator(".run-status"),
        )
    }
    assert len(colours) == 3
    shot(page, launched, "run-endings")

    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    endings = page.locator("#log .run .run-status:visible")
    expect(endings).to_have_count(3)
    expect(endings.nth(0)).to_contain_text("step budget of 2 exceeded")
    expect(endings.nth(1)).to_contain_text("refuses this request")
    expect(endings.nth(2)).to_contain_text("Waiting for your approval")


def test_answers_render_as_sanitised_markdown_with_a_copy_button(page: Page, launched: Launched) -> None:
    page.select_option("#model", "scripted")
    run = send(page, "Show me the plan")
    answer = run.locator(".answer")
    expect(answer.locator("strong")).to_have_text("the plan")
    expect(answer.locator("li")).to_have_text(["first step", "second step"])
    expect(answer.locator("pre code")).to_have_text('print("bonjour")')
    # The model's HTML is sanitised: no script ran, no handler or javascript: link survived.
    expect(answer.locator("script")).to_have_count(0)
    assert answer.locator("img").get_attribute("onerror") is None
    assert (answer.locator("a").get_attribute("href") or "").startswith("javascript") is False
    assert page.evaluate("window.__xss") is None

    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    answer.get_by_role("button", name="Copy code").click()
    expect(answer.get_by_role("button", name="Copy code")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == 'print("bonjour")\n'
    shot(page, launched, "markdown-answer")

    # From the stored history after a reload, rendered the same way.
    page.reload()
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    expect(page.locator("#log .run .answer pre code")).to_have_text('print("bonjour")')
    expect(page.locator("#log .run .answer strong")).to_have_text("the plan")


def test_a_dropped_stream_resumes_with_last_event_id_and_loses_nothing(
    page: Page, launched: Launched
) -> None:
    """The connection of a run's stream ends after three pieces of the
    answer (the real stream, cut short on its way to the page): the page
    reattaches with Last-Event-ID and shows the whole answer, once."""

    reattached: list[str] = []
    page.on(
        "request",
        lambda r: (
            reattached.append(r.headers.get("last-event-id", "")) if r.url.endswith("/events") else None
        ),
    )
    page.route("**/messages", stream_cut_after("delta", 3))
    run = send(page, "Write a long weekly status report for my team with every detail you know")
    expect(run.locator(".meta")).to_have_text(re.compile("^Model: "), timeout=RUN_TIMEOUT)
    assert len(reattached) == 1 and int(reattached[0]) > 3, reattached  # after the last event seen
    answer = run.locator(".answer").inner_text()
    assert answer.count("You asked") == 1 and "This answer comes from" in answer, answer
    expect(run.locator(".run-status")).to_be_hidden()


def test_a_stream_that_keeps_dropping_is_followed_until_the_run_ends(page: Page) -> None:
    """After the cut, the next six reconnections fail (more than the page
    tries in a row): the page asks the run's record, waits while it goes on,
    and follows it again from the last event it showed, so the whole answer
    arrives once and the run reads as done (not a block with no ending)."""
    reconnections = FailingReconnections(6)
    records: list[str] = []

    page.on("request", lambda r: records.append(r.url) if re.search(r"/runs/[^/]+$", r.url) else None)
    page.route("**/messages", stream_cut_after("delta", 3))
    page.route("**/runs/*/events", reconnections)
    page.fill("#message", "Write a long weekly status report for my team with every detail you know")
    page.click("#send")
    run = page.locator("#log .run").last
    expect(run).to_have_attribute("data-status", "done", timeout=3 * RUN_TIMEOUT)
    expect(run.locator(".meta")).to_have_text(re.compile("^Model: "))
    answer = run.locator(".answer").inner_text()
    assert answer.count("You asked") == 1 and "This answer comes from" in answer, answer
    expect(run.locator(".run-status")).to_be_hidden()
    # All seven from the last event shown before the cut.
    resumed_from = reconnections.resumed_from
    assert len(resumed_from) == 7 and len(set(resumed_from)) == 1, resumed_from
    assert int(resumed_from[0]) > 3, resumed_from
    assert records, "the page asked the run's record before following it again"


def test_the_gateways_stream_interrupted_is_not_taken_for_the_runs_end(page: Page) -> None:
    """The gateway gives up reopening a broken stream with an error that has
    no id ("stream interrupted": the stream's end, not the run's): the page
    reconnects from the last event it showed and the run reads as done."""
    interrupted = json.dumps(
        {"code": "UNAVAILABLE", "message": "stream interrupted", "run_id": "{run_id}", "sequence": 0}
    )
    reconnections = FailingReconnections(0)
    page.route("**/messages", stream_cut_after("delta", 3, f"event: error\r\ndata: {interrupted}\r\n\r\n"))
    page.route("**/runs/*/events", reconnections)
    run = send(page, "Rédige un long rapport hebdomadaire pour mon équipe avec tous les détails")
    expect(run).to_have_attribute("data-status", "done")
    answer = run.locator(".answer").inner_text()
    assert answer.count("You asked") == 1 and "This answer comes from" in answer, answer
    expect(run.locator(".run-status")).to_be_hidden()
    assert len(reconnections.resumed_from) == 1 and int(reconnections.resumed_from[0]) > 3


@pytest.mark.parametrize(
    ("locale", "ending", "cause"),
    [
        ("en-GB", "Failed", "The server closed the stream before the run started."),
        ("fr-FR", "Échec", "Le serveur a fermé le flux avant le début de l'exécution."),
    ],
)
def test_a_stream_that_ends_before_the_run_started_says_so(
    browser: Browser, launched: Launched, locale: str, ending: str, cause: str
) -> None:
    with logged_in(browser, launched, locale=locale) as page:
        page.route(
            "**/messages",
            lambda route: route.fulfill(status=200, content_type="text/event-stream", body=""),
        )
        page.fill("#message", "Bonjour, où en est le projet ?")
        page.click("#send")
        status = page.locator("#log .run .run-status")
        expect(status).to_have_class(re.compile("status-failed"), timeout=RUN_TIMEOUT)
        expect(status).to_contain_text(ending)
        expect(status).to_contain_text(cause)
        expect(page.locator("#send")).to_be_enabled()
