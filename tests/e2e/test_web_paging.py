"""Long histories on the web page, against the real processes: a
conversation of 1,000 turns and an agent thread of 5,000 entries open at
their newest entry and are read back to their first as they are scrolled up,
what is being read staying in place while older entries come above it; a
conversation's run records are read back, a page of runs at a time, as far
as its answers need; the Memory view lists the newest notes first and loads
older ones. The controls in English and in French.

The histories are seeded through batch writes, not one request per entry:
the threads service's AppendEntries (100 entries a call) and
ImportAgentThread (the whole thread in one call), memory's project import."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import grpc
import httpx
import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from services.shared.identity import user_metadata
from switchboard.threads.v1 import threads_pb2, threads_service_pb2, threads_service_pb2_grpc
from tests.e2e import web
from tests.e2e.conftest import Launched
from tests.e2e.web import logged_in

TURNS = 1000
THREAD_ENTRIES = 5000
# A segment closes in the middle of the imported thread: its seam is drawn
# once the scroll reaches it.
CLOSED_SEGMENT = 2500
# More runs than the page reads a page of (history.js RUN_PAGE).
RUNS = 52
# More notes than the Memory view's first page (memory.js NOTE_PAGE).
NOTES = 60
NOTE_PAGE = 50

browser = web.browser


def question(n: int) -> str:
    return f"Question #{n:04d}"


def answer(n: int) -> str:
    return f"Answer #{n:04d}"


@pytest.fixture(scope="module")
def threads(launched: Launched) -> Iterator[threads_service_pb2_grpc.ThreadsServiceStub]:
    with grpc.insecure_channel(f"127.0.0.1:{launched.ports['threads']}") as channel:
        yield threads_service_pb2_grpc.ThreadsServiceStub(channel)


@pytest.fixture(scope="module")
def http(launched: Launched) -> Iterator[httpx.Client]:
    with launched.client(path="/api/agent", timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def long_conversation(
    launched: Launched, http: httpx.Client, threads: threads_service_pb2_grpc.ThreadsServiceStub
) -> str:
    """Alice's conversation of TURNS turns (a question and its answer each),
    appended a hundred entries at a time."""
    started = time.monotonic()
    conversation = http.post("/conversations", json={"title": "A long history"}).json()["id"]
    user = launched.user()
    entries = [
        threads_pb2.Entry(requester=user, target="personal", role=role, source=source, content=text)
        for n in range(1, TURNS + 1)
        for role, source, text in (
            (threads_pb2.ROLE_USER, "user", question(n)),
            (threads_pb2.ROLE_ASSISTANT, "engine", answer(n)),
        )
    ]
    for start in range(0, len(entries), 100):
        threads.AppendEntries(
            threads_service_pb2.AppendEntriesRequest(
                request_id=str(uuid.uuid4()), thread_id=conversation, entries=entries[start : start + 100]
            ),
            metadata=user_metadata(user),
            timeout=30,
        )
    print(f"seeded {TURNS} turns in {time.monotonic() - started:.2f} s")
    return conversation


@pytest.fixture(scope="module")
def long_thread(launched: Launched, threads: threads_service_pb2_grpc.ThreadsServiceStub) -> str:
    """An agent of alice's whose thread holds THREAD_ENTRIES entries, imported
    in one call: a closed segment (with its handoff summary), then the open one."""
    started = time.monotonic()
    agent = f"scribe-{uuid.uuid4().hex[:6]}"
    thread_id = str(uuid.uuid4())
    first = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)

    def line(n: int) -> str:
        asks = n % 2 == 1
        return json.dumps(
            {
                "thread_id": thread_id,
                "sequence": n,
                "requester": "architect",
                "target": agent,
                "correlation_id": f"c-{(n + 1) // 2}",
                "role": "user" if asks else "assistant",
                "source": "agent:architect" if asks else "engine",
                "run_id": "",
                "create_time": (first + timedelta(seconds=n)).isoformat(),
                "content": f"Entry #{n:04d}",
            }
        )

    def log(numbers: range) -> str:
        return "".join(line(n) + "\n" for n in numbers)

    files = [
        threads_pb2.ThreadFile(path=f"agents/{agent}/log.1.jsonl", content=log(range(1, CLOSED_SEGMENT + 1))),
        threads_pb2.ThreadFile(
            path=f"agents/{agent}/handoff.md",
            content="---\nsegment: 1\n---\n## Current objective\nShip the long-history viewer.\n",
        ),
        threads_pb2.ThreadFile(
            path=f"agents/{agent}/log.jsonl", content=log(range(CLOSED_SEGMENT + 1, THREAD_ENTRIES + 1))
        ),
    ]
    threads.ImportAgentThread(
        threads_service_pb2.ImportAgentThreadRequest(files=files),
        metadata=user_metadata(launched.user()),
        timeout=60,
    )
    print(f"seeded {THREAD_ENTRIES} thread entries in {time.monotonic() - started:.2f} s")
    return agent


def open_conversation(page: Page, conversation: str) -> None:
    """Opens it, unless the page opened it (the latest) already: the list
    marks it active once its log is drawn."""
    active = page.locator(f'#conversations li.active[data-id="{conversation}"]')
    if not active.count():
        page.locator(f'#conversations li[data-id="{conversation}"] .open').click()
    expect(active).to_have_count(1)


def open_agent(page: Page, agent: str) -> None:
    page.locator('#nav a[href="#agents"]').click()
    page.locator(f'#agent-list li[data-id="{agent}"] .open-agent').click()
    expect(page.locator("#agent-title")).to_have_text(agent)


def scroll_back_to_start(page: Page, box: str, items: Locator, first: Locator, most: int) -> None:
    """Scrolls ``box`` up to its top, again and again, each time waiting for
    the older page it brings above, until ``first`` is there. The first time,
    checks that what was read stays in place as the page comes above it."""
    before = items.count()
    kept = page.locator(box).evaluate(
        """(box) => {
             box.scrollTop = 0;
             const top = box.querySelector(".older").nextElementSibling;
             top.dataset.kept = "true";
             return top.getBoundingClientRect().top;
           }"""
    )
    for reads in range(most + 1):
        if reads:
            before = items.count()
            page.locator(box).evaluate("(box) => { box.scrollTop = 0; }")
        expect(items).not_to_have_count(before)
        if reads == 0:
            moved = page.locator(f"{box} [data-kept]").evaluate("(top) => top.getBoundingClientRect().top")
            assert abs(moved - kept) < 2, f"what was read moved from {kept} to {moved} px"
        if first.count():
            break
    else:
        pytest.fail(f"the first entry was not reached after {most} older pages")
    # Read to its start: the top shows the first entry, with nothing left to load.
    page.locator(box).evaluate("(box) => { box.scrollTop = 0; }")
    expect(first).to_be_in_viewport()
    expect(page.locator(f"{box} .older")).to_be_hidden()


def test_a_conversation_of_1000_turns_opens_at_its_newest_turn_and_scrolls_back_to_its_first(
    browser: Browser, launched: Launched, http: httpx.Client, long_conversation: str
) -> None:
    # Over HTTP: oldest first as before (old clients), newest first on request.
    path = f"/conversations/{long_conversation}/entries"
    assert [e["content"] for e in http.get(path, params={"page_size": 2}).json()["entries"]] == [
        question(1),
        answer(1),
    ]
    tail = http.get(path, params={"page_size": 2, "descending": "true"}).json()
    assert [e["content"] for e in tail["entries"]] == [answer(TURNS), question(TURNS)]
    back = {"page_size": 2, "descending": "true", "page_token": tail["next_page_token"]}
    earlier = http.get(path, params=back).json()["entries"]
    assert [e["content"] for e in earlier] == [answer(TURNS - 1), question(TURNS - 1)]

    with logged_in(browser, launched, new=False) as page:
        started = time.monotonic()
        open_conversation(page, long_conversation)
        newest = page.locator("#log .msg").last
        expect(newest).to_contain_text(answer(TURNS))
        expect(newest).to_be_in_viewport()
        expect(page.locator("#log .user").last).to_have_text(question(TURNS))
        expect(page.get_by_role("button", name="Load older messages")).to_have_count(1)
        messages = page.locator("#log .msg")
        expect(messages).to_have_count(200)  # a page of entries, not the whole conversation

        first = page.locator("#log .user", has_text=question(1))
        scroll_back_to_start(page, "#log", messages, first, most=2 * TURNS // 200)
        expect(messages).to_have_count(2 * TURNS)  # each turn once, in order
        assert page.locator("#log .user").first.text_content() == question(1)
        assert page.locator("#log .msg").nth(1).locator(".answer").text_content().strip() == answer(1)
        print(f"opened and read back {TURNS} turns in {time.monotonic() - started:.2f} s")


def test_an_agent_thread_of_5000_entries_opens_at_its_newest_entry_and_scrolls_back_to_its_first(
    browser: Browser, launched: Launched, long_thread: str
) -> None:
    with logged_in(browser, launched, new=False) as page:
        started = time.monotonic()
        open_agent(page, long_thread)
        entries = page.locator("#thread .entry")
        newest = page.locator(f'#thread .entry[data-sequence="{THREAD_ENTRIES}"]')
        expect(newest).to_contain_text(f"Entry #{THREAD_ENTRIES:04d}")
        expect(newest).to_be_in_viewport()
        expect(entries.last).to_have_attribute("data-sequence", str(THREAD_ENTRIES))
        expect(entries).to_have_count(500)
        expect(page.locator("#thread .seam")).to_have_count(0)  # the rotation is further back

        first = page.locator('#thread .entry[data-sequence="1"]')
        scroll_back_to_start(page, "#thread", entries, first, most=THREAD_ENTRIES // 500)
        expect(entries).to_have_count(THREAD_ENTRIES)
        expect(first).to_contain_text("Entry #0001")
        # The closed segment's seam, with its handoff summary, stands before the open segment's first entry.
        seam = page.locator("#thread .seam")
        expect(seam).to_have_count(1)
        expect(seam).to_contain_text(f"Rotation: segment 1 closed ({CLOSED_SEGMENT} entries)")
        expect(seam.locator(".handoff")).to_contain_text("Ship the long-history viewer.")
        after_seam = seam.evaluate("(seam) => seam.nextElementSibling.dataset.sequence")
        assert after_seam == str(CLOSED_SEGMENT + 1)
        print(f"opened and read back {THREAD_ENTRIES} thread entries in {time.monotonic() - started:.2f} s")

        # Plain text skips the Markdown parser and sanitiser (thousands of
        # entries are drawn): drawn as they would have drawn it.
        checked, different = page.evaluate(PLAIN_TEXT_IS_DRAWN_AS_MARKDOWN)
        assert different == [] and checked > 1000


# Random texts over an alphabet of Markdown's near misses, each drawn by
# renderMarkdown and by marked + DOMPurify, compared once whitespace is
# collapsed (HTML collapses it): [texts that took the plain path, those drawn
# differently].
PLAIN_TEXT_IS_DRAWN_AS_MARKDOWN = r"""async () => {
  const { renderMarkdown } = await import("/static/js/markdown.js");
  const { marked } = await import("/static/vendor/marked.esm.js");
  const DOMPurify = (await import("/static/vendor/purify.es.mjs")).default;
  const alphabet = "abhtpsw.:/ ,;!?()$%^{}=+-#'\"\n 1234ftxcom";
  let seed = 7;
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  const norm = (html) => html.replace(/\s+/g, " ").replace(/> /g, ">").replace(/ </g, "<").trim();
  let checked = 0;
  const different = [];
  for (let i = 0; i < 3000; i++) {
    let text = "";
    const length = 1 + Math.floor(random() * 30);
    for (let n = 0; n < length; n++) text += alphabet[Math.floor(random() * alphabet.length)];
    const fast = document.createElement("div");
    renderMarkdown(fast, text);
    if (fast.children.length !== 1 || fast.firstChild.childElementCount) continue;
    const slow = document.createElement("div");
    slow.innerHTML = DOMPurify.sanitize(marked.parse(text, { async: false, gfm: true }));
    if (norm(fast.innerHTML) !== norm(slow.innerHTML)) different.push(text);
    checked += 1;
  }
  return [checked, different.slice(0, 10)];
}"""


def test_the_controls_that_load_older_entries_speak_french(
    browser: Browser, launched: Launched, long_conversation: str, long_thread: str
) -> None:
    with logged_in(browser, launched, locale="fr-FR", new=False) as page:
        open_conversation(page, long_conversation)
        messages = page.locator("#log .msg")
        expect(messages).to_have_count(200)
        page.get_by_role("button", name="Charger les messages plus anciens").click()
        # Pressed (scrolled into sight on the way, which may read on): whole pages of older turns.
        expect(messages).not_to_have_count(200)
        shown = messages.count()
        assert shown % 200 == 0
        expect(page.locator("#log .user").first).to_have_text(question(TURNS - shown // 2 + 1))

        open_agent(page, long_thread)
        entries = page.locator("#thread .entry")
        expect(entries).to_have_count(500)
        page.get_by_role("button", name="Charger les entrées plus anciennes").click()
        expect(entries).not_to_have_count(500)
        shown = entries.count()
        assert shown % 500 == 0
        expect(entries.first).to_have_attribute("data-sequence", str(THREAD_ENTRIES - shown + 1))


def test_run_records_are_read_back_a_page_of_runs_at_a_time_as_far_as_the_answers_shown(
    browser: Browser, launched: Launched, http: httpx.Client
) -> None:
    conversation = http.post("/conversations", json={"title": "Many runs"}).json()["id"]
    started = time.monotonic()
    for n in range(1, RUNS + 1):
        with http.stream(
            "POST", f"/conversations/{conversation}/messages", json={"message": question(n), "model": "auto"}
        ) as stream:
            assert stream.status_code == 200
            stream.read()
    print(f"{RUNS} runs in {time.monotonic() - started:.2f} s")
    runs, token = [], ""
    while True:
        page_of_runs = http.get(
            f"/conversations/{conversation}/runs", params={"page_size": 100, "page_token": token}
        ).json()
        runs += page_of_runs["runs"]
        token = page_of_runs["next_page_token"]
        if not token:
            break
    oldest_run = runs[-1]
    assert len(runs) == RUNS and oldest_run["status"] == "done"

    with logged_in(browser, launched, new=False) as page:
        open_conversation(page, conversation)
        answers = page.locator("#log .run")
        expect(answers).to_have_count(RUNS)
        expect(answers.last).to_be_in_viewport()
        # The oldest answer carries its run's record, from the second page of runs.
        oldest = answers.first
        expect(oldest).to_have_attribute("data-run-id", oldest_run["id"])
        expect(oldest.locator(".meta")).to_have_text(f"Model: {oldest_run['model']}")
        expect(page.locator("#log .run[data-run-id]")).to_have_count(RUNS)
        read = page.evaluate("performance.getEntriesByType('resource').map((r) => r.name)")
        run_pages = [url for url in read if f"/conversations/{conversation}/runs?" in url]
        assert any("page_token=" in url for url in run_pages), run_pages


def test_the_memory_view_lists_the_newest_notes_first_and_loads_older_ones(
    browser: Browser, launched: Launched, http: httpx.Client
) -> None:
    tag = uuid.uuid4().hex[:6]
    files = [
        {
            "path": f".ideai/memory/paged-{tag}-{n:03d}.md",
            "content": (
                f"---\nname: paged-{tag}-{n:03d}\nmetadata:\n  type: fact\n---\n"
                f"# Paged note {n:03d}\n\n{' '.join(uuid.uuid4().hex[i : i + 7] for i in range(0, 28, 7))}\n"
            ),
        }
        for n in range(1, NOTES + 1)
    ]
    started = time.monotonic()
    imported = http.post("/project-context/import", json={"files": files})
    assert imported.status_code == 200, imported.text
    items = imported.json()["items"]
    print(f"seeded {NOTES} notes in {time.monotonic() - started:.2f} s")
    assert [i["outcome"] for i in items] == ["created"] * NOTES, items

    def notes_of(page: Page) -> Locator:
        return page.locator("#notes li.note .note-title")

    labels = {
        "en": (
            f"The {NOTE_PAGE} newest notes; older ones follow below.",
            "Load more notes",
            f"{NOTES} notes, newest first.",
        ),
        "fr": (
            f"Les {NOTE_PAGE} notes les plus récentes ; les plus anciennes suivent plus bas.",
            "Charger plus de notes",
            f"{NOTES} notes, les plus récentes d'abord.",
        ),
    }
    for locale, (some, more, all_) in (("en-GB", labels["en"]), ("fr-FR", labels["fr"])):
        with logged_in(browser, launched, locale=locale, new=False) as page:
            page.locator('#nav a[href="#memory"]').click()
            titles = notes_of(page)
            expect(titles).to_have_count(NOTE_PAGE)
            expect(titles.first).to_have_text(f"Paged note {NOTES:03d}")  # the newest first
            expect(page.locator("#notes-label")).to_have_text(some)
            control = page.get_by_role("button", name=more)
            if locale == "en-GB":
                control.scroll_into_view_if_needed()  # reached by scrolling down
            else:
                # Clicked in the page, in one step: scrolling it into view may
                # already have loaded the rest and hidden it.
                expect(control).to_be_attached()
                control.evaluate('button => { if (!button.closest("[hidden]")) button.click(); }')
            expect(titles).to_have_count(NOTES)
            expect(titles.last).to_have_text("Paged note 001")
            expect(page.locator("#notes-label")).to_have_text(all_)
            expect(control).to_be_hidden()
