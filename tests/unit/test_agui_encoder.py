"""The AG-UI encoder on run events made by hand: each kind's events, the
interrupt of a proposal awaiting a decision, an error, and a stream resumed
at every cursor of a run, which must give the rest with what it needs open
and nothing twice."""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import BaseEvent

from gateway.agui.encoder import AguiEncoder, json_of, parse_cursor
from switchboard.common.v1 import common_pb2
from switchboard.engine.v1 import engine_pb2

RUN = "r-1"


def run_events(status: int = engine_pb2.RUN_STATUS_DONE, proposal: bool = False) -> list[engine_pb2.RunEvent]:
    kinds: list[dict[str, Any]] = [
        {"run_started": engine_pb2.RunStarted(conversation_id="c-1", language="fr")},
        {"step": engine_pb2.Step(key="generate", label="Réponse", status=engine_pb2.STEP_STATUS_STARTED)},
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
        {"delta": engine_pb2.Delta(text="la fenêtre : ")},
        {"delta": engine_pb2.Delta(text="mardi.")},
        {"step": engine_pb2.Step(key="generate", status=engine_pb2.STEP_STATUS_COMPLETED)},
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
    return [json_of(item) for item in produced]


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def test_a_run_is_one_whole_agui_stream() -> None:
    events = stream(run_events())
    assert types(events) == [
        "RUN_STARTED", "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
        "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT", "CUSTOM",
        "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CONTENT", "STEP_FINISHED",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]  # fmt: skip
    assert events[0]["threadId"] == "thread-1" and events[0]["runId"] == "run-1"
    assert events[5]["toolCallId"] == "call-1" and events[6]["delta"] == '{"title": "Fenêtre"}'
    assert events[8]["content"] == "<tool_result>ok</tool_result>"
    assert events[9]["name"] == "switchboard.notice" and events[9]["value"]["message"] == "Note proposée"
    finished = events[-1]
    assert finished["outcome"] == {"type": "success"}
    assert (
        finished["result"]["text"] == "Je note la fenêtre : mardi."
        and finished["result"]["usage"]["tokens_in"] == 12
    )
    cursors = [e["metadata"]["switchboard_cursor"] for e in events]
    assert cursors[:3] == ["1.1", "2.1", "3.1"] and cursors[3] == "3.2" and len(set(cursors)) == len(cursors)


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
    events = run_events()[:3] + [
        engine_pb2.RunEvent(
            run_id=RUN, sequence=4, error=engine_pb2.RunError(code="CANCELLED", message="annulé")
        )
    ]
    assert types(stream(events))[-3:] == ["TEXT_MESSAGE_END", "STEP_FINISHED", "RUN_ERROR"]
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


def test_cursors_are_parsed_as_written_and_a_bare_sequence_means_after_it() -> None:
    assert parse_cursor("") == (0, 0) and parse_cursor("7.2") == (7, 2)
    assert parse_cursor("7") > parse_cursor("7.99")
