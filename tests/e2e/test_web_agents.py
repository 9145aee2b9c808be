"""The Agents view in the browser, against the real processes:
registering, renaming and changing an agent's model (a provider
swap, which starts from the handoff summary: proven by what the scripted
model received over the real wire); the agent's thread, live while asks
stream, filtered by pair and by correlation (each labelled a partial view),
with a rotation seam carrying the handoff summary; the thread exported as a
download and imported back; the live state updating over SSE until it
expires; the project context edited and imported from a project folder."""

from __future__ import annotations

import json
import re
import shutil
import threading
import uuid
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e import web
from tests.e2e.conftest import Launched
from tests.e2e.sse import read_events
from tests.e2e.web import (
    RUN_TIMEOUT,
    SCRIPTED_MODEL,
    FailingReconnections,
    scripted_provider_env,
    shot,
    start_scripted_model,
    stream_cut_after,
)
from tests.fakes.a2a_agent import serve_agent

FIXTURE_PROJECT = Path(__file__).resolve().parents[1] / "fixtures" / "memory" / "project"
SCRIPTED, stop_scripted = start_scripted_model()
MODELS = [
    {"id": "offline-fast", "provider": "offline", "model": "switchboard-offline-fast", "profile": "fast"},
    SCRIPTED_MODEL,
]
# Two asks (four entries) close a segment, as on every launched system
# (tests/e2e/conftest.py): the viewer shows the seam.
LAUNCH_ENV = {
    "SWITCHBOARD_ROUTER_MODELS_JSON": json.dumps(MODELS),
    **scripted_provider_env(SCRIPTED),
    # Answers slow enough (several seconds) to watch one stream from outside.
    "SWITCHBOARD_ENGINE_OFFLINE_TOKEN_DELAY": "0.15",
    # A remote A2A agent on loopback (tests/fakes/a2a_agent.py).
    "SWITCHBOARD_REMOTE_AGENT_ALLOW_LOOPBACK": "true",
}


scripted_model = web.stop_at_module_end(stop_scripted)
browser = web.browser
page = web.page


def open_agents(page: Page) -> None:
    page.get_by_role("link", name="Agents").click()
    expect(page.locator("#view-agents")).to_be_visible()
    expect(page.locator("#view-chat")).to_be_hidden()


def register(page: Page, agent_id: str, name: str, model: str) -> None:
    page.fill("#new-agent-id", agent_id)
    page.fill("#new-agent-name", name)
    page.select_option("#new-agent-model", model)
    page.get_by_role("button", name="Register").click()
    expect(page.locator("#registry-status")).to_have_text(f"Agent {agent_id} registered.")
    expect(page.locator("#agent-title")).to_have_text(name)


def ask(page: Page, requester: str, message: str) -> None:
    before = page.locator("#thread .entry:not(.live)").count()
    page.fill("#ask-requester", requester)
    page.fill("#ask-message", message)
    page.get_by_role("button", name="Ask", exact=True).click()
    expect(page.locator("#thread .entry.live").first).to_be_visible()
    expect(page.locator("#ask-send")).to_be_enabled(timeout=RUN_TIMEOUT)
    expect(page.locator("#thread .entry:not(.live)")).to_have_count(before + 2)


def test_registry_thread_viewer_rotation_filters_and_provider_swap(page: Page, launched: Launched) -> None:
    tag = uuid.uuid4().hex[:6]
    qa = f"qa-{tag}"
    open_agents(page)
    register(page, qa, "QA", "offline-fast")
    expect(page.locator(f'#agent-list li[data-id="{qa}"]')).to_contain_text("QA")
    expect(page.locator("#thread .empty")).to_be_visible()

    page.fill("#agent-name", "Quality")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#agent-status")).to_have_text("Saved.")
    expect(page.locator(f'#agent-list li[data-id="{qa}"]')).to_contain_text("Quality")

    # Two requesters on the one shared thread; the second rotates it.
    ask(page, "architect", "Is the release ready?")
    expect(page.locator("#thread .entry").first).to_contain_text(f"architect asks {qa}")
    ask(page, "main", "Which tests are still red?")
    entries = page.locator("#thread .entry")
    expect(entries).to_have_count(4)
    expect(page.locator("#view-label")).to_contain_text("Full thread")

    # The rotation seam, with the handoff summary the next model receives.
    seam = page.locator("#thread .seam")
    expect(seam).to_have_count(1, timeout=RUN_TIMEOUT)
    expect(seam).to_contain_text("Rotation: segment 1 closed (4 entries)")
    expect(seam.locator(".handoff:not(.pending)")).to_contain_text(
        "Is the release ready?", timeout=RUN_TIMEOUT
    )
    seam.scroll_into_view_if_needed()
    shot(page, launched, "agents-thread-seam")

    # A third requester asks from outside the page: the viewer shows the
    # question while its run still streams, without a reload.
    outside = threading.Thread(
        target=lambda: httpx.post(
            f"{launched.url}/api/agent/agents/{qa}/asks",
            json={"message": "Please summarise the open bugs for the release notes", "requester": "ops"},
            headers=launched.headers(),
            timeout=60,
        ).read()
    )
    outside.start()
    expect(page.locator('#thread .entry[data-requester="ops"]').first).to_contain_text(f"ops asks {qa}")
    assert outside.is_alive(), "the run ended before the viewer showed its question"
    outside.join()
    expect(page.locator('#thread .entry[data-requester="ops"]')).to_have_count(2)
    # The seam now stands before the first entry of segment 2.
    expect(page.locator("#thread > *").nth(4)).to_have_class(re.compile("seam"))

    # Filters are partial views, and say so.
    page.get_by_label("One requester (pair)").check()
    page.fill("#filter-requester", "architect")
    page.press("#filter-requester", "Enter")
    expect(page.locator("#view-label")).to_contain_text(f"Partial view: only architect's exchanges with {qa}")
    expect(page.locator("#thread .entry")).to_have_count(2)
    expect(page.locator("#thread .seam")).to_have_count(0)
    shot(page, launched, "agents-pair-view")
    page.locator("#thread .correlation").first.click()
    expect(page.locator("#view-label")).to_contain_text("Partial view: only correlation")
    expect(page.get_by_label("One correlation")).to_be_checked()
    expect(page.locator("#thread .entry")).to_have_count(2)
    page.get_by_label("Full thread").check()
    expect(page.locator("#thread .entry")).to_have_count(6)

    # Provider swap: the page says it starts from the handoff summary, and it does.
    page.select_option("#agent-model", "scripted")
    expect(page.locator("#swap-warning")).to_contain_text("Provider swap: from offline to scripted")
    expect(page.locator("#swap-warning")).to_contain_text("starts from the handoff summary")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#agent-status")).to_contain_text("Provider swapped")
    SCRIPTED.script.requests.clear()
    ask(page, "architect", "Any blocker left?")
    expect(page.locator('#ask-notices .notice[data-code="PROVIDER_SWITCHED"]')).to_contain_text(
        "switched from offline to scripted"
    )
    expect(page.locator("#thread .entry.assistant").last.locator("strong")).to_have_text("the plan")
    system = SCRIPTED.script.requests[-1]["messages"][0]["content"]
    handoff = system[system.index("# Handoff summary") :]
    assert "## Last correlated answer" in handoff and "Please summarise the open bugs" in handoff
    shot(page, launched, "agents-provider-swap")

    # An ask is stopped from the viewer: its run ends cancelled, and says so.
    page.select_option("#agent-model", "offline-fast")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#agent-status")).to_contain_text("Provider swapped")
    page.fill("#ask-requester", "architect")
    page.fill("#ask-message", "Please list every risk of the release in great detail for the whole team")
    page.get_by_role("button", name="Ask", exact=True).click()
    expect(page.locator("#thread .entry.assistant.live .entry-body")).not_to_be_empty(timeout=RUN_TIMEOUT)
    page.locator("#ask-form").get_by_role("button", name="Stop").click()
    expect(page.locator("#ask-notices .status-cancelled")).to_contain_text("cancelled by the user")
    expect(page.locator("#ask-stop")).to_be_hidden()
    page.select_option("#agent-model", "scripted")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#agent-status")).to_contain_text("Provider swapped")

    page.reload()  # the registry keeps the new model
    web.ready(page)
    expect(page.locator("#agent-model")).to_have_value("scripted")


def test_an_ask_whose_stream_keeps_dropping_is_followed_to_its_answer(page: Page) -> None:
    """The ask's stream is cut after three pieces of the answer and the next
    six reconnections fail: the viewer follows the run again from the last
    event it showed, and the thread gets the question and the whole answer."""
    open_agents(page)
    agent = f"qa-{uuid.uuid4().hex[:6]}"
    register(page, agent, "QA", "offline-fast")
    reconnections = FailingReconnections(6)
    page.route("**/agents/*/asks", stream_cut_after("delta", 3))
    page.route("**/runs/*/events", reconnections)
    question = "Quels sont les risques de la mise en production de vendredi ?"
    page.fill("#ask-requester", "architect")
    page.fill("#ask-message", question)
    page.get_by_role("button", name="Ask", exact=True).click()
    expect(page.locator("#ask-send")).to_be_enabled(timeout=3 * RUN_TIMEOUT)
    entries = page.locator("#thread .entry:not(.live)")
    expect(entries).to_have_count(2)
    expect(entries.first).to_contain_text(question)
    expect(entries.last).to_contain_text("You asked")
    expect(page.locator("#thread .error, #ask-notices .error")).to_have_count(0)
    resumed_from = reconnections.resumed_from
    assert len(resumed_from) == 7 and len(set(resumed_from)) == 1 and int(resumed_from[0]) > 3, resumed_from


def test_a_thread_is_exported_as_a_download_and_imported(
    page: Page, launched: Launched, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:6]
    source, copy = f"arch-{tag}", f"arch-copy-{tag}"
    open_agents(page)
    register(page, source, "Architect", "offline-fast")
    ask(page, "main", "Which database do we use?")
    with page.expect_download() as download:
        page.get_by_role("button", name="Export thread").click()
    assert download.value.suggested_filename == f"{source}-thread.json"
    bundle = json.loads(Path(download.value.path()).read_text())
    paths = {f["path"] for f in bundle["files"]}
    assert f"agents/{source}/log.jsonl" in paths
    log = next(f["content"] for f in bundle["files"] if f["path"] == f"agents/{source}/log.jsonl")
    assert "Which database do we use?" in log
    expect(page.locator("#agent-status")).to_contain_text("Exported")

    # As if from another installation: the same thread under another agent id.
    thread_id = json.loads(log.splitlines()[0])["thread_id"]
    moved = {
        "files": [
            {
                "path": f["path"].replace(source, copy),
                "content": f["content"].replace(source, copy).replace(thread_id, str(uuid.uuid4())),
            }
            for f in bundle["files"]
        ]
    }
    exported = tmp_path / "export.json"
    exported.write_text(json.dumps(moved))
    page.set_input_files("#import-thread", str(exported))
    expect(page.locator("#registry-status")).to_contain_text(f"Imported the thread of {copy} (2 entries)")
    expect(page.locator(f'#agent-list li[data-id="{copy}"]')).to_be_visible()
    expect(page.locator("#thread .entry").first).to_contain_text("Which database do we use?")
    # The same file again: that agent has a thread now; the page says why nothing happened.
    page.set_input_files("#import-thread", str(exported))
    expect(page.locator("#registry-status")).to_contain_text("already has a live thread")


def test_live_state_updates_over_sse_and_expires_and_the_project_context_is_edited_and_imported(
    page: Page, launched: Launched, tmp_path: Path
) -> None:
    open_agents(page)
    expect(page.locator("#live-state .empty")).to_be_visible()
    # An agent CLI says what it is doing: the page shows it live, with its expiry.
    set_state = httpx.put(
        f"{launched.url}/api/agent/live-state/reviewer",
        json={"activity": "reviewing the migration", "detail": "PR 42", "ttl_seconds": 4},
        headers=launched.headers(),
    )
    assert set_state.status_code == 200, set_state.text
    row = page.locator('#live-state li[data-agent="reviewer"]')
    expect(row).to_contain_text("reviewing the migration")
    expect(row).to_contain_text("PR 42")
    expect(row.locator(".expiry")).to_contain_text(re.compile(r"expires in [0-4] s"))
    shot(page, launched, "agents-live-state")
    expect(row).to_have_count(0, timeout=10_000)
    expect(page.locator("#live-status")).to_have_text("reviewer's state expired.")

    page.fill("#project-context", "# Rules\n- Every change ships with its test.\n")
    page.get_by_role("button", name="Save context").click()
    expect(page.locator("#context-status")).to_contain_text("every agent's next run reads this context")
    page.reload()
    web.ready(page)
    expect(page.locator("#project-context")).to_have_value(re.compile("Every change ships with its test"))

    # A project folder as the IDE keeps it (with a note that has no kind), plus a file that is not read.
    folder = tmp_path / "project"
    shutil.copytree(FIXTURE_PROJECT, folder)
    (folder / "README.md").write_text("not read")
    page.set_input_files("#import-folder", str(folder))
    result = page.locator("#import-result li")
    expect(result).to_have_count(5)
    expect(result.filter(has_text=".ideai/memory/retry-policy.md")).to_contain_text("created")
    expect(result.filter(has_text=".ideai/memory/no-kind.md")).to_contain_text("skipped (")
    expect(page.locator("#project-context")).to_have_value(
        re.compile("Services talk only through the gRPC contracts")
    )
    shot(page, launched, "agents-project-context")


FORBIDDEN_TEXTS = {
    "en-GB": ("Only its owner ({owner}) or an admin can change this agent.", "Not allowed:"),
    "fr-FR": ("Seuls son propriétaire ({owner}) ou un admin peuvent modifier cet agent.", "Non autorisé :"),
}


@pytest.mark.parametrize("locale", sorted(FORBIDDEN_TEXTS))
def test_another_users_agent_offers_no_edit_and_says_why_its_thread_is_refused(
    browser: Browser, launched: Launched, locale: str
) -> None:
    agent = f"owned-{uuid.uuid4().hex[:6]}"
    created = httpx.post(
        f"{launched.url}/api/agent/agents", json={"id": agent}, headers=launched.headers("alice"), timeout=30
    )
    assert created.status_code == 201, created.text
    owner_line, refused = FORBIDDEN_TEXTS[locale]
    with web.logged_in(browser, launched, user="bob", locale=locale, new=False) as page:
        page.locator("nav a[href='#agents']").click()
        expect(page.locator("#view-agents")).to_be_visible()
        page.locator(f"#agent-list li[data-id='{agent}'] button.open-agent").click()
        # No form the API would refuse: bob is neither the owner nor an admin.
        expect(page.locator("#agent-form")).to_be_hidden()
        expect(page.locator("#agent-status")).to_have_text(owner_line.format(owner=launched.user("alice")))
        # Reading the thread is for members: the refusal, in the reader's language, with the API's reason.
        alert = page.locator("#alert")
        expect(alert).to_contain_text(refused)
        expect(alert).to_contain_text(f"is not a member of agent '{agent}'")
        shot(page, launched, f"agents-not-a-member-{locale}")


def test_an_agents_provider_pin_and_injection_strategy_over_http(launched: Launched) -> None:
    """Set, read back and refused over HTTP; the pinned agent's ask reaches
    the pinned provider's endpoint (the recording scripted model), where
    Auto alone would have chosen the offline model for so short a question."""
    tag = uuid.uuid4().hex[:6]
    agent, stray = f"pinned-{tag}", f"stray-{tag}"
    with launched.client(path="/api/agent", timeout=60) as http:
        created = http.post(
            "/agents",
            json={"id": agent, "provider_id": "scripted", "model": "auto", "injection_strategy": "stdin"},
        )
        assert created.status_code == 201, created.text
        shown = http.get(f"/agents/{agent}").json()
        assert (shown["provider_id"], shown["model"], shown["injection_strategy"]) == (
            "scripted",
            "auto",
            "stdin",
        )

        # A model of another provider than the stored pin; a pin no model is
        # served by; a strategy that does not exist: 400, naming what would do.
        elsewhere = http.patch(f"/agents/{agent}", json={"model": "offline-fast"})
        assert elsewhere.status_code == 400, elsewhere.text
        assert (
            "'offline-fast' is served by provider 'offline', not by the pinned provider 'scripted'"
            in (elsewhere.json()["error"]["message"])
        )
        unknown = http.post("/agents", json={"id": stray, "provider_id": "nowhere"})
        assert unknown.status_code == 400, unknown.text
        assert "the providers are: offline, scripted" in unknown.json()["error"]["message"]
        assert http.get(f"/agents/{stray}").status_code == 404
        pipe = http.patch(f"/agents/{agent}", json={"injection_strategy": "pipe"})
        assert pipe.status_code == 400, pipe.text
        refusal = pipe.json()["error"]["message"]
        assert refusal.startswith("injection_strategy:") and all(
            f"'{name}'" in refusal for name in ("unspecified", "convention_file", "flag", "stdin", "env")
        )
        assert http.get(f"/agents/{agent}").json() == shown  # nothing was written

        SCRIPTED.script.requests.clear()
        with http.stream(
            "POST", f"/agents/{agent}/asks", json={"message": "Ready?", "requester": "main"}
        ) as asked:
            final = [e for e in read_events(asked) if e.event in ("final", "error")]
        assert [e.event for e in final] == ["final"], final
        assert (final[0].data["provider"], final[0].data["model"]) == ("scripted", "scripted-markdown")
        (request,) = SCRIPTED.script.requests
        assert request["model"] == "scripted-markdown"
        assert request["messages"][-1] == {"role": "user", "content": "main asks: Ready?"}

        unpinned = http.patch(
            f"/agents/{agent}",
            json={"provider_id": "", "model": "offline-fast", "injection_strategy": "unspecified"},
        )
        assert unpinned.status_code == 200, unpinned.text
        assert (unpinned.json()["provider_id"], unpinned.json()["injection_strategy"]) == ("", "unspecified")


PIN_TEXTS = {
    "en-GB": {
        "injection": "Context injection",
        "stdin": "Standard input",
        "swap": "Provider swap: from offline to scripted",
        "saved": "Saved. Provider swapped",
    },
    "fr-FR": {
        "injection": "Injection du contexte",
        "stdin": "Entrée standard",
        "swap": "Changement de fournisseur : de offline à scripted",
        "saved": "Enregistré. Fournisseur changé",
    },
}


@pytest.mark.parametrize("locale", sorted(PIN_TEXTS))
def test_an_agents_provider_and_context_injection_are_chosen_on_the_page_and_kept(
    browser: Browser, launched: Launched, locale: str
) -> None:
    agent = f"cli-{uuid.uuid4().hex[:6]}"
    created = httpx.post(
        f"{launched.url}/api/agent/agents",
        json={"id": agent, "model": "offline-fast"},
        headers=launched.headers(),
        timeout=30,
    )
    assert created.status_code == 201, created.text
    texts = PIN_TEXTS[locale]
    with web.logged_in(browser, launched, locale=locale, new=False) as page:
        page.locator("nav a[href='#agents']").click()
        page.locator(f"#agent-list li[data-id='{agent}'] button.open-agent").click()
        expect(page.locator("#agent-injection")).to_have_value("unspecified")
        expect(page.locator("#agent-provider")).to_have_value("")
        expect(page.locator("label[for=agent-injection]")).to_have_text(texts["injection"])
        expect(page.locator("#agent-injection option[value=stdin]")).to_have_text(texts["stdin"])
        page.select_option("#agent-injection", "stdin")
        # Pinning another provider puts the old provider's model back to Auto.
        page.select_option("#agent-provider", "scripted")
        expect(page.locator("#agent-model")).to_have_value("auto")
        expect(page.locator("#swap-warning")).to_contain_text(texts["swap"])
        page.locator("#save-agent").click()
        expect(page.locator("#agent-status")).to_contain_text(texts["saved"])
        row = page.locator(f"#agent-list li[data-id='{agent}'] .meta")
        expect(row).to_contain_text(f"{agent} · scripted / auto")
        shot(page, launched, f"agents-provider-pin-{locale}")
        page.reload()
        web.ready(page)
        expect(page.locator("#agent-title")).to_have_text(agent)
        expect(page.locator("#agent-injection")).to_have_value("stdin")
        expect(page.locator("#agent-provider")).to_have_value("scripted")
        expect(page.locator("#agent-model")).to_have_value("auto")
    stored = httpx.get(
        f"{launched.url}/api/agent/agents/{agent}", headers=launched.headers(), timeout=30
    ).json()
    assert (stored["provider_id"], stored["model"], stored["injection_strategy"]) == (
        "scripted",
        "auto",
        "stdin",
    )


@pytest.mark.parametrize(
    ("locale", "badge"), [("en-GB", "remote: Traductrice"), ("fr-FR", "distant : Traductrice")]
)
def test_a_remote_agent_is_marked_with_its_cards_name(
    browser: Browser, launched: Launched, locale: str, badge: str
) -> None:
    remote_id, local_id = f"remote-{uuid.uuid4().hex[:8]}", f"local-{uuid.uuid4().hex[:8]}"
    with (
        serve_agent("Traductrice", {}, streaming=False) as remote,
        launched.client(path="/api/agent") as http,
    ):
        made = http.post("/agents/remote", json={"id": remote_id, "card_url": remote.card_url})
        assert made.status_code == 201, made.text
        assert http.post("/agents", json={"id": local_id}).status_code == 201
        with web.logged_in(browser, launched, locale=locale, new=False) as page:
            page.locator("a[href='#agents']").click()
            expect(page.locator("#view-agents")).to_be_visible()
            marked = page.locator(f'#agent-list li[data-id="{remote_id}"] .badge.remote')
            expect(marked).to_have_text(badge)
            expect(marked).to_have_attribute("title", remote.card_url)
            expect(page.locator(f'#agent-list li[data-id="{local_id}"] .badge.remote')).to_have_count(0)
            shot(page, launched, f"agents-remote-badge-{locale}")
