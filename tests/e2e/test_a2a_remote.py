"""A remote A2A agent asked like one of Switchboard's own, on the five real
processes: the remote is the a2a-sdk's own server around a scripted
executor (tests/fakes/a2a_agent.py), registered by its card URL through the
HTTP route; a local agent whose model is the recording real-wire provider
asks it with the ask_agent tool. Checked: what the remote received (the
question, the correlation id as contextId), the exchange on the remote's
shared thread read back over HTTP, and exactly what the model received as
the tool's result; in French (a card without streaming: SendMessage) and in
English (a streaming card: the answer read as a stream). A remote that
fails or does not answer in time is a notice and a failed ask, in the
asked run and in the asking run, and the asking run ends."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from services.engine.tools.delimiting import wrap_result
from tests.e2e.conftest import Launched, model_requests, recording_env, shared_recording
from tests.e2e.conftest import script_answers as script
from tests.e2e.sse import read_events
from tests.fakes.a2a_agent import FakeAgent, serve_agent

RECORDING = shared_recording()
LAUNCH_ENV = recording_env(f"{RECORDING.url}/v1")

CASES = {
    # (card name, whether its card streams, the question, the remote's answer)
    "fr": (
        "Traductrice",
        False,
        "Quelle est la fenêtre de déploiement ?",
        "Décision : le mardi, de 9 h à 11 h, sauf les jours fériés.",
    ),
    "en": ("Reviewer", True, "Is the release ready?", "Decision: ship it on Tuesday, once QA signs off."),
}


@pytest.fixture(scope="module")
def remotes() -> Iterator[dict[str, FakeAgent]]:
    with (
        serve_agent(CASES["fr"][0], {}, streaming=False) as french,
        serve_agent(CASES["en"][0], {}, streaming=True) as english,
    ):
        yield {"fr": french, "en": english}


def slug(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def register(launched: Launched, agent_id: str, card_url: str) -> dict[str, Any]:
    with launched.client(path="/api/agent") as http:
        response = http.post("/agents/remote", json={"id": agent_id, "card_url": card_url})
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def ask(launched: Launched, agent_id: str, message: str) -> list[dict[str, Any]]:
    """Asks a local agent as the user; the events of its run, to its end."""
    with (
        launched.client(path="/api/agent", timeout=60) as http,
        http.stream("POST", f"/agents/{agent_id}/asks", json={"message": message}) as response,
    ):
        assert response.status_code == 200, response.read()
        return [{"event": e.event, **e.data} for e in read_events(response)]


def local_agent(launched: Launched) -> str:
    """An agent of ours whose model is the recording provider."""
    agent_id = slug("main")
    with launched.client(path="/api/agent") as http:
        created = http.post("/agents", json={"id": agent_id, "model": "recorded"})
    assert created.status_code == 201, created.text
    return agent_id


def tool_result(request: dict[str, Any]) -> dict[str, Any]:
    """The tool message of a model request, and the call it answers."""
    call = request["messages"][-2]["tool_calls"][0]
    return {"call_id": call["id"], "name": call["function"]["name"], "message": request["messages"][-1]}


@pytest.mark.parametrize("lang", ["fr", "en"])
def test_a_remote_agent_answers_on_its_shared_thread_and_the_model_reads_its_answer(
    launched: Launched, remotes: dict[str, FakeAgent], lang: str
) -> None:
    name, streaming, question, answer = CASES[lang]
    remote = remotes[lang]
    remote.replies[question] = answer
    remote.received.clear()
    remote_id = slug(f"remote-{lang}")
    registered = register(launched, remote_id, remote.card_url)
    assert registered["display_name"] == name
    assert registered["remote"] == {
        "card_url": remote.card_url,
        "card_name": name,
        "description": f"{name}, a scripted remote agent",
        "streaming": streaming,
    }
    # The project's members see it in the agent list, marked as remote.
    with launched.client(path="/api/agent") as http:
        listed = http.get("/agents", params={"page_size": 500}).json()["agents"]
    assert [a.get("remote", {}).get("card_url") for a in listed if a["id"] == remote_id] == [remote.card_url]

    main = local_agent(launched)
    script(f"tool:ask_agent:{json.dumps({'agent': remote_id, 'message': question})}", f"say:{answer}")
    events = ask(launched, main, f"{remote_id}: {question}")
    assert events[-1]["event"] == "final" and events[-1]["text"] == answer

    # The remote received the question once, the ask's correlation id as its contextId.
    [received] = remote.received
    assert received.text == question
    # The exchange is on the remote agent's shared thread: who asked, who answered.
    with launched.client(path="/api/agent") as http:
        entries = http.get(f"/agents/{remote_id}/entries").json()["entries"]
    assert [(e["role"], e["requester"], e["target"], e["content"]) for e in entries] == [
        ("user", main, remote_id, question),
        ("assistant", main, remote_id, answer),
    ]
    assert {e["correlation_id"] for e in entries} == {received.context_id}
    assert [e["source"] for e in entries] == [f"agent:{main}", f"agent:{remote_id}"]

    # The model asked, then got the remote's answer as the tool's result.
    first, second = model_requests()
    assert [t["function"]["name"] for t in first["tools"]].count("ask_agent") == 1
    result = tool_result(second)
    assert result["name"] == "ask_agent"
    assert result["message"] == {
        "role": "tool",
        "tool_call_id": result["call_id"],
        "content": wrap_result("ask_agent", f"{name} answered:\n{answer}"),
    }


@pytest.mark.parametrize(
    ("question", "reply", "why", "notice"),
    [
        (
            "Peux-tu vérifier la compilation {n} ?",
            "fail:plus de crédit",
            "its task failed: plus de crédit",
            "l'agent distant Reviewer n'a pas répondu : its task failed: plus de crédit",
        ),
        (
            "Can you check the build {n}?",
            "hang",
            "it did not answer within 3 s",
            "the remote agent Reviewer gave no answer: it did not answer within 3 s",
        ),
    ],
)
def test_a_remote_that_fails_or_does_not_answer_is_a_notice_and_the_run_ends(
    launched: Launched, remotes: dict[str, FakeAgent], question: str, reply: str, why: str, notice: str
) -> None:
    remote = remotes["en"]
    question = question.format(n=uuid.uuid4().hex[:6])
    remote.replies[question] = reply
    remote_id = slug("remote-down")
    register(launched, remote_id, remote.card_url)
    main = local_agent(launched)
    script(
        f"tool:ask_agent:{json.dumps({'agent': remote_id, 'message': question})}", "say:It could not answer."
    )
    events = ask(launched, main, f"{remote_id}: {question}")
    # The asking run ends normally: its model read the failed ask, and its
    # user is told why, with the remote's own notice.
    assert events[-1]["event"] == "final" and events[-1]["text"] == "It could not answer."
    told = [(e["code"], e["message"]) for e in events if e["event"] == "notice"]
    assert told == [("REMOTE_AGENT_FAILED", notice)], told
    failed = f"{remote_id} could not answer: {why}"
    result = tool_result(model_requests()[-1])
    assert result["message"]["content"] == wrap_result("ask_agent", failed, error=True)
    # The question is on the remote's thread, unanswered; its run (nested in
    # the asking run) failed, with a notice that says why in the question's language.
    with launched.client(path="/api/agent") as http:
        [asked] = http.get(f"/agents/{remote_id}/entries").json()["entries"]
        assert (asked["role"], asked["content"]) == ("user", question)
        run = http.get(f"/runs/{asked['run_id']}").json()
        with http.stream("GET", f"/runs/{asked['run_id']}/events") as stream:
            notices = [e.data for e in read_events(stream) if e.event == "notice"]
    assert run["status"] == "failed" and run["parent_run_id"] and run["agent_id"] == remote_id
    assert [(n["code"], n["message"]) for n in notices] == [("REMOTE_AGENT_FAILED", notice)]


def test_asked_directly_the_exchanges_fold_into_the_handoff_summary(
    launched: Launched, remotes: dict[str, FakeAgent]
) -> None:
    """AskAgent itself (no model of ours): two asks of a remote close its
    thread's segment (the launch rotates at 4 entries), and the segment's
    handoff summary, folded from the entries as for a local agent, keeps the
    remote's decision and who asked."""
    name, _, question, answer = CASES["fr"]
    remote = remotes["fr"]
    follow_up = "Et le vendredi ?"
    remote.replies.update({question: answer, follow_up: "Blocage : pas de déploiement le vendredi."})
    remote_id = slug("remote-handoff")
    register(launched, remote_id, remote.card_url)
    for message in (question, follow_up):
        with (
            launched.client(path="/api/agent", timeout=60) as http,
            http.stream(
                "POST", f"/agents/{remote_id}/asks", json={"message": message, "requester": "qa"}
            ) as stream,
        ):
            events = [(e.event, e.data) for e in read_events(stream)]
        assert events[-1][0] == "final" and events[-1][1]["provider"] == "a2a", events[-1]
    with launched.client(path="/api/agent") as http:
        for _ in range(100):
            segments = http.get(f"/agents/{remote_id}/segments").json()["segments"]
            if segments and segments[0]["handoff_state"] == "ready":
                break
            time.sleep(0.1)
    closed = segments[0]
    assert (closed["state"], closed["entry_count"], closed["handoff_state"]) == ("closed", 4, "ready"), (
        segments
    )
    summary = closed["handoff_summary"]
    # The remote's marked lines, attributed to it, and its last answer to qa.
    assert (
        f"## Recent decisions\n- le mardi, de 9 h à 11 h, sauf les jours fériés. ({remote_id}, #2)" in summary
    )
    assert f"pas de déploiement le vendredi. ({remote_id}, #4)" in summary, summary
    assert f"{remote_id} -> qa: Blocage : pas de déploiement le vendredi. (#4)" in summary, summary
