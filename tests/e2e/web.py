"""What the browser tests share: Debian's headless Chromium driven by
Playwright, a logged-in page that fails its test on any script error, an
axe-core check, screenshots into test-artifacts/, and sending a message."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Locator, Page, expect, sync_playwright
from playwright.sync_api import Route as BrowserRoute
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.e2e.conftest import Launched
from tests.fakes.llm_server import FakeServer, Script, serve

CHROMIUM = (
    os.environ.get("SWITCHBOARD_TEST_CHROMIUM")
    or shutil.which("chromium")
    or shutil.which("chromium-browser")
)
ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
RUN_TIMEOUT = 20_000
# How long an expectation waits for the page (Playwright's default is 5 s):
# on a loaded machine, a click's request and the page's re-render can take
# longer, and an expectation that holds returns as soon as it does.
expect.set_options(timeout=10_000)


MARKDOWN = (
    "Here is **the plan**:\n\n"
    "- first step\n"
    "- second step\n\n"
    "```python\n"
    'print("bonjour")\n'
    "```\n\n"
    '<img src="x" onerror="window.__xss = 1"><script>window.__xss = 2</script>'
    '<a href="javascript:window.__xss = 3">link</a>\n'
)


def scripted_openai_app(script: Script) -> Starlette:
    """An OpenAI-compatible chat-completions endpoint (the engine calls it
    as a provider, over the real wire): Markdown for any request, a 400 when
    the user's message asks to fail. Each request body is kept in
    ``script.requests``."""

    async def completions(request: Request) -> Response:
        body = await request.json()
        script.requests.append(body)
        last = next((m for m in reversed(body["messages"]) if m["role"] == "user"), {})
        if "fail" in str(last.get("content", "")):
            error = {"message": "the scripted model refuses this request", "type": "invalid_request_error"}
            return JSONResponse({"error": error}, status_code=400)

        async def chunks() -> AsyncIterator[bytes]:
            def chunk(delta: dict[str, Any], finish: str | None = None, usage: Any = None) -> bytes:
                choices = [{"index": 0, "delta": delta, "finish_reason": finish}] if delta or finish else []
                data = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": body["model"]}
                return f"data: {json.dumps({**data, 'choices': choices, 'usage': usage})}\n\n".encode()

            yield chunk({"role": "assistant", "content": ""})
            for line in MARKDOWN.splitlines(keepends=True):
                yield chunk({"content": line})
            yield chunk({}, finish="stop")
            yield chunk({}, usage={"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30})
            yield b"data: [DONE]\n\n"

        return StreamingResponse(chunks(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


SCRIPTED_MODEL = {"id": "scripted", "provider": "scripted", "model": "scripted-markdown", "profile": "strong"}


def start_scripted_model() -> tuple[FakeServer, Callable[[], None]]:
    """Starts the scripted model for a test module's life: its port goes in
    the module's LAUNCH_ENV, read before any fixture runs. Returns the
    server and its stop."""
    manager = serve(scripted_openai_app)
    return manager.__enter__(), lambda: manager.__exit__(None, None, None)


def stop_at_module_end(stop: Callable[[], None]) -> Any:
    """An autouse module fixture that calls ``stop`` after the module's tests."""

    @pytest.fixture(scope="module", autouse=True)
    def stopper() -> Iterator[None]:
        yield
        stop()

    return stopper


def scripted_provider_env(server: FakeServer) -> dict[str, str]:
    """The engine's settings naming the scripted model's server as a provider."""
    provider = {"name": "scripted", "kind": "openai", "base_url": f"{server.url}/v1"}
    return {
        "SWITCHBOARD_ENGINE_PROVIDERS_JSON": json.dumps([provider]),
        "SWITCHBOARD_ENGINE_PROVIDER_ATTEMPTS": "1",
    }


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
    page.goto(f"{launched.url}/?token={launched.token(user)}")
    ready(page)
    if new:
        # Created once the server answers and the list shows it active (an
        # empty log alone holds before that when the last conversation was empty).
        with page.expect_response(
            lambda r: r.request.method == "POST" and r.url.endswith("/api/agent/conversations")
        ) as created:
            page.click("#new")
        conversation = created.value.json()["id"]
        expect(page.locator(f'#conversations li.active[data-id="{conversation}"]')).to_have_count(1)
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


def assert_accessible(page: Page, what: str) -> None:
    """axe-core (from npm) finds no serious or critical violation in what
    the page shows now; hidden views are not checked by axe."""
    if not AXE.exists():
        pytest.fail(f"{AXE} is missing: run npm install (scripts/test.sh does)")
    if not page.evaluate("typeof window.axe === 'object'"):
        page.add_script_tag(path=str(AXE))
    violations = page.evaluate(
        """async () => (await axe.run(document, { resultTypes: ["violations"] })).violations
            .filter((v) => v.impact === "serious" || v.impact === "critical")
            .map((v) => ({ id: v.id, impact: v.impact, help: v.help,
                           nodes: v.nodes.slice(0, 5).map((n) => n.target.join(" ")) }))"""
    )
    assert violations == [], f"{what}: {violations}"


def create_instruction_page(page: Page, title: str) -> None:
    """Through personalisation: a new instruction page, made active."""
    page.click("#personalise")
    page.fill("#page-title", title)
    page.click("#create-page")
    expect(page.locator("#instruction-page option:checked")).to_have_text(title)
    page.click("#close-personal")


def send(page: Page, text: str) -> Locator:
    """Sends a message and returns the run's block once the run has ended."""
    before = page.locator("#log .run").count()
    page.fill("#message", text)
    page.click("#send")
    run = page.locator("#log .run").nth(before)
    # Ended as the page shows it (every ending sets data-status), not only
    # the Send button enabled again: that alone can be seen before the run's
    # block is in the log.
    expect(run).to_have_attribute("data-status", re.compile(r"\w"), timeout=RUN_TIMEOUT)
    expect(page.locator("#send")).to_be_enabled(timeout=RUN_TIMEOUT)
    return run


def stream_cut_after(kind: str, count: int, then: str = "") -> Callable[[BrowserRoute], None]:
    """A route handler: the real stream, cut short on its way to the page
    after its ``count``-th event of ``kind``, and ``then`` (raw SSE, where
    ``{run_id}`` is the run's id) after it."""

    def cut(route: BrowserRoute) -> None:
        response = route.fetch()
        events = re.split(r"\r?\n\r?\n", response.text())
        kept = [n for n, event in enumerate(events) if f"event: {kind}" in event][count - 1]
        run_id = json.loads(events[kept].split("data: ", 1)[1])["run_id"]
        body = "\r\n\r\n".join(events[: kept + 1]) + "\r\n\r\n" + then.replace("{run_id}", run_id)
        route.fulfill(response=response, body=body)

    return cut


class FailingReconnections:
    """A route handler for a run's /events: the first ``failures``
    reconnections are reset, later ones reach the gateway; each one's
    Last-Event-ID is kept in ``resumed_from``."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.resumed_from: list[str] = []

    def __call__(self, route: BrowserRoute) -> None:
        self.resumed_from.append(route.request.headers.get("last-event-id", ""))
        if len(self.resumed_from) <= self.failures:
            route.abort("connectionreset")
        else:
            route.continue_()


class HeldRequests:
    """A route handler that holds back the requests of one method (the
    others go on), as a slow server would, until ``release()`` lets them
    reach the gateway."""

    def __init__(self, method: str) -> None:
        self.method = method
        self.held: list[BrowserRoute] = []

    def __call__(self, route: BrowserRoute) -> None:
        if route.request.method == self.method:
            self.held.append(route)
        else:
            route.fallback()

    def release(self) -> None:
        for route in self.held:
            route.fulfill(response=route.fetch())
