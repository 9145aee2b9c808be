"""AG-UI as its clients meet it: @ag-ui/client's HttpAgent (the protocol's
own SDK, from npm) against the five real processes, every event it receives
checked against @ag-ui/core's schema, and the messages the real-wire model
received; in French and in English; the messages snapshot against the
conversation read back; the project's live state as a snapshot and a JSON
Patch delta when the model sets it, against the live state read back; a
run on an agent's shared thread; a tool call; a connection dropped mid-run
and resumed after its cursor, with no gap, no duplicate and the same state."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Launched, model_requests, recording_env, shared_recording
from tests.e2e.conftest import script_answers as script
from tests.unit.test_agui_encoder import state_of

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "tests" / "e2e" / "agui_client.mjs"
RECORDING = shared_recording()
LAUNCH_ENV = recording_env(f"{RECORDING.url}/v1")

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (ROOT / "node_modules" / "@ag-ui" / "client").exists(),
    reason="needs Node.js and npm's @ag-ui/client (scripts/test.sh installs it)",
)

CASES = {
    "en": ("What is the deploy window?", "Tuesdays, 9 to 11."),
    "fr": ("Quelle est la fenêtre de déploiement ?", "Le mardi, de 9 h à 11 h, sauf les jours fériés."),
}


def run_client(launched: Launched, **options: Any) -> dict[str, Any]:
    """One HttpAgent run; its events (each checked against the schema), result and messages."""
    payload = {"url": launched.url, "token": launched.token(), **options}
    done = subprocess.run(
        ["node", str(CLIENT), json.dumps(payload)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    output: dict[str, Any] = json.loads(done.stdout)
    assert output["invalid"] == [], output["invalid"]
    return output


def types(events: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in events]


def cursor(event: dict[str, Any]) -> tuple[int, int]:
    """An event's cursor, "<run event sequence>.<k>", as a sortable pair."""
    sequence, number = event["metadata"]["switchboard_cursor"].split(".")
    return int(sequence), int(number)


def text_of(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


def one(events: list[dict[str, Any]], kind: str, name: str = "") -> dict[str, Any]:
    [event] = [e for e in events if e["type"] == kind and e.get("name", "") == name]
    return event


def live_state(launched: Launched) -> dict[str, Any]:
    """The live state of alice's personal project, read back from the HTTP API."""
    with launched.client() as http:
        entries = http.get("/api/agent/live-state").json()["entries"]
    return {"live_state": {entry["agent_id"]: entry for entry in entries}}


def as_messages(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Thread entries read back from the HTTP API, as AG-UI messages have them."""
    return [
        {"id": e["id"], "role": e["role"], "content": e["content"], "name": e["requester"]}
        if e["role"] == "user"
        else {"id": e["id"], "role": e["role"], "content": e["content"], "name": e["target"]}
        for e in entries
    ]


def check_run_record(launched: Launched, events: list[dict[str, Any]]) -> dict[str, Any]:
    """The run's end carries its record's sources and routing decision as the
    HTTP API shows them; the record."""
    run_id = events[-1]["result"]["switchboard_run_id"]
    with launched.client() as http:
        record: dict[str, Any] = http.get(f"/api/agent/runs/{run_id}").json()
    assert one(events, "CUSTOM", "switchboard.sources")["value"] == record["sources"]
    assert one(events, "CUSTOM", "switchboard.routing")["value"] == record["router_decision"]
    return record


def conversation_messages(launched: Launched, conversation_id: str) -> list[dict[str, Any]]:
    with launched.client() as http:
        entries = http.get(f"/api/agent/conversations/{conversation_id}/entries").json()["entries"]
    return as_messages(entries)


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_a_run_streams_as_agui_events_and_the_model_receives_the_message(
    launched: Launched, lang: str
) -> None:
    question, answer = CASES[lang]
    script(f"say:{answer}")
    thread, run = f"thread-{uuid.uuid4()}", f"run-{uuid.uuid4()}"
    output = run_client(
        launched, threadId=thread, runId=run, message=question, forwardedProps={"model": "recorded"}
    )
    events = output["events"]
    assert "error" not in output, output
    assert types(events)[0] == "RUN_STARTED" and types(events)[-1] == "RUN_FINISHED"
    assert events[0]["threadId"] == thread and events[0]["runId"] == run
    assert {"STEP_STARTED", "STEP_FINISHED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_END"} <= set(types(events))
    assert text_of(events) == answer
    # Every event carries its cursor: its run event's sequence, then its rank
    # among that run event's AG-UI events; strictly increasing.
    cursors = [cursor(e) for e in events]
    assert cursors == sorted(set(cursors)) and cursors[0] == (1, 1)
    finished = events[-1]
    assert finished["outcome"]["type"] == "success" and finished["result"]["text"] == answer
    # What the real-wire model received: the user's message, as typed.
    [received] = model_requests()
    assert received["model"] == "model-x" and received["messages"][-1] == {
        "role": "user",
        "content": question,
    }
    # The SDK assembled the answer as the assistant's message, after the
    # messages snapshot: the conversation up to the run's message, as read back.
    record = check_run_record(launched, events)
    snapshot = one(events, "MESSAGES_SNAPSHOT")["messages"]
    assert snapshot == conversation_messages(launched, record["conversation_id"])[:1]
    assert snapshot[0]["content"] == question and snapshot[0]["role"] == "user"
    assert output["messages"][:-1] == snapshot
    assert output["messages"][-1]["role"] == "assistant" and output["messages"][-1]["content"] == answer
    # The live state at the run's start: the state the SDK holds.
    assert output["state"] == one(events, "STATE_SNAPSHOT")["snapshot"] == live_state(launched)


def test_a_run_that_sets_the_live_state_streams_a_snapshot_then_its_json_patch(launched: Launched) -> None:
    """A second turn of a conversation: its messages snapshot is the first
    turn and its message; the model sets the live state in French."""
    with launched.client() as http:
        put = http.put("/api/agent/live-state/relecteur", json={"activity": "Relit la PR « 12 »"})
        assert put.status_code == 200, put.text
    thread = f"thread-{uuid.uuid4()}"
    script("say:Bonjour !")
    recorded = {"model": "recorded"}
    first = run_client(
        launched, threadId=thread, runId=f"run-{uuid.uuid4()}", message="Bonjour", forwardedProps=recorded
    )
    doing = {"activity": "Rédige les notes de version", "detail": "à relire mardi"}
    script(f"tool:set_live_state:{json.dumps(doing, ensure_ascii=False)}", "say:C'est noté.")
    message = "Dis à l'équipe que je rédige les notes de version."
    output = run_client(
        launched, threadId=thread, runId=f"run-{uuid.uuid4()}", message=message, forwardedProps=recorded
    )
    events = output["events"]
    assert "error" not in output, output
    snapshot, delta = one(events, "STATE_SNAPSHOT"), one(events, "STATE_DELTA")
    order = types(events)
    assert order.index("STATE_SNAPSHOT") < order.index("TOOL_CALL_RESULT") < order.index("STATE_DELTA")
    assert (
        "relecteur" in snapshot["snapshot"]["live_state"]
        and "alice" not in snapshot["snapshot"]["live_state"]
    )
    # The delta adds the run's own entry (a chat's entry is its user's).
    [added] = delta["delta"]
    assert (added["op"], added["path"]) == ("add", f"/live_state/{launched.user()}")
    # Applied to the snapshot, by jsonpatch and by the SDK: the live state read back.
    assert state_of(events) == output["state"] == live_state(launched)
    assert output["state"]["live_state"][launched.user()]["activity"] == doing["activity"]
    # The model saw the project's live state, and the entry it set came back to it.
    first_call, second_call = model_requests()
    assert "- relecteur: Relit la PR « 12 »" in first_call["messages"][0]["content"]
    assert first_call["messages"][-1] == {"role": "user", "content": message}
    tool_message = second_call["messages"][-1]
    assert tool_message["role"] == "tool" and doing["activity"] in tool_message["content"]
    # The messages snapshot: the conversation up to this run's message.
    record = check_run_record(launched, events)
    conversation = conversation_messages(launched, record["conversation_id"])
    messages = one(events, "MESSAGES_SNAPSHOT")["messages"]
    assert messages == conversation[:3]
    assert [m["content"] for m in messages] == ["Bonjour", "Bonjour !", message]
    assert first["messages"][0]["id"] == messages[0]["id"]


def test_a_thread_named_for_an_agent_is_an_ask_on_its_shared_thread(launched: Launched) -> None:
    agent = f"reviewer-agui-{launched.namespace}"
    with launched.client() as http:
        made = http.post(
            "/api/agent/agents", json={"id": agent, "display_name": "Reviewer", "model": "recorded"}
        )
        assert made.status_code == 201, made.text
    script("say:Reviewed: nothing to report.")
    question = "Can you review the release notes?"
    output = run_client(launched, threadId=f"agent:{agent}", runId=f"run-{uuid.uuid4()}", message=question)
    events = output["events"]
    assert "error" not in output, output
    assert events[0]["threadId"] == f"agent:{agent}" and text_of(events) == "Reviewed: nothing to report."
    # The ask's model got the question, said as who asked.
    [received] = model_requests()
    assert received["messages"][-1] == {"role": "user", "content": f"user asks: {question}"}
    with launched.client() as http:
        thread = http.get(f"/api/agent/agents/{agent}/entries").json()["entries"]
    assert one(events, "MESSAGES_SNAPSHOT")["messages"] == as_messages(thread)[:1]
    assert output["state"] == live_state(launched)  # the agent's project: alice's own
    check_run_record(launched, events)
    # An agent runs on its own model: naming one is the client's mistake.
    with launched.client() as http:
        refused = http.post(
            "/api/agent/ag-ui",
            json={
                "threadId": f"agent:{agent}",
                "runId": "r",
                "messages": [{"id": "m", "role": "user", "content": question}],
                "state": {"anything": ["the client holds"]},
                "tools": [],
                "context": [],
                "forwardedProps": {"model": "recorded"},
            },
        )
    assert refused.status_code == 400 and "agent's own model" in refused.text


def test_a_tool_call_is_start_args_end_and_result(launched: Launched) -> None:
    note = {"kind": "decision", "title": "Deploy window", "body": "Tuesdays 9-11", "reason": "lasting"}
    script(f"tool:save_note:{json.dumps(note)}", "say:Noted.")
    output = run_client(
        launched,
        threadId=f"thread-{uuid.uuid4()}",
        runId=f"run-{uuid.uuid4()}",
        message="We decided: the deploy window is Tuesdays 9-11.",
        forwardedProps={"model": "recorded"},
    )
    events = output["events"]
    calls = [e for e in events if e["type"].startswith("TOOL_CALL_")]
    assert types(calls) == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT"]
    assert calls[0]["toolCallName"] == "save_note"
    assert json.loads(calls[1]["delta"]) == note
    assert len({c["toolCallId"] for c in calls}) == 1
    assert calls[3]["content"]  # what the model was told back
    # The model got the tool's result under the same call id.
    tool_message = model_requests()[-1]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == calls[0]["toolCallId"]
    assert types(events)[-1] == "RUN_FINISHED" and text_of(events) == "Noted."


def test_a_dropped_stream_resumes_after_its_cursor_with_no_gap_and_no_duplicate(launched: Launched) -> None:
    answer = "Le déploiement a lieu le mardi matin, entre neuf et onze heures, après la revue."
    doing = {"activity": "Prépare le déploiement de mardi"}
    script(f"tool:set_live_state:{json.dumps(doing, ensure_ascii=False)}", f"say:{answer}")
    thread, run = f"thread-{uuid.uuid4()}", f"run-{uuid.uuid4()}"
    message = "Quand a lieu le déploiement ?"
    options = {"threadId": thread, "runId": run, "message": message, "forwardedProps": {"model": "recorded"}}
    read = run_client(launched, **options)
    whole = read["events"]
    assert types(whole)[-1] == "RUN_FINISHED" and "STATE_DELTA" in types(whole)
    # The same run read again, dropped after a few events (the run id is the
    # idempotency key: no second run starts), then resumed after the last
    # cursor received.
    cut = next(i for i, e in enumerate(whole) if e["type"] == "TEXT_MESSAGE_CONTENT") + 2
    first = run_client(launched, **options, abortAfter=cut)["events"]
    assert first == whole[:cut]
    last = first[-1]["metadata"]["switchboard_cursor"]
    resumed = run_client(launched, **options, lastEventId=last)
    rest = resumed["events"]
    # It opens as AG-UI requires (the run, its open steps and message), then
    # goes on exactly after the cursor.
    after = [e for e in whole if cursor(e) > cursor(first[-1])]
    reopened = rest[: len(rest) - len(after)]
    assert rest[len(reopened) :] == after
    assert types(reopened)[0] == "RUN_STARTED" and types(reopened)[-1] == "TEXT_MESSAGE_START"
    assert text_of(first) + text_of(rest) == answer == text_of(whole)
    # A client that lost everything gets what it held again: the messages,
    # and the state with the run's change (the delta came before the cut).
    assert one(reopened, "MESSAGES_SNAPSHOT") == {
        key: value for key, value in one(whole, "MESSAGES_SNAPSHOT").items() if key != "metadata"
    }
    assert "STATE_DELTA" in types(first) and "STATE_DELTA" not in types(rest)
    assert resumed["state"] == read["state"] == state_of(whole) == live_state(launched)
    assert len(model_requests()) == 2  # one run (a tool call, then the answer), read three times


@pytest.mark.parametrize(
    ("decision", "message"),
    [
        ("accept", "Souviens-toi que je préfère qu'on me tutoie."),
        ("refuse", "Remember that I like short answers."),
    ],
)
def test_a_proposal_is_an_interrupt_and_resuming_decides_it(
    launched: Launched, decision: str, message: str
) -> None:
    thread, run = f"thread-{uuid.uuid4()}", f"run-{uuid.uuid4()}"
    asked = run_client(launched, threadId=thread, runId=run, message=message)
    finished = asked["events"][-1]
    assert finished["type"] == "RUN_FINISHED" and finished["outcome"]["type"] == "interrupt"
    [interrupt] = finished["outcome"]["interrupts"]
    assert interrupt["reason"] == "approval" and interrupt["metadata"]["unified_diff"].startswith("---")
    assert interrupt["responseSchema"]["properties"]["decision"]["enum"] == ["accept", "refuse"]
    switchboard_run = finished["result"]["switchboard_run_id"]
    # The user answers: the same thread, a run that resumes the interrupt.
    answer = {"interruptId": interrupt["id"], "status": "resolved", "payload": {"decision": decision}}
    resumed = run_client(launched, threadId=thread, runId=f"{run}-answer", message=message, resume=[answer])
    events = resumed["events"]
    assert types(events) == ["RUN_STARTED", "CUSTOM", "RUN_FINISHED"]
    state = "accepted" if decision == "accept" else "refused"
    assert events[1]["value"] == {"interrupt_id": interrupt["id"], "decision": decision, "state": state}
    # Decided exactly as the page's buttons decide: the proposal and its waiting run.
    with launched.client() as http:
        assert http.get(f"/api/agent/proposals/{interrupt['id']}").json()["state"] == state
        record = http.get(f"/api/agent/runs/{switchboard_run}").json()
        assert (record["status"], record["approval"]) == ("done", state)
