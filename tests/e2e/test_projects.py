"""Projects over HTTP against the launched system, with a recording
real-wire provider: two people share a project and its agent; the agent
promotes a decision as a note proposal, the owner accepts it, and the other
member's next ask sends it to the model. A non-member gets 404 on every
project route, and a viewer's write is 403 with its reason. In English and
in French."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Launched, recording_env, shared_recording
from tests.e2e.sse import read_events

RECORDING = shared_recording()
LAUNCH_ENV = recording_env(f"{RECORDING.url}/v1")

CASES = {
    "en": {
        "decision": "We decided to run production on PostgreSQL 16 from now on.",
        "title": "Production",
        "body": "run production on PostgreSQL 16",
        "question": "Which database runs production?",
    },
    "fr": {
        "decision": "Nous avons décidé de faire tourner la production sur PostgreSQL 16 désormais.",
        "title": "Production",
        "body": "la production sur PostgreSQL 16",
        "question": "Quelle base de données fait tourner la production ?",
    },
}


def client(launched: Launched, name: str) -> httpx.Client:
    return launched.client(name, timeout=60)


@pytest.fixture(scope="module")
def users(launched: Launched) -> Iterator[dict[str, httpx.Client]]:
    clients = {name: client(launched, name) for name in ("alice", "bob", "carol")}
    yield clients
    for session in clients.values():
        session.close()


def ask(session: httpx.Client, agent: str, message: str) -> list[Any]:
    with session.stream("POST", f"/api/agent/agents/{agent}/asks", json={"message": message}) as response:
        assert response.status_code == 200, response.read()
        return list(read_events(response))


@pytest.mark.parametrize("lang", sorted(CASES))
def test_a_project_shares_its_agent_and_the_memory_its_members_curate(
    launched: Launched, users: dict[str, httpx.Client], lang: str
) -> None:
    case = CASES[lang]
    alice, bob, carol = users["alice"], users["bob"], users["carol"]
    project, agent = f"apollo-{lang}-{launched.namespace}", f"qa-{lang}-{launched.namespace}"
    scoped = {"project_id": project}
    created = alice.post("/api/agent/projects", json={"id": project, "display_name": f"Apollo {lang}"})
    assert created.status_code == 201, created.text
    assert created.json()["role"] == "owner" and created.json()["note_policy"] == "review"
    bob_id = launched.user("bob")
    assert alice.put(f"/api/agent/projects/{project}/members/{bob_id}", json={"role": "editor"}).is_success
    registered = alice.post("/api/agent/agents", params=scoped, json={"id": agent, "model": "recorded"})
    assert registered.status_code == 201 and registered.json()["project_id"] == project, registered.text
    assert [a["id"] for a in bob.get("/api/agent/agents", params=scoped).json()["agents"]] == [agent]

    # Bob tells the project's agent a decision without asking to save it:
    # the agent's note becomes a proposal for the project's review.
    note = {"kind": "decision", "title": case["title"], "body": case["body"], "reason": "lasting"}
    RECORDING.script.steps = [f"tool:save_note:{json.dumps(note)}", "say:Noted."]
    events = ask(bob, agent, case["decision"])
    assert events[-1].event == "final", events[-1]
    assert [e.data["code"] for e in events if e.event == "notice"] == ["NOTE_PROPOSED"]
    assert alice.get("/api/agent/notes", params=scoped).json()["notes"] == []
    pending = alice.get("/api/agent/note-proposals", params={**scoped, "state": "pending"}).json()
    [proposal] = pending["proposals"]
    assert proposal["note"]["body"] == case["body"] and f"+{case['body']}" in proposal["diff"]["unified"]
    accepted = alice.post(f"/api/agent/note-proposals/{proposal['id']}/accept")
    assert accepted.status_code == 200, accepted.text
    assert [n["body"] for n in bob.get("/api/agent/notes", params=scoped).json()["notes"]] == [case["body"]]

    # Bob's next ask in the project sends the accepted note to the model.
    RECORDING.script.steps = ["say:PostgreSQL 16."]
    events = ask(bob, agent, case["question"])
    assert events[-1].event == "final", events[-1]
    system = RECORDING.script.requests[-1]["messages"][0]["content"]
    assert case["body"] in system

    # Carol is no member: every project route is 404, as for a missing project.
    for method, path, params, body in (
        ("GET", f"/api/agent/projects/{project}", None, None),
        ("GET", f"/api/agent/projects/{project}/members", None, None),
        ("PUT", f"/api/agent/projects/{project}/members/{launched.user('carol')}", None, {"role": "owner"}),
        ("GET", "/api/agent/notes", scoped, None),
        ("POST", "/api/agent/notes", scoped, {"kind": "fact", "title": "Mine", "body": "Carol's."}),
        ("GET", "/api/agent/project-context", scoped, None),
        ("PUT", "/api/agent/project-context", scoped, {"body": "Carol's rules."}),
        ("GET", "/api/agent/live-state", scoped, None),
        ("GET", "/api/agent/note-proposals", scoped, None),
        ("GET", f"/api/agent/note-proposals/{proposal['id']}", None, None),
        ("POST", f"/api/agent/note-proposals/{proposal['id']}/refuse", None, None),
        ("GET", f"/api/agent/agents/{agent}", None, None),
        ("GET", f"/api/agent/agents/{agent}/entries", None, None),
        ("POST", f"/api/agent/agents/{agent}/asks", None, {"message": case["question"]}),
    ):
        response = carol.request(method, path, params=params, json=body)
        assert response.status_code == 404, (method, path, response.text)
    assert agent not in [a["id"] for a in carol.get("/api/agent/agents").json()["agents"]]
    events_response = carol.post(
        f"/api/agent/conversations/{carol.post('/api/agent/conversations', json={}).json()['id']}/messages",
        json={"message": case["question"], "project_id": project},
    )
    assert events_response.status_code == 404, events_response.text

    # Bob as a viewer reads, and each write is 403 with its reason.
    assert alice.put(f"/api/agent/projects/{project}/members/{bob_id}", json={"role": "viewer"}).is_success
    assert bob.get("/api/agent/notes", params=scoped).status_code == 200
    for method, path, body in (
        ("POST", "/api/agent/notes", {"kind": "fact", "title": "Bob's", "body": "Bob writes."}),
        ("PUT", "/api/agent/project-context", {"body": "Bob's rules."}),
        ("PUT", "/api/agent/live-state/qa", {"activity": "testing"}),
    ):
        response = bob.request(method, path, params=scoped, json=body)
        assert response.status_code == 403, (path, response.text)
        assert "viewer" in response.json()["error"]["message"]
    refused = bob.post(f"/api/agent/agents/{agent}/asks", json={"message": case["question"]})
    assert refused.status_code == 403 and "viewer" in refused.json()["error"]["message"]
