"""What the browser tests share: Debian's headless Chromium driven by
Playwright, a logged-in page that fails its test on any script error, an
axe-core check, screenshots into test-artifacts/, and sending a message."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Locator, Page, expect, sync_playwright

from tests.e2e.conftest import TOKENS, Launched

CHROMIUM = (
    os.environ.get("SWITCHBOARD_TEST_CHROMIUM")
    or shutil.which("chromium")
    or shutil.which("chromium-browser")
)
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
RUN_TIMEOUT = 20_000


@contextmanager
def chromium() -> Iterator[Browser]:
    if CHROMIUM is None:
        message = "no Chromium on this machine (apt-get install chromium); the browser test did not run"
        if os.environ.get("SWITCHBOARD_REQUIRE_BROWSER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield browser
        browser.close()


@contextmanager
def logged_in(
    browser: Browser, launched: Launched, user: str = "alice", locale: str = "en-GB", new: bool = True
) -> Iterator[Page]:
    """A user's browser, logged in with the link the launcher prints (the
    token becomes an HttpOnly cookie), in the given browser language; on a
    fresh conversation unless ``new`` is false. A script error anywhere
    fails the test."""
    context = browser.new_context(locale=locale, viewport={"width": 1280, "height": 860})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{launched.url}/?token={TOKENS[user]}")
    ready(page)
    if new:
        page.click("#new")
        expect(page.locator("#log .msg")).to_have_count(0)
    yield page
    context.close()
    assert errors == []


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One Chromium per test module (imported by the modules that use it)."""
    with chromium() as browser:
        yield browser


@pytest.fixture
def page(browser: Browser, launched: Launched) -> Iterator[Page]:
    """Alice's browser on a fresh conversation."""
    with logged_in(browser, launched) as page:
        yield page


def ready(page: Page) -> None:
    expect(page.locator("body")).to_have_attribute("data-ready", "true")


def shot(page: Page, launched: Launched, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"web-{name}-{launched.backend}.png"), full_page=True)


def send(page: Page, text: str) -> Locator:
    """Sends a message and returns the run's block once the run has ended."""
    before = page.locator("#log .run").count()
    page.fill("#message", text)
    page.click("#send")
    run = page.locator("#log .run").nth(before)
    expect(page.locator("#send")).to_be_enabled(timeout=RUN_TIMEOUT)
    return run
