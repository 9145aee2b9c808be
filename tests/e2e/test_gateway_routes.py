"""The gateway's whole HTTP API against the real processes (launcher, four
services), on SQLite and PostgreSQL: every route as its owner uses it, then
the cross-user matrix — bob calls every route with alice's ids and gets 404
exactly as for an id that does not exist, and no list shows him alice's
objects. What the gateway decides alone (the route table, bodies refused
before any call) is checked in-process: tests/unit/test_gateway_routes.py and
tests/unit/test_gateway_streams.py."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import httpx
import pytest

from services.shared.identity import user_metadata
from switchboard.memory.v1 import (
    pages_service_pb2,
    pages_service_pb2_grpc,
)
from tests.e2e.conftest import Launched, propose_note
from tests.e2e.sse import SseEvent, read_events
from tests.gateway_routes import MATRIX

MISSING = "00000000-0000-4000-8000-000000000000"


@dataclass
class World:
    """Alice's objects, made once per system."""

    conversation: str
    run: str
    skill: str
    page: str
    proposals: list[str]
    note: str
    schedule: str
    project: str
    note_proposal: str


@pytest.fixture(scope="module")
def alice(launched: Launched) -> Iterator[httpx.Client]:
    with launched.client("alice") as client:
        yield client


@pytest.fixture(scope="module")
def bob(launched: Launched) -> Iterator[httpx.Client]:
    with launched.client("bob") as client:
        yield client


def stream(client: httpx.Client, path: str, body: dict[str, Any]) -> list[SseEvent]:
    with client.stream("POST", path, json=body) as response:
        assert response.status_code == 200, response.read()
        return list(read_events(response))


def propose(launched: Launched, page_id: str, body: str) -> str:
    """A proposal for alice's page, as the engine makes one after "remember that"."""
    with grpc.insecure_channel(f"127.0.0.1:{launched.ports['memory']}") as channel:
        response = pages_service_pb2_grpc.PagesServiceStub(channel).CreateProposal(
            pages_service_pb2.CreateProposalRequest(
                request_id=str(uuid.uuid4()), page_id=page_id, proposed_body=body, reason="remember"
            ),
            metadata=user_metadata(launched.user("alice")),
            timeout=10,
        )
    return str(response.proposal.id)


@pytest.fixture(scope="module")
def world(launched: Launched, alice: httpx.Client) -> World:
    created = alice.post("/api/agent/conversations", json={"title": "Alice's supplier thread"})
    conversation = created.json()["id"]
    events = stream(
        alice,
        f"/api/agent/conversations/{conversation}/messages",
        {"message": "Draft a reply to this email from the supplier"},
    )
    final = events[-1].data
    skill = next(e.data["skill_id"] for e in events if e.event == "skill_used")
    page = alice.post("/api/agent/personal-settings/instructions-page", json={}).json()["page"]
    proposals = [
        propose(launched, page["id"], page["body"].rstrip("\n") + f"\n- remember {n}\n") for n in (1, 2)
    ]
    note = alice.post(
        "/api/agent/notes", json={"kind": "decision", "title": "Supplier", "body": "Alice pays the supplier."}
    )
    schedule = alice.post(
        "/api/schedules",
        json={"cron": "0 9 * * MON", "message": "Weekly plan", "conversation_id": conversation},
    )
    # A shared project of alice's (carol is an editor), with its memory.
    project = alice.post("/api/agent/projects", json={"id": "alice-supplies", "display_name": "Supplies"})
    assert project.status_code == 201, project.text
    assert alice.put("/api/agent/projects/alice-supplies/members/carol", json={"role": "editor"}).is_success
    for path, body in (
        ("/api/agent/notes", {"kind": "fact", "title": "Supplier", "body": "The supplier is Acme."}),
        ("/api/agent/project-context", {"body": "Pay suppliers within 30 days."}),
        ("/api/agent/live-state/qa", {"activity": "checking invoices"}),
    ):
        written = alice.request(
            "PUT" if "notes" not in path else "POST", path, params={"project_id": "alice-supplies"}, json=body
        )
        assert written.is_success, written.text
    note_proposal = propose_note(
        launched, "alice-supplies", "Invoices", "Invoices are approved by two people."
    )
    return World(
        conversation,
        final["run_id"],
        skill,
        page["id"],
        proposals,
        note.json()["note"]["id"],
        schedule.json()["id"],
        "alice-supplies",
        note_proposal,
    )


def test_personal_settings_are_per_user(alice: httpx.Client, bob: httpx.Client) -> None:
    defaults = bob.get("/api/agent/personal-settings").json()
    assert (defaults["display_name"], defaults["chat_mode"], defaults["default_model"]) == (
        "",
        "sidebar",
        "auto",
    )
    changed = alice.put(
        "/api/agent/personal-settings",
        json={
            "display_name": "Ally",
            "avatar": {"hat": "beret"},
            "chat_mode": "floating",
            "default_model": "offline-strong",
        },
    )
    assert changed.status_code == 200, changed.text
    again = alice.get("/api/agent/personal-settings").json()
    assert (again["display_name"], again["avatar"], again["chat_mode"], again["default_model"]) == (
        "Ally",
        {"hat": "beret"},
        "floating",
        "offline-strong",
    )
    assert "duplicate the page" in again["instruction_page_notice"]
    unknown = alice.put("/api/agent/personal-settings", json={"default_model": "gpt-9"})
    assert unknown.status_code == 400 and "gpt-9" in unknown.json()["error"]["message"]
    assert bob.get("/api/agent/personal-settings").json() == defaults  # never leaks


def test_instruction_pages_proposals_and_their_diffs(alice: httpx.Client, world: World) -> None:
    pages = alice.get("/api/agent/personal-settings/instruction-pages").json()
    assert pages["active_instruction_page_id"] == world.page
    assert [(p["page_id"], p["state"], p["active"]) for p in pages["pages"]] == [
        (world.page, "readable", True)
    ]
    templates = alice.get("/api/agent/instruction-templates").json()["templates"]
    assert templates and all(t["id"] and t["title"] for t in templates)
    second = alice.post(
        "/api/agent/personal-settings/instructions-page",
        json={"template_id": templates[-1]["id"], "title": "Terse me"},
    ).json()
    assert second["active_instruction_page_id"] == second["page"]["id"]  # a new page becomes active
    switched = alice.put(
        "/api/agent/personal-settings/instructions-page/active", json={"page_id": world.page}
    )
    assert switched.json()["active_instruction_page_id"] == world.page
    assert alice.get(f"/api/agent/pages/{world.page}").json()["version"] == 1

    refused_id, accepted_id = world.proposals
    proposal = alice.get(f"/api/agent/proposals/{refused_id}").json()
    assert proposal["state"] == "pending" and proposal["diff"]["added_lines"] == 1
    assert any(line["kind"] == "added" for hunk in proposal["diff"]["hunks"] for line in hunk["lines"])
    listed = alice.get("/api/agent/proposals", params={"state": "pending"}).json()["proposals"]
    assert {p["id"] for p in listed} >= set(world.proposals)

    refused = alice.post(f"/api/agent/proposals/{refused_id}/refuse", json={"reason": "no"}).json()
    assert refused["proposal"]["state"] == "refused"
    assert alice.get(f"/api/agent/pages/{world.page}").json()["version"] == 1  # nothing written
    accepted = alice.post(f"/api/agent/proposals/{accepted_id}/accept").json()
    assert accepted["proposal"]["state"] == "accepted" and accepted["page"]["version"] == 2
    assert "- remember 2" in alice.get(f"/api/agent/pages/{world.page}").json()["body"]
    versions = alice.get(f"/api/agent/pages/{world.page}/versions").json()["versions"]
    assert [(v["version"], v["proposal_id"]) for v in versions] == [(2, accepted_id), (1, "")]
    # Deciding twice is a conflict with the proposal's state: 409, one error shape.
    twice = alice.post(f"/api/agent/proposals/{accepted_id}/refuse")
    assert twice.status_code == 409
    assert twice.json()["error"]["code"] == "FAILED_PRECONDITION"


def test_models_skills_feedback_and_turning_auto_use_off(
    alice: httpx.Client, bob: httpx.Client, world: World
) -> None:
    models = alice.get("/api/agent/models").json()["models"]
    assert models[0]["id"] == "auto" and models[0]["label"] == "Auto"
    assert {m["id"] for m in models[1:]} == {"offline-fast", "offline-balanced", "offline-strong"}
    assert all({"web_only", "expensive", "web_search", "profile"} <= m.keys() for m in models)

    wrong = alice.post(f"/api/agent/runs/{world.run}/feedback", json={"skill_id": MISSING})
    assert wrong.status_code == 400
    feedback = alice.post(f"/api/agent/runs/{world.run}/feedback", json={"skill_id": world.skill})
    assert feedback.status_code == 201, feedback.text
    data = feedback.json()
    assert data["feedback"]["request_text"] == "Draft a reply to this email from the supplier"
    assert data["offer_disable_auto_use"] is True
    action = data["disable_auto_use"]
    assert action["path"] == f"/api/agent/skills/{world.skill}/enablement"
    off = alice.request(action["method"], action["path"], json=action["body"])
    assert off.status_code == 200 and off.json()["effective_auto_use"] is False

    def auto_use(client: httpx.Client) -> bool:
        skills = client.get("/api/agent/skills").json()["skills"]
        return bool(next(s for s in skills if s["id"] == world.skill)["effective_auto_use"])

    assert auto_use(alice) is False and auto_use(bob) is True  # alice's choice only
    # One skill's definition (what a run's Sources panel links to), by id or
    # name, with its instructions and the caller's own enablement.
    by_id = alice.get(f"/api/agent/skills/{world.skill}").json()
    by_name = bob.get("/api/agent/skills/email-reply-draft").json()
    assert by_id["id"] == by_name["id"] == world.skill and by_id["name"] == "email-reply-draft"
    assert by_id["body"].startswith("Draft a reply to the email") and by_id["body"] == by_name["body"]
    assert (by_id["effective_auto_use"], by_name["effective_auto_use"]) == (False, True)
    missing = alice.get(f"/api/agent/skills/{MISSING}")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "NOT_FOUND"
    again = alice.post(f"/api/agent/runs/{world.run}/feedback", json={"skill_id": world.skill}).json()
    assert again["offer_disable_auto_use"] is False and again["feedback"]["id"] == data["feedback"]["id"]
    alice.put(f"/api/agent/skills/{world.skill}/enablement", json={"auto_use": "inherit"})


def test_runs_of_a_conversation_and_cancel(alice: httpx.Client, world: World) -> None:
    runs = alice.get(f"/api/agent/conversations/{world.conversation}/runs").json()["runs"]
    assert [r["id"] for r in runs] == [world.run] and runs[0]["status"] == "done"
    ended = alice.post(f"/api/agent/runs/{world.run}/cancel")
    assert ended.status_code == 200 and ended.json()["status"] == "done"  # an ended run is unchanged
    gone = alice.get(f"/api/agent/runs/{world.run}/events", headers={"Last-Event-ID": "999"})
    assert gone.status_code == 204


def test_the_sources_a_conversation_can_allow(alice: httpx.Client, world: World) -> None:
    sources = alice.get("/api/agent/sources", params={"conversation_id": world.conversation}).json()
    assert sources["workspace"] == {
        "kind": "workspace",
        "name": "workspace",
        "title": "Workspace",
        "checked": True,
    }
    # The engine's connector (every launch switches the test mailbox on), not yet allowed.
    assert sources["connectors"] == [
        {"kind": "connector", "name": "testmail", "title": "Test mail", "checked": False}
    ]
    assert sources["mcp_servers"] == []


def test_a_conversations_sources_are_set(alice: httpx.Client, world: World) -> None:
    body = {"workspace": False, "connectors": ["mail"], "mcp_servers": []}
    response = alice.put(f"/api/agent/conversations/{world.conversation}/sources", json=body)
    assert response.status_code == 200, response.text
    # Memory was not named: it keeps its value, never set, so absent (on).
    assert response.json()["allowed_sources"] == body


def test_a_sources_save_keeps_what_it_does_not_name(alice: httpx.Client, world: World) -> None:
    path = f"/api/agent/conversations/{world.conversation}/sources"
    assert alice.put(path, json={"memory": False}).json()["allowed_sources"]["memory"] is False
    saved = alice.put(path, json={"workspace": True, "connectors": ["mail"]})
    assert saved.status_code == 200, saved.text
    assert saved.json()["allowed_sources"] == {
        "workspace": True,
        "connectors": ["mail"],
        "mcp_servers": [],
        "memory": False,
    }
    empty = alice.put(path, json={})
    assert empty.status_code == 400 and "nothing to update" in empty.json()["error"]["message"]
    assert alice.put(path, json={"memory": True, "connectors": []}).status_code == 200


@pytest.mark.parametrize(
    ("message", "context"),
    [
        (
            "Résume la sélection.",
            {
                "page": {"id": "cr-7", "title": "Compte rendu « produit »", "type": "meeting_notes"},
                "selections": [{"text": "Livraison mardi, sans faute.", "block_id": "b2"}],
            },
        ),
        (
            "Shorten the selected text.",
            {"selections": [{"text": "The deploy moves to Tuesday.", "block_id": ""}]},
        ),
    ],
)
def test_a_message_carries_its_context_into_the_run_record(
    alice: httpx.Client, message: str, context: dict[str, Any]
) -> None:
    conversation = alice.post("/api/agent/conversations", json={"title": "Context"}).json()["id"]
    path = f"/api/agent/conversations/{conversation}/messages"
    events = stream(alice, path, {"message": message, "context": context})
    run = alice.get(f"/api/agent/runs/{events[-1].data['run_id']}").json()
    assert run["context"] == {"regime": "user", **context}
    layer = {layer["key"]: layer for layer in run["layers"]}["run_context"]
    assert layer["present"] and layer["item_count"] == 1
    # The message is the user's words alone.
    entries = alice.get(f"/api/agent/conversations/{conversation}/entries").json()["entries"]
    assert [e["content"] for e in entries if e["role"] == "user"] == [message]
    # Beyond its limits: 400 naming the field, and no run.
    for bad, field in [
        ({"selections": [{"text": "x" * 4001}]}, "context.selections.0.text"),
        ({"selections": [{"text": "   "}]}, "context.selections.0.text"),
        ({"page": {"id": "p1", "type": "Meeting Notes"}}, "context.page.type"),
        ({"selections": [{"text": "x"}] * 11}, "context.selections"),
        ({"regime": "autonomous"}, "context.regime"),
    ]:
        refused = alice.post(path, json={"message": message, "context": bad})
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["details"][0]["field"] == field, refused.text
    assert len(alice.get(f"/api/agent/conversations/{conversation}/runs").json()["runs"]) == 1


def test_agents_asks_and_thread_views(alice: httpx.Client) -> None:
    created = alice.post(
        "/api/agent/agents", json={"id": "qa-e2e", "display_name": "QA", "persona": "Tester"}
    )
    assert created.status_code == 201, created.text
    assert alice.get("/api/agent/agents/qa-e2e").json()["display_name"] == "QA"
    assert "qa-e2e" in {a["id"] for a in alice.get("/api/agent/agents").json()["agents"]}
    events = stream(
        alice, "/api/agent/agents/qa-e2e/asks", {"message": "Is the release ready?", "requester": "architect"}
    )
    assert events[0].event == "run_started" and events[-1].event == "final"
    whole = alice.get("/api/agent/agents/qa-e2e/entries").json()
    assert whole["partial_view"] is False and len(whole["entries"]) >= 2
    # The architect alone has asked: its pair view is the whole thread.
    pair = alice.get("/api/agent/agents/qa-e2e/entries", params={"requester": "architect"}).json()
    assert pair["partial_view"] is False
    stream(alice, "/api/agent/agents/qa-e2e/asks", {"message": "Et la recette ?", "requester": "dev"})
    pair = alice.get("/api/agent/agents/qa-e2e/entries", params={"requester": "architect"}).json()
    assert pair["partial_view"] is True and {e["requester"] for e in pair["entries"]} <= {
        "architect",
        "qa-e2e",
    }
    correlation = whole["entries"][0]["correlation_id"]
    one = alice.get("/api/agent/agents/qa-e2e/entries", params={"correlation_id": correlation}).json()
    assert one["entries"] and all(e["correlation_id"] == correlation for e in one["entries"])


def test_an_agent_is_renamed_its_model_changed_and_its_thread_exported_and_imported(
    alice: httpx.Client,
) -> None:
    alice.post("/api/agent/agents", json={"id": "ops-e2e", "display_name": "Ops"})
    assert alice.get("/api/agent/agents/ops-e2e/segments").json()["segments"] == []  # no thread yet
    renamed = alice.patch("/api/agent/agents/ops-e2e", json={"display_name": "Operations", "model": "auto"})
    assert renamed.status_code == 200, renamed.text
    assert renamed.json()["display_name"] == "Operations" and renamed.json()["model"] == "auto"
    assert alice.patch("/api/agent/agents/nobody-e2e", json={"model": "auto"}).status_code == 404
    stream(alice, "/api/agent/agents/ops-e2e/asks", {"message": "Is the pager quiet?", "requester": "qa"})

    segments = alice.get("/api/agent/agents/ops-e2e/segments").json()
    assert [s["state"] for s in segments["segments"]] == ["open"]
    assert segments["segments"][0]["entry_count"] == 2
    exported = alice.get("/api/agent/agents/ops-e2e/export").json()
    paths = {f["path"] for f in exported["files"]}
    assert "agents/ops-e2e/log.jsonl" in paths
    # Into another install: the same files under a new agent and thread id.
    thread_id = segments["thread_id"]
    files = [
        {
            "path": f["path"].replace("ops-e2e", "ops-copy-e2e"),
            "content": f["content"].replace("ops-e2e", "ops-copy-e2e").replace(thread_id, str(uuid.uuid4())),
        }
        for f in exported["files"]
    ]
    imported = alice.post("/api/agent/agents/import", json={"files": files})
    assert imported.status_code == 201, imported.text
    assert imported.json()["thread"]["agent_id"] == "ops-copy-e2e"
    copy = alice.get("/api/agent/agents/ops-copy-e2e/entries").json()["entries"]
    assert [e["content"] for e in copy][0] == "Is the pager quiet?"
    # Again: the agent has a thread with entries now, nothing is written.
    assert alice.post("/api/agent/agents/import", json={"files": files}).status_code == 409
    assert (
        alice.post("/api/agent/agents/import", json={"files": [{"path": "x", "content": ""}]}).status_code
        == 400
    )


def test_project_context_import_and_live_state_watched_as_sse(alice: httpx.Client, bob: httpx.Client) -> None:
    put = alice.put("/api/agent/project-context", json={"body": "# Rules\n- tests before merge\n"})
    assert put.status_code == 200 and put.json()["body"].startswith("# Rules")
    assert alice.get("/api/agent/project-context").json()["body"].strip() == "# Rules\n- tests before merge"
    items = alice.post(
        "/api/agent/project-context/import",
        json={
            "files": [
                {"path": ".ideai/CONTEXT.md", "content": "# Imported rules\n"},
                {"path": ".ideai/memory/release.md", "content": "# Release\nShip on Tuesdays.\n"},
                {"path": "src/main.py", "content": "print()"},
            ]
        },
    ).json()["items"]
    assert [i["outcome"] for i in items][2] == "skipped"
    assert alice.get("/api/agent/project-context").json()["body"].strip() == "# Imported rules"

    with alice.stream("GET", "/api/agent/live-state/events") as response:
        assert response.status_code == 200
        events = read_events(response)
        first = next(events)
        assert first.event == "snapshot"
        set_ = alice.put("/api/agent/live-state/qa", json={"activity": "testing", "ttl_seconds": 1})
        assert set_.status_code == 200 and set_.json()["expire_time"]
        changed = next(events)
        assert changed.event == "set" and changed.data["entries"][0]["activity"] == "testing"
        expired = next(events)
        assert expired.event == "removed" and expired.data["removal"] == "expired"
    alice.put("/api/agent/live-state/main", json={"activity": "reviewing", "detail": "PR 12"})
    assert [e["agent_id"] for e in alice.get("/api/agent/live-state").json()["entries"]] == ["main"]
    assert bob.get("/api/agent/live-state").json()["entries"] == []  # each user's own project
    assert alice.delete("/api/agent/live-state/main").status_code == 204
    assert alice.get("/api/agent/live-state").json()["entries"] == []


def test_an_instruction_page_is_edited_into_versions_and_restored(alice: httpx.Client) -> None:
    response = alice.post("/api/agent/personal-settings/instructions-page", json={"title": "Tone"})
    created = response.json()["page"]
    created["version"] = int(created["version"])  # int64: a string in this route's proto JSON
    assert created["id"] in {p["id"] for p in alice.get("/api/agent/pages").json()["pages"]}
    edited = alice.patch(
        f"/api/agent/pages/{created['id']}",
        json={"body": "- Be brief.\n", "expected_version": created["version"]},
    )
    assert edited.status_code == 200, edited.text
    assert edited.json()["version"] == created["version"] + 1 and edited.json()["body"] == "- Be brief.\n"
    # An edit from the old version: someone saved in between, nothing is written.
    stale = alice.patch(
        f"/api/agent/pages/{created['id']}",
        json={"body": "- Be long.\n", "expected_version": created["version"]},
    )
    assert stale.status_code == 409, stale.text
    restored = alice.post(f"/api/agent/pages/{created['id']}/versions/{created['version']}/restore", json={})
    assert restored.status_code == 200, restored.text
    assert restored.json()["body"] == created["body"] and restored.json()["version"] == created["version"] + 2
    versions = alice.get(f"/api/agent/pages/{created['id']}/versions").json()["versions"]
    assert [v["version"] for v in versions][:3] == [created["version"] + n for n in (2, 1, 0)]
    assert versions[0]["restored_from_version"] == created["version"]


def test_note_proposals_are_listed_read_and_decided(
    launched: Launched, alice: httpx.Client, world: World
) -> None:
    pending = alice.get(
        "/api/agent/note-proposals", params={"project_id": world.project, "state": "pending"}
    ).json()["proposals"]
    assert world.note_proposal in {p["id"] for p in pending}
    assert world.note_proposal not in {
        p["id"] for p in alice.get("/api/agent/note-proposals").json()["proposals"]
    }  # not in the personal project
    one = alice.get(f"/api/agent/note-proposals/{world.note_proposal}").json()
    assert (one["state"], one["note"]["kind"], one["note"]["author_agent_id"]) == (
        "pending",
        "decision",
        "qa",
    )
    assert one["target_note"] is None and one["diff"]["added_lines"] >= 1
    assert one["proposer_user_id"] == launched.user("alice")

    # The project's note in other case and punctuation: the proposal updates it.
    update = propose_note(launched, world.project, "Supplier", "the supplier is ACME!")
    proposal = alice.get(f"/api/agent/note-proposals/{update}").json()
    target = proposal["target_note"]
    assert target["title"] == "Supplier" and target["kind"] == "fact" and proposal["match_reason"]
    assert [line["kind"] for hunk in proposal["diff"]["hunks"] for line in hunk["lines"]].count("added") == 1
    accepted = alice.post(f"/api/agent/note-proposals/{update}/accept")
    assert accepted.status_code == 200, accepted.text
    decided = accepted.json()
    assert decided["proposal"]["state"] == "accepted"
    assert decided["proposal"]["decided_by_user_id"] == launched.user("alice")
    assert decided["note"]["id"] == target["id"] == decided["proposal"]["result_note_id"]
    assert decided["note"]["body"] == "the supplier is ACME!"
    # Deciding twice is a conflict with the proposal's state: 409.
    twice = alice.post(f"/api/agent/note-proposals/{update}/refuse")
    assert twice.status_code == 409 and twice.json()["error"]["code"] == "FAILED_PRECONDITION"

    refused_id = propose_note(launched, world.project, "Parking", "Visitors park behind building B.")
    refused = alice.post(f"/api/agent/note-proposals/{refused_id}/refuse").json()
    assert refused["proposal"]["state"] == "refused" and "note" not in refused
    listed = alice.get(
        "/api/agent/note-proposals", params={"project_id": world.project, "state": "refused"}
    ).json()["proposals"]
    assert [p["id"] for p in listed] == [refused_id]
    notes = alice.get("/api/agent/notes", params={"project_id": world.project}).json()["notes"]
    assert "Parking" not in {n["title"] for n in notes}


def test_notes_are_written_searched_edited_and_deleted(alice: httpx.Client) -> None:
    saved = alice.post(
        "/api/agent/notes",
        json={"kind": "decision", "title": "Deploy day", "body": "We deploy on Tuesdays.", "tags": ["ops"]},
    )
    assert saved.status_code == 201, saved.text
    note = saved.json()["note"]
    assert saved.json()["outcome"] == "created" and note["kind"] == "decision"
    assert note["id"] in {n["id"] for n in alice.get("/api/agent/notes").json()["notes"]}
    found = alice.get("/api/agent/notes", params={"q": "when do we deploy"}).json()["notes"]
    assert found and found[0]["id"] == note["id"] and found[0]["score"] > 0
    edited = alice.patch(f"/api/agent/notes/{note['id']}", json={"body": "We deploy on Wednesdays."})
    assert edited.status_code == 200 and alice.get(f"/api/agent/notes/{note['id']}").json()[
        "body"
    ].startswith("We deploy on Wednesdays")
    assert alice.delete(f"/api/agent/notes/{note['id']}").status_code == 204
    assert alice.get(f"/api/agent/notes/{note['id']}").status_code == 404


def test_the_launchers_development_token_is_accepted(launched: Launched) -> None:
    ready = json.loads((launched.log.parent / "ready.json").read_text())
    token = ready["dev_token"]
    assert token and token in launched.log.read_text()  # printed once, at start-up
    response = httpx.get(
        f"{launched.url}/api/agent/personal-settings", headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 200 and response.json()["user_id"] == "local"
    # The laptop's one person administers it: the development token is an admin's.
    me = httpx.get(f"{launched.url}/api/agent/me", headers={"Authorization": f"Bearer {token}"})
    assert me.json() == {"user": "local", "role": "admin"}


def fill(template: Any, ids: dict[str, str]) -> Any:
    if isinstance(template, str):
        return template.format(**ids)
    if isinstance(template, dict):
        return {k: fill(v, ids) for k, v in template.items()}
    return template


@pytest.mark.parametrize("row", MATRIX, ids=[f"{row[0]} {row[1]}" for row in MATRIX])
def test_bob_gets_404_with_alices_ids_exactly_as_for_missing_ones(
    bob: httpx.Client, world: World, row: tuple[Any, ...]
) -> None:
    method, path, body, status = (*row, 404)[:4]
    alices = {
        "c": world.conversation,
        "r": world.run,
        "s": world.skill,
        "p": world.page,
        "q": world.proposals[0],
        "n": world.note,
        "v": "1",
        "h": world.schedule,
        "j": world.project,
        "u": "alice",
        "o": world.note_proposal,
    }
    missing = {key: MISSING for key in alices} | {"s": world.skill, "v": "1", "u": "alice"}
    theirs = bob.request(method, fill(path, alices), json=fill(body, alices))
    nobody = bob.request(method, fill(path, missing), json=fill(body, missing))
    assert theirs.status_code == nobody.status_code == status, (theirs.text, nobody.text)
    shape = theirs.json()["error"]
    assert (
        shape["code"]
        == nobody.json()["error"]["code"]
        == ("NOT_FOUND" if status == 404 else "FAILED_PRECONDITION")
    )
    assert shape["reason"] == nobody.json()["error"]["reason"]
    # The message names the id asked for, nothing of alice's object.
    assert shape["message"].replace(world.conversation, "ID").replace(world.run, "ID").replace(
        world.page, "ID"
    ).replace(world.proposals[0], "ID").replace(world.note, "ID").replace(world.schedule, "ID").replace(
        world.project, "ID"
    ).replace(world.note_proposal, "ID") == nobody.json()["error"]["message"].replace(MISSING, "ID")


def test_bobs_lists_never_show_alices_objects(bob: httpx.Client, alice: httpx.Client, world: World) -> None:
    conversations = bob.get("/api/agent/conversations", params={"include_archived": True}).json()
    assert world.conversation not in {c["id"] for c in conversations["conversations"]}
    found = bob.get("/api/agent/conversations", params={"q": "supplier"}).json()["conversations"]
    assert found == []
    assert bob.get("/api/agent/proposals").json()["proposals"] == []
    assert bob.get("/api/agent/proposals", params={"page_id": world.page}).json()["proposals"] == []
    assert world.note not in {n["id"] for n in bob.get("/api/agent/notes").json()["notes"]}
    assert world.note not in {
        n["id"] for n in bob.get("/api/agent/notes", params={"q": "supplier"}).json()["notes"]
    }
    assert world.page not in {p["id"] for p in bob.get("/api/agent/pages").json()["pages"]}
    pages = bob.get("/api/agent/personal-settings/instruction-pages").json()
    assert pages["pages"] == [] and pages["active_instruction_page_id"] == ""
    # Alice's state is untouched by bob's attempts.
    assert (
        alice.get(f"/api/agent/conversations/{world.conversation}").json()["title"]
        == "Alice's supplier thread"
    )
    assert alice.get(f"/api/agent/proposals/{world.proposals[1]}").status_code == 200
    assert world.schedule not in {s["id"] for s in bob.get("/api/schedules").json()["schedules"]}
    assert alice.get(f"/api/schedules/{world.schedule}").json()["paused"] is False


def test_a_huge_id_in_a_path_is_refused_cleanly(alice: httpx.Client, launched: Launched) -> None:
    """A 5,000-character id is refused at the edge, before any service (whose
    refusal quoting it would overflow gRPC's trailers), never a 500."""
    huge = "x" * 5000
    asked = alice.post(f"/api/agent/agents/{huge}/asks", json={"message": "Bonjour ?", "requester": "dev"})
    assert asked.status_code == 400, asked.text[:300]
    assert asked.json()["error"]["code"] == "INVALID_ARGUMENT"
    assert asked.json()["error"]["message"].startswith("path.agent_id"), asked.text[:300]
    got = alice.get(f"/api/agent/agents/{huge}")
    assert got.status_code == 400, got.text[:300]
    assert "Traceback" not in launched.log.read_text()


# Roles: every write route gated by a role or by agent ownership, and every
# member-only read. Each row is called by bob (a user, not the agent's
# member) and then by root (an admin): (method, path, body, bob's status,
# root's status). {a} is alice's agent, {s} a skill root created, {u} a user.
# Rows run in order: the admin's deletes come last.
ROLE_MATRIX: list[tuple[str, str, Any, int, int]] = [
    ("POST", "/api/agent/skills", {"name": "{n}", "body": "Summarise the release."}, 403, 201),
    ("PATCH", "/api/agent/skills/{s}", {"description": "release notes"}, 403, 200),
    ("PATCH", "/api/agent/agents/{a}", {"display_name": "Renamed"}, 403, 200),
    ("PUT", "/api/agent/agents/{a}/members/{u}", None, 403, 200),
    ("DELETE", "/api/agent/agents/{a}/members/{u}", None, 403, 200),
    ("GET", "/api/agent/agents/{a}/members", None, 403, 200),
    ("GET", "/api/agent/agents/{a}/entries", None, 403, 403),
    ("GET", "/api/agent/agents/{a}/segments", None, 403, 403),
    ("GET", "/api/agent/agents/{a}/export", None, 403, 403),
    ("POST", "/api/agent/agents/{a}/asks", {"message": "Status?", "requester": "dev"}, 403, 403),
    ("GET", "/api/audit", None, 403, 200),
    ("DELETE", "/api/agent/skills/{s}", None, 403, 204),
]


@pytest.fixture(scope="module")
def root(launched: Launched) -> Iterator[httpx.Client]:
    with launched.client("root") as client:
        yield client


def test_role_matrix_users_get_403_with_the_reason_and_admins_are_served(
    launched: Launched, alice: httpx.Client, bob: httpx.Client, root: httpx.Client
) -> None:
    agent = f"roles-{uuid.uuid4().hex[:8]}"
    assert alice.post("/api/agent/agents", json={"id": agent}).json()["owner"] == launched.user("alice")
    assert bob.get("/api/agent/me").json() == {"user": launched.user("bob"), "role": "user"}
    assert root.get("/api/agent/me").json() == {"user": launched.user("root"), "role": "admin"}
    name = f"role-skill-{uuid.uuid4().hex[:8]}"
    made = root.post("/api/agent/skills", json={"name": name + "-0", "body": "Made first."})
    assert made.status_code == 201, made.text
    ids = {"a": agent, "s": made.json()["id"], "u": "carol-roles", "n": name}
    for method, path, body, as_user, as_admin in ROLE_MATRIX:
        refused = bob.request(method, fill(path, ids), json=fill(body, ids))
        assert refused.status_code == as_user, (method, path, refused.text)
        error = refused.json()["error"]
        assert (error["code"], error["reason"]) == ("PERMISSION_DENIED", "ERROR_REASON_PERMISSION_DENIED")
        assert error["message"], (method, path)
        served = root.request(method, fill(path, ids), json=fill(body, ids))
        assert served.status_code == as_admin, (method, path, served.text)
    # The owner is served where bob was refused, and bob once added.
    assert alice.get(f"/api/agent/agents/{agent}/entries").status_code == 200
    assert alice.put(f"/api/agent/agents/{agent}/members/{launched.user('bob')}").status_code == 200
    assert bob.get(f"/api/agent/agents/{agent}/entries").status_code == 200
    assert bob.put(f"/api/agent/agents/{agent}/members/x-roles").status_code == 403  # a member, not owner
    # The admin's actions are in the audit log, newest first, with who, what and when.
    events = root.get("/api/audit", params={"page_size": 500}).json()["events"]
    mine = [(e["action"], e["target"]) for e in events if e["actor"] == launched.user("root")]
    assert mine[:6] == [
        ("skill.delete", ids["s"]),
        ("agent.member_remove", agent),
        ("agent.member_add", agent),
        ("agent.update", agent),
        ("skill.update", ids["s"]),
        ("skill.create", next(e["target"] for e in events if e["detail"] == f"name={name}")),
    ]
    assert all(
        e["actor_role"] == "admin" and e["create_time"] for e in events if e["actor"] == launched.user("root")
    )


def test_the_audit_log_pages_by_keyset_without_repeats(root: httpx.Client, bob: httpx.Client) -> None:
    for _ in range(3):
        root.post("/api/agent/skills", json={"name": f"audit-page-{uuid.uuid4().hex[:8]}", "body": "b"})
    seen: list[str] = []
    token = ""
    for _ in range(100):
        page = root.get("/api/audit", params={"page_size": 2, "page_token": token}).json()
        seen += [e["id"] for e in page["events"]]
        token = page["next_page_token"]
        if not token:
            break
    assert len(seen) == len(set(seen)) >= 3
    times = [e["create_time"] for e in root.get("/api/audit", params={"page_size": 500}).json()["events"]]
    assert times == sorted(times, reverse=True)
    bad = root.get("/api/audit", params={"page_token": "%%%"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "INVALID_ARGUMENT"
    assert (
        bob.get("/api/audit", params={"page_token": "AAAA"}).status_code == 403
    )  # the function, not the token
