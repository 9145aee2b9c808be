"""The AG-UI encoder on run events made by hand: each kind's events, the
live state as a snapshot and JSON Patch deltas, the interrupt of a proposal
awaiting a decision, an error, and a stream resumed at every cursor of a
run, which must give the rest with what it needs open, the state and the
messages a client holds, and nothing twice."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest
from ag_ui.core import BaseEvent

from gateway.agui.encoder import AguiEncoder, json_of, parse_cursor, to_fill
from switchboard.common.v1 import common_pb2
from switchboard.engine.v1 import engine_pb2
from switchboard.memory.v1 import memory_pb2

RUN = "r-1"
STARTED, COMPLETED = engine_pb2.STEP_STATUS_STARTED, engine_pb2.STEP_STATUS_COMPLETED


def live(kind: int, *entries: tuple[str, str]) -> dict[str, Any]:
    made = [
        memory_pb2.LiveStateEntry(project_id="p-1", agent_id=agent, activity=activity)
        for agent, activity in entries
    ]
    return {"live_state": engine_pb2.LiveStateChanged(type=kind, entries=made)}


def run_events(status: int = engine_pb2.RUN_STATUS_DONE, proposal: bool = False) -> list[engine_pb2.RunEvent]:
    kinds: list[dict[str, Any]] = [
        {"run_started": engine_pb2.RunStarted(conversation_id="c-1", language="fr")},
        {"step": engine_pb2.Step(key="context", status=STARTED)},
        live(memory_pb2.LIVE_STATE_EVENT_TYPE_SNAPSHOT, ("qa", "relit la PR"), ("a/b~c", "déploie")),
        {"step": engine_pb2.Step(key="context", status=COMPLETED)},
        {"step": engine_pb2.Step(key="generate", label="Réponse", status=STARTED)},
        {"delta": engine_pb2.Delta(text="Je note ")},
        {
            "action": engine_pb2.ActionTaken(
                tool="save_note",
                family="memory",
                status="ok",
                call_id="call-1",
                arguments='{"title": "Fenêtre"}',
                result="<tool_result>ok</tool_result>",
            )
        },
        {"notice": engine_pb2.Notice(code="NOTE_PROPOSED", message="Note proposée")},
        live(memory_pb2.LIVE_STATE_EVENT_TYPE_SET, ("personal", "note la fenêtre")),
        live(memory_pb2.LIVE_STATE_EVENT_TYPE_SET, ("a/b~c", "a fini")),
        {"delta": engine_pb2.Delta(text="la fenêtre : ")},
        {"delta": engine_pb2.Delta(text="mardi.")},
        {"step": engine_pb2.Step(key="generate", status=COMPLETED)},
    ]
    if proposal:
        kinds.append(
            {
                "proposal": engine_pb2.ProposalMade(
                    proposal_id="p-1",
                    page_title="Instructions",
                    summary="Répondre en français",
                    unified_diff="+fr",
                )
            }
        )
    kinds.append(
        {
            "final": engine_pb2.Final(
                text="Je note la fenêtre : mardi.",
                provider="recording",
                model="x",
                usage=common_pb2.Usage(tokens_in=12, tokens_out=5),
                status=status,
            )
        }
    )
    return [engine_pb2.RunEvent(run_id=RUN, sequence=n, **kind) for n, kind in enumerate(kinds, 1)]


def stream(events: list[engine_pb2.RunEvent], after: tuple[int, int] = (0, 0)) -> list[dict[str, Any]]:
    encoder = AguiEncoder("thread-1", "run-1", after)
    produced: list[BaseEvent] = [item for event in events for item in encoder.encode(event)]
    return [{**json_of(item), "to_fill": True} if to_fill(item) else json_of(item) for item in produced]


def state_of(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The state a client holds after ``events``: the last snapshot with the
    deltas after it applied (RFC 6902, by jsonpatch)."""
    state = None
    for event in events:
        if event["type"] == "STATE_SNAPSHOT":
            state = copy.deepcopy(event["snapshot"])
        elif event["type"] == "STATE_DELTA":
            state = jsonpatch.apply_patch(state, event["delta"])
    return state


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def test_a_run_is_one_whole_agui_stream() -> None:
    events = stream(run_events())
    assert types(events) == [
        "RUN_STARTED", "STEP_STARTED", "STATE_SNAPSHOT", "STEP_FINISHED", "MESSAGES_SNAPSHOT",
        "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
        "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT", "CUSTOM",
        "STATE_DELTA", "STATE_DELTA",
        "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CONTENT", "STEP_FINISHED",
        "TEXT_MESSAGE_END", "CUSTOM", "CUSTOM",
        "RUN_FINISHED",
    ]  # fmt: skip
    assert events[0]["threadId"] == "thread-1" and events[0]["runId"] == "run-1"
    assert events[9]["toolCallId"] == "call-1" and events[10]["delta"] == '{"title": "Fenêtre"}'
    assert events[12]["content"] == "<tool_result>ok</tool_result>"
    assert events[13]["name"] == "switchboard.notice" and events[13]["value"]["message"] == "Note proposée"
    # The messages and the run record's parts are left for the route to fill.
    assert [e["type"] for e in events if e.get("to_fill")] == ["MESSAGES_SNAPSHOT", "CUSTOM", "CUSTOM"]
    assert events[4]["messages"] == [] and "to_fill" not in events[13]
    assert [e["name"] for e in events[-3:-1]] == ["switchboard.sources", "switchboard.routing"]
    finished = events[-1]
    assert finished["outcome"] == {"type": "success"}
    assert (
        finished["result"]["text"] == "Je note la fenêtre : mardi."
        and finished["result"]["usage"]["tokens_in"] == 12
    )
    cursors = [e["metadata"]["switchboard_cursor"] for e in events]
    assert cursors[:5] == ["1.1", "2.1", "3.1", "4.1", "4.2"] and len(set(cursors)) == len(cursors)


def test_the_live_state_is_a_snapshot_then_json_patch_deltas_of_the_entries_set() -> None:
    events = stream(run_events())
    [snapshot] = [e for e in events if e["type"] == "STATE_SNAPSHOT"]
    assert snapshot["snapshot"] == {
        "live_state": {
            "qa": {"project_id": "p-1", "agent_id": "qa", "activity": "relit la PR", "detail": ""},
            "a/b~c": {"project_id": "p-1", "agent_id": "a/b~c", "activity": "déploie", "detail": ""},
        }
    }
    added, replaced = (e["delta"] for e in events if e["type"] == "STATE_DELTA")
    assert added == [
        {
            "op": "add",
            "path": "/live_state/personal",
            "value": {
                "project_id": "p-1",
                "agent_id": "personal",
                "activity": "note la fenêtre",
                "detail": "",
            },
        }
    ]
    # Only what changed, at the entry's JSON Pointer (its "/" and "~" escaped).
    assert replaced == [{"op": "replace", "path": "/live_state/a~1b~0c/activity", "value": "a fini"}]
    state = state_of(events)
    assert state is not None and {a: e["activity"] for a, e in state["live_state"].items()} == {
        "qa": "relit la PR",
        "a/b~c": "a fini",
        "personal": "note la fenêtre",
    }


def test_an_entry_set_without_a_snapshot_gives_no_delta() -> None:
    # The run could not read the live state (memory down): nothing to patch.
    events = [e for e in run_events() if e.WhichOneof("kind") != "live_state" or e.live_state.type != 1]
    assert not {"STATE_SNAPSHOT", "STATE_DELTA"} & set(types(stream(events)))


def test_a_proposal_awaiting_a_decision_is_an_interrupt_with_its_diff() -> None:
    events = stream(run_events(engine_pb2.RUN_STATUS_WAITING_APPROVAL, proposal=True))
    outcome = events[-1]["outcome"]
    assert outcome["type"] == "interrupt"
    [interrupt] = outcome["interrupts"]
    assert interrupt["id"] == "p-1" and interrupt["reason"] == "approval"
    assert interrupt["message"] == "Répondre en français"
    assert interrupt["metadata"]["unified_diff"] == "+fr"
    assert interrupt["responseSchema"]["properties"]["decision"]["enum"] == ["accept", "refuse"]


def test_an_error_closes_what_is_open_then_is_run_error() -> None:
    events = run_events()[:6] + [
        engine_pb2.RunEvent(
            run_id=RUN, sequence=7, error=engine_pb2.RunError(code="CANCELLED", message="annulé")
        )
    ]
    ending = ["TEXT_MESSAGE_END", "STEP_FINISHED", "CUSTOM", "CUSTOM", "RUN_ERROR"]
    assert types(stream(events))[-5:] == ending
    assert stream(events)[-1]["code"] == "CANCELLED"


@pytest.mark.parametrize("proposal", [False, True])
def test_resuming_after_any_cursor_gives_the_rest_once_with_what_is_open(proposal: bool) -> None:
    events = run_events(proposal=proposal)
    whole = stream(events)
    for index, last in enumerate(whole[:-1]):
        after = parse_cursor(last["metadata"]["switchboard_cursor"])
        resumed = stream(events, after)
        rest = whole[index + 1 :]
        opening = resumed[: len(resumed) - len(rest)]
        assert resumed[len(opening) :] == rest
        assert opening[0]["type"] == "RUN_STARTED" and all("metadata" not in e for e in opening)
        # A message is open at the cursor when its START came and its END did not.
        marks = [t for t in types(whole[: index + 1]) if t in ("TEXT_MESSAGE_START", "TEXT_MESSAGE_END")]
        open_message = bool(marks) and marks[-1] == "TEXT_MESSAGE_START"
        assert ("TEXT_MESSAGE_START" in types(opening)) == open_message
        # A client that lost everything gets the state it had (a snapshot
        # of it) and the messages it had, once the stream had sent them.
        assert state_of(opening) == state_of(whole[: index + 1])
        had_messages = "MESSAGES_SNAPSHOT" in types(whole[: index + 1])
        assert ("MESSAGES_SNAPSHOT" in types(opening)) == had_messages
        assert state_of(resumed) == state_of(whole)


def test_cursors_are_parsed_as_written_and_a_bare_sequence_means_after_it() -> None:
    assert parse_cursor("") == (0, 0) and parse_cursor("7.2") == (7, 2)
    assert parse_cursor("7") > parse_cursor("7.99")
