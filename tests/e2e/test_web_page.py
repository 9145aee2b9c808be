"""The web page in a real browser (Debian's headless Chromium driven by
Playwright) against the real processes: a person types a message and
watches the run stream — steps ticking, the answer, the model used — and the
conversation's history is there after a reload."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.e2e.conftest import TOKENS, Launched

CHROMIUM = (
    os.environ.get("SWITCHBOARD_TEST_CHROMIUM")
    or shutil.which("chromium")
    or shutil.which("chromium-browser")
)
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if CHROMIUM is None:
        message = "no Chromium on this machine (apt-get install chromium); the browser test did not run"
        if os.environ.get("SWITCHBOARD_REQUIRE_BROWSER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser, launched: Launched) -> Iterator[Page]:
    # The launched system requires tokens; the page sends none, so the
    # browser adds alice's to every request, as a proxy would.
    context = browser.new_context(extra_http_headers={"Authorization": f"Bearer {TOKENS['alice']}"})
    page = context.new_page()
    yield page
    context.close()


def test_a_person_sends_a_message_and_watches_the_run(page: Page, launched: Launched) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{launched.url}/")
    page.fill("#message", "Write the weekly status report for my team")
    page.click("#send")

    run = page.locator(".msg").last
    expect(run.locator(".steps li.completed")).to_have_count(4, timeout=15_000)  # 3 steps + the skill
    expect(run.locator(".steps")).to_contain_text("Reading context")
    expect(run.locator(".steps")).to_contain_text("Skill: weekly-status-report (auto)")
    expect(run.locator(".answer")).to_contain_text("You asked: Write the weekly status report")
    expect(run.locator(".meta")).to_contain_text("Model: switchboard-offline-")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"web-page-run-{launched.backend}.png"))

    page.reload()
    expect(page.locator("#log .user")).to_have_text(["Write the weekly status report for my team"])
    expect(page.locator("#log .answer")).to_contain_text(["You asked: Write the weekly status report"])
    assert errors == []
