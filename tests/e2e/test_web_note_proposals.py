"""Note proposals in the browser, against the real processes: the notes an
agent proposes for a project's memory (made here with MemoryService's
ProposeNote over gRPC, as a run's tool makes them) show in the Memory view
with the agent, the reason, the note they would update and their diff; an
owner accepts one (the note appears in the project's notes, or the note it
targets is updated) and refuses another (it disappears, nothing is
written), in English and in French; accepting one whose target note changed
since shows the server's reason and leaves it pending; a viewer reads them
but gets no buttons. A chat run whose model saves a note nobody asked for
(the recording real-wire provider's scripted tool call) says so in the
chat, with a link to the Memory view where the proposal waits."""

from __future__ import annotations

import json
import uuid

import grpc
from playwright.sync_api import Browser, Page, expect

from services.shared.identity import user_metadata
from switchboard.memory.v1 import memory_pb2, memory_service_pb2, memory_service_pb2_grpc
from tests.e2e import web
from tests.e2e.conftest import Launched, recording_env, shared_recording
from tests.e2e.test_web_projects import api, create_project, open_memory
from tests.e2e.web import assert_accessible, logged_in, send, shot

browser = web.browser
# The model a chat run uses here to save a note unasked (tests/e2e/test_projects.py shares it).
RECORDING = shared_recording()
LAUNCH_ENV = recording_env(f"{RECORDING.url}/v1")


def propose(
    launched: Launched, project_id: str, title: str, body: str, reason: str, agent: str = "qa"
) -> str:
    """A pending proposal in alice's project, as a run's tool makes one."""
    with grpc.insecure_channel(f"127.0.0.1:{launched.ports['memory']}") as channel:
        response = memory_service_pb2_grpc.MemoryServiceStub(channel).ProposeNote(
            memory_service_pb2.ProposeNoteRequest(
                request_id=str(uuid.uuid4()),
                note=memory_pb2.Note(
                    project_id=project_id,
                    kind=memory_pb2.NOTE_KIND_DECISION,
                    title=title,
                    body=body,
                    author_agent_id=agent,
                ),
                reason=reason,
                run_id="",
            ),
            metadata=user_metadata(launched.user("alice")),
            timeout=10,
        )
    assert response.proposal.state == memory_pb2.NOTE_PROPOSAL_STATE_PENDING, response
    return str(response.proposal.id)


def write_note(launched: Launched, project_id: str, title: str, body: str) -> str:
    written = api(
        launched,
        "POST",
        f"/notes?project_id={project_id}",
        body={"kind": "fact", "title": title, "body": body},
    )
    assert written.status_code == 201, written.text
    return str(written.json()["note"]["id"])


def in_project(page: Page, project_id: str) -> None:
    """The Memory view of ``project_id``, chosen in the switcher."""
    page.select_option("#project", project_id)
    open_memory(page)
    expect(page.locator("#note-proposals-label")).not_to_have_text("")


def state_of(launched: Launched, proposal_id: str) -> str:
    read = api(launched, "GET", "/note-proposals/" + proposal_id)
    assert read.status_code == 200, read.text
    return str(read.json()["state"])


def test_an_owner_reviews_accepts_and_refuses_proposals(browser: Browser, launched: Launched) -> None:
    project_id, _ = create_project(launched)
    release = write_note(launched, project_id, "Release day", "We release on Fridays.")
    window = propose(
        launched,
        project_id,
        "Deploy window",
        "Deploys happen between 9:00 and 11:00.",
        "agreed in this morning's stand-up",
    )
    lunch = propose(launched, project_id, "Lunch", "The team eats at noon.", "said in passing", agent="")
    # The same words as the release note but for case and punctuation: it targets that note.
    update = propose(launched, project_id, "Release day", "We release on fridays!", "the user's spelling")

    with logged_in(browser, launched, new=False) as page:
        in_project(page, project_id)
        items = page.locator("#note-proposals li.note-proposal")
        expect(items).to_have_count(3)
        expect(page.locator("#note-proposals-label")).to_have_text(
            "3 proposals waiting for review, newest first."
        )
        new = page.locator(f"li[data-id='{window}']")
        expect(new).to_contain_text("Deploy window")
        expect(new).to_contain_text(f"Proposed by qa in a run of {launched.user('alice')}")
        expect(new).to_contain_text("Why: agreed in this morning's stand-up")
        expect(new.locator(".target")).to_have_text("Adds a new note.")
        expect(
            new.locator(".diff .added").filter(has_text="Deploys happen between 9:00 and 11:00.")
        ).to_have_text("+ Deploys happen between 9:00 and 11:00.")
        expect(new.locator(".diff .removed")).to_have_count(0)
        anonymous = page.locator(f"li[data-id='{lunch}']")
        expect(anonymous).to_contain_text(f"Proposed in a run of {launched.user('alice')}")

        updating = page.locator(f"li[data-id='{update}']")
        link = updating.get_by_role("link", name='Updates note "Release day"')
        expect(link).to_have_attribute("href", f"#memory/{release}")
        expect(updating.locator(".target")).to_contain_text("identical text")
        expect(updating.locator(".diff .removed")).to_have_text("- We release on Fridays.")
        expect(updating.locator(".diff .added")).to_have_text("+ We release on fridays!")
        shot(page, launched, "note-proposals")
        assert_accessible(page, "the Memory view with note proposals")

        # The target's link opens that note in the project's list.
        link.click()
        expect(page.locator(f"#notes li.note.highlight[data-id='{release}']")).to_have_count(1)
        expect(updating.locator(".diff .added")).to_have_text("+ We release on fridays!")

        # Accepted: the note is in the project's memory and the proposal leaves the list.
        new.get_by_role("button", name='Accept the proposal "Deploy window"').click()
        expect(page.locator("#note-proposals-status")).to_have_text(
            'Accepted: "Deploy window" is now a note of this project.'
        )
        expect(page.locator(f"li[data-id='{window}']")).to_have_count(0)
        expect(page.locator("#notes li.note").filter(has_text="Deploy window")).to_have_count(1)
        expect(page.locator("#note-proposals-title")).to_be_focused()
        assert state_of(launched, window) == "accepted"

        # Refused: it leaves the list and nothing is written.
        anonymous.get_by_role("button", name="Refuse").click()
        expect(page.locator("#note-proposals-status")).to_have_text('Refused: "Lunch" was not written.')
        expect(page.locator(f"li[data-id='{lunch}']")).to_have_count(0)
        expect(page.locator("#notes")).not_to_contain_text("Lunch")
        assert state_of(launched, lunch) == "refused"

        # Accepting an update rewrites the note it targets: still one "Release day".
        updating.get_by_role("button", name="Accept").click()
        expect(page.locator(f"li[data-id='{update}']")).to_have_count(0)
        notes = page.locator("#notes li.note").filter(has_text="Release day")
        expect(notes).to_have_count(1)
        expect(notes).to_contain_text("We release on fridays!")
        expect(page.locator("#note-proposals li.empty")).to_have_text("No proposals waiting for review.")


def test_in_french_and_a_stale_target_keeps_the_proposal_pending(
    browser: Browser, launched: Launched
) -> None:
    project_id, _ = create_project(launched)
    database = write_note(launched, project_id, "Base de données", "Le service tourne sur PostgreSQL 15.")
    tests = propose(
        launched,
        project_id,
        "Tests",
        "Chaque modification arrive avec son test.",
        "décidé en revue de code",
    )
    stale = propose(
        launched, project_id, "Base de données", "le service tourne sur postgresql 15 !", "orthographe"
    )

    with logged_in(browser, launched, locale="fr-FR", new=False) as page:
        in_project(page, project_id)
        expect(page.locator("#note-proposals-title")).to_have_text("Propositions")
        expect(page.locator("#note-proposals-label")).to_have_text(
            "2 propositions en attente de relecture, les plus récentes d'abord."
        )
        fresh = page.locator(f"li[data-id='{tests}']")
        expect(fresh).to_contain_text("Pourquoi : décidé en revue de code")
        expect(fresh).to_contain_text(f"Proposée par qa dans une exécution de {launched.user('alice')}")
        expect(fresh.locator(".target")).to_have_text("Ajoute une nouvelle note.")
        expect(fresh.locator(".badge")).to_have_text("Décision")
        updating = page.locator(f"li[data-id='{stale}']")
        expect(updating.get_by_role("link", name="Met à jour la note « Base de données »")).to_be_visible()
        assert_accessible(page, "la vue Mémoire avec des propositions")

        fresh.get_by_role("button", name="Accepter").click()
        expect(page.locator("#note-proposals-status")).to_have_text(
            "Acceptée : « Tests » est maintenant une note de ce projet."
        )
        expect(
            page.locator("#notes li.note").filter(has_text="Chaque modification arrive avec son test.")
        ).to_have_count(1)

        # The target note changes after the proposal was made: accepting it is
        # refused with the server's reason, and it stays pending.
        edited = api(
            launched, "PATCH", f"/notes/{database}", body={"body": "Le service tourne sur PostgreSQL 17."}
        )
        assert edited.status_code == 200, edited.text
        updating.get_by_role("button", name="Accepter").click()
        expect(page.locator("#note-proposals-status")).to_contain_text("changed or went since this proposal")
        expect(updating.get_by_role("button", name="Accepter")).to_be_enabled()
        assert state_of(launched, stale) == "pending"

        updating.get_by_role("button", name="Refuser").click()
        expect(page.locator("#note-proposals-status")).to_have_text(
            "Refusée : « Base de données » n'a pas été écrite."
        )
        expect(page.locator(f"li[data-id='{stale}']")).to_have_count(0)
        expect(page.locator("#note-proposals li.empty")).to_have_text(
            "Aucune proposition en attente de relecture."
        )
        assert state_of(launched, stale) == "refused"
        kept = page.locator(f"#notes li.note[data-id='{database}']")
        expect(kept).to_contain_text("PostgreSQL 17")


def test_a_viewer_reads_proposals_without_buttons(browser: Browser, launched: Launched) -> None:
    project_id, _ = create_project(launched)
    bob = launched.user("bob")
    added = api(launched, "PUT", f"/projects/{project_id}/members/{bob}", body={"role": "viewer"})
    assert added.status_code == 200, added.text
    proposal = propose(
        launched, project_id, "Support hours", "Support answers from 8:00 to 18:00.", "the contract"
    )

    with logged_in(browser, launched, user="bob", new=False) as page:
        in_project(page, project_id)
        item = page.locator(f"li[data-id='{proposal}']")
        expect(item).to_contain_text("Support hours")
        expect(item.locator(".diff .added").first).to_have_text("+ # Support hours")
        expect(item.get_by_role("button")).to_have_count(0)
        expect(page.locator("#view-memory [data-read-only-hint]")).to_be_visible()
        assert_accessible(page, "a viewer's Memory view with a note proposal")

    # The API refuses what the page does not offer: 403 with the reason.
    refused = api(launched, "POST", f"/note-proposals/{proposal}/accept", user="bob")
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "PERMISSION_DENIED" and refused.json()["error"]["message"]
    assert state_of(launched, proposal) == "pending"


def test_a_chat_run_that_proposes_a_note_says_where_to_review_it(
    browser: Browser, launched: Launched
) -> None:
    project_id, _ = create_project(launched)
    note = {"kind": "decision", "title": "Deploys", "body": "no deploys on Friday", "reason": "lasting"}
    # The page asks for its language: the engine's own words, in English or French.
    for locale, sentence in (
        ("en-GB", "awaits review: Deploys"),
        ("fr-FR", "attend une relecture : Deploys"),
    ):
        RECORDING.script.steps = [f"tool:save_note:{json.dumps(note)}", "say:Noted."]
        with logged_in(browser, launched, locale=locale) as page:
            page.select_option("#project", project_id)
            page.select_option("#model", "recorded")
            run = send(page, "We agreed: no deploys on Friday.")
            notice = run.locator(".notice[data-code='NOTE_PROPOSED']")
            expect(notice).to_contain_text(sentence)
            review = notice.get_by_role("link")
            expect(review).to_have_text("Review" if locale == "en-GB" else "Examiner")
            review.click()
            expect(page.locator("#view-memory")).to_be_visible()
            waiting = page.locator("#note-proposals li.note-proposal").filter(has_text="no deploys on Friday")
            expect(waiting.first).to_contain_text("no deploys on Friday")
            expect(waiting.first.locator(".diff .added").last).to_have_text("+ no deploys on Friday")
    pending = api(launched, "GET", f"/note-proposals?project_id={project_id}&state=pending")
    assert [p["note"]["title"] for p in pending.json()["proposals"]] == ["Deploys", "Deploys"]
