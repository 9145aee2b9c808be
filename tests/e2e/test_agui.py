"""AG-UI as its clients meet it: @ag-ui/client's HttpAgent (the protocol's
own SDK, from npm) against the five real processes, every event it receives
checked against @ag-ui/core's schema, and the messages the real-wire model
received; in French and in English; a tool call; a connection dropped
mid-run and resumed after its cursor, with no gap and no duplicate."""

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
    # The SDK assembled the answer as the assistant's message.
    assert output["messages"][-1]["role"] == "assistant" and output["messages"][-1]["content"] == answer


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
    script(f"say:{answer}")
    thread, run = f"thread-{uuid.uuid4()}", f"run-{uuid.uuid4()}"
    message = "Quand a lieu le déploiement ?"
    options = {"threadId": thread, "runId": run, "message": message, "forwardedProps": {"model": "recorded"}}
    whole = run_client(launched, **options)["events"]
    assert types(whole)[-1] == "RUN_FINISHED"
    # The same run read again, dropped after a few events (the run id is the
    # idempotency key: no second run starts), then resumed after the last
    # cursor received.
    cut = next(i for i, e in enumerate(whole) if e["type"] == "TEXT_MESSAGE_CONTENT") + 2
    first = run_client(launched, **options, abortAfter=cut)["events"]
    assert first == whole[:cut]
    last = first[-1]["metadata"]["switchboard_cursor"]
    rest = run_client(launched, **options, lastEventId=last)["events"]
    # It opens as AG-UI requires (the run, its open steps and message), then
    # goes on exactly after the cursor.
    after = [e for e in whole if cursor(e) > cursor(first[-1])]
    reopened = rest[: len(rest) - len(after)]
    assert rest[len(reopened) :] == after
    assert types(reopened)[0] == "RUN_STARTED" and types(reopened)[-1] == "TEXT_MESSAGE_START"
    assert text_of(first) + text_of(rest) == answer == text_of(whole)
    assert len(model_requests()) == 1  # one run, read three times


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
