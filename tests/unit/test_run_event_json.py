"""A run event's SSE ``data:`` is made once, by the engine, in exactly the
bytes the gateway made when it encoded every event itself: for every kind of
event, French text included, whichever side encodes it (an engine older than
``event_json`` sends none, and the gateway encodes the proto). The literals
below are the gateway's output before the engine made the JSON."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

import gateway.events
from gateway.events import to_sse
from services.engine import feed as feed_module
from services.engine.feed import RunFeed, StreamedEvent
from services.shared.api_json import event_json
from switchboard.common.v1 import common_pb2
from switchboard.engine.v1 import engine_pb2 as e
from switchboard.engine.v1 import engine_service_pb2
from switchboard.memory.v1 import memory_pb2
from tests.unit.test_gateway_streams import app_with

RUN = "run-1"

# (kind, the event's kind field, its SSE data as the gateway wrote it)
CASES: list[tuple[str, Any, str]] = [
    (
        "run_started",
        e.RunStarted(conversation_id="conv-1", requested_model="", language="fr"),
        r'{"conversation_id":"conv-1","language":"fr","requested_model":"","run_id":"run-1","sequence":1}',
    ),
    (
        "step",
        e.Step(key="generate", label="Writing the answer", status=e.STEP_STATUS_COMPLETED),
        r'{"key":"generate","label":"Writing the answer","status":"completed","run_id":"run-1","sequence":2}',
    ),
    (
        "skill_used",
        e.SkillUsed(
            skill=e.SkillUse(
                skill_id="s-1", name="Compte rendu de réunion", invocation=e.SKILL_INVOCATION_MANUAL
            )
        ),
        r'{"skill_id":"s-1","name":"Compte rendu de r\u00e9union","invocation":"manual",'
        r'"run_id":"run-1","sequence":3}',
    ),
    (
        "delta",
        e.Delta(text="L'été à Besançon — « déjà » ✓"),
        r"""{"text":"L'\u00e9t\u00e9 \u00e0 Besan\u00e7on \u2014 \u00ab d\u00e9j\u00e0 \u00bb \u2713","""
        r'"run_id":"run-1","sequence":4}',
    ),
    (
        "notice",
        e.Notice(code="ROUTER_UNAVAILABLE", message="The router did not answer: no skill applies."),
        r'{"code":"ROUTER_UNAVAILABLE","message":"The router did not answer: no skill applies.",'
        r'"run_id":"run-1","sequence":5}',
    ),
    (
        "final",
        e.Final(
            text="Voilà le résumé.",
            provider="offline",
            model="switchboard-offline",
            usage=common_pb2.Usage(tokens_in=1234, tokens_out=56),
            status=e.RUN_STATUS_WAITING_APPROVAL,
        ),
        r'{"text":"Voil\u00e0 le r\u00e9sum\u00e9.","provider":"offline","model":"switchboard-offline",'
        r'"usage":{"tokens_in":1234,"tokens_out":56},"status":"waiting_approval","run_id":"run-1","sequence":6}',
    ),
    (
        "error",
        e.RunError(code="BUDGET_EXCEEDED", message="Budget dépassé : 2 000 jetons"),
        r'{"code":"BUDGET_EXCEEDED","message":"Budget d\u00e9pass\u00e9 : 2 000 jetons",'
        r'"run_id":"run-1","sequence":7}',
    ),
    (
        "proposal",
        e.ProposalMade(
            proposal_id="p-1",
            page_id="pg-1",
            page_title="Procédures",
            summary="Ajoute l'étape « vérifier »",
            unified_diff="--- a\n+++ b\n@@ -1 +1 @@\n-ancien\n+nouveau\n",
        ),
        r'{"proposal_id":"p-1","page_id":"pg-1","page_title":"Proc\u00e9dures",'
        r""""summary":"Ajoute l'\u00e9tape \u00ab v\u00e9rifier \u00bb","""
        r'"unified_diff":"--- a\n+++ b\n@@ -1 +1 @@\n-ancien\n+nouveau\n","run_id":"run-1","sequence":8}',
    ),
    (
        "action",
        e.ActionTaken(
            tool="save_note",
            family="memory",
            status="ok",
            call_id="call-1",
            arguments='{"title": "Fenêtre"}',
            result="<tool_result>noté</tool_result>",
        ),
        r'{"tool":"save_note","family":"memory","status":"ok","call_id":"call-1",'
        r'"arguments":"{\"title\": \"Fen\u00eatre\"}","result":"<tool_result>not\u00e9</tool_result>",'
        r'"run_id":"run-1","sequence":9}',
    ),
    (
        "reasoning",
        e.Reasoning(text="Je compare les deux réunions…"),
        r'{"text":"Je compare les deux r\u00e9unions\u2026","run_id":"run-1","sequence":10}',
    ),
    (
        "live_state",
        e.LiveStateChanged(
            type=memory_pb2.LIVE_STATE_EVENT_TYPE_SET,
            entries=[
                memory_pb2.LiveStateEntry(
                    project_id="p-1",
                    agent_id="qa",
                    activity="relit la PR « 12 »",
                    update_time=Timestamp(seconds=1_777_887_000),
                    expire_time=Timestamp(seconds=1_777_890_600),
                )
            ],
        ),
        r'{"type":"set","entries":[{"project_id":"p-1","agent_id":"qa",'
        r'"activity":"relit la PR \u00ab 12 \u00bb","update_time":"2026-05-04T09:30:00Z",'
        r'"expire_time":"2026-05-04T10:30:00Z","detail":""}],"run_id":"run-1","sequence":11}',
    ),
]


def run_event(sequence: int, kind: str, fields: Any) -> e.RunEvent:
    event = e.RunEvent(run_id=RUN, sequence=sequence, **{kind: fields})
    event.create_time.FromSeconds(1_790_000_000)  # never part of the data
    return event


def test_every_kind_of_event_is_covered() -> None:
    kinds = {field.name for field in e.RunEvent.DESCRIPTOR.oneofs_by_name["kind"].fields}
    assert kinds == {kind for kind, _, _ in CASES}


@pytest.mark.parametrize(("sequence", "case"), list(enumerate(CASES, start=1)), ids=[c[0] for c in CASES])
def test_the_relayed_json_is_the_data_the_gateway_encoded(sequence: int, case: tuple[str, Any, str]) -> None:
    kind, fields, data = case
    event = run_event(sequence, kind, fields)
    engine_json = StreamedEvent(event).json
    assert engine_json == data
    expected = {"id": str(sequence), "event": kind, "data": data}
    assert to_sse(event, engine_json) == expected  # a current engine's JSON, relayed
    assert to_sse(event) == expected  # an older engine's event, encoded by the gateway


def test_an_event_of_a_kind_this_side_does_not_know_has_only_its_place() -> None:
    event = e.RunEvent(run_id=RUN, sequence=11)  # a newer engine's kind reads as none
    assert StreamedEvent(event).json == '{"run_id":"run-1","sequence":11}'
    assert to_sse(event) == {"id": "11", "event": "unknown", "data": '{"run_id":"run-1","sequence":11}'}


def test_the_gateway_relays_the_engine_json_as_it_is() -> None:
    """Whatever the engine sent is the data: the gateway does not encode again."""
    event = run_event(4, "delta", e.Delta(text="Bonjour"))
    assert to_sse(event, '{"text":"Bonjour","sent":"by the engine"}')["data"] == (
        '{"text":"Bonjour","sent":"by the engine"}'
    )


async def test_the_followers_of_a_live_run_share_one_encoding_of_each_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    encoded: list[int] = []

    def counting(event: e.RunEvent) -> str:
        encoded.append(event.sequence)
        return f"json of {event.sequence}"

    monkeypatch.setattr(feed_module, "event_json", counting)
    feed = RunFeed()
    await feed.publish(run_event(1, "run_started", e.RunStarted(conversation_id="conv-1")))
    assert encoded == []  # an event no stream has sent is not encoded

    async def follow(after: int) -> list[str]:
        return [streamed.json async for streamed in feed.follow(after)]

    following = asyncio.gather(follow(0), follow(1))
    await asyncio.sleep(0)  # both wait for the run's next events
    await feed.publish(run_event(2, "delta", e.Delta(text="Bonjour, ")))
    await feed.publish(run_event(3, "final", e.Final(text="Bonjour, Alice")), last=True)
    first, second = await asyncio.wait_for(following, 5)
    late = await follow(0)  # after the run's end
    assert first == late == ["json of 1", "json of 2", "json of 3"]
    assert second == ["json of 2", "json of 3"]
    assert all(a is b for a, b in zip(late, first, strict=True)) and second[0] is first[1]
    assert encoded == [1, 2, 3]


class FinishedRun:
    """A finished run's WatchRun stream: each event with the engine's JSON of
    it, or without, as an engine older than ``event_json`` sends them."""

    def __init__(self, after: int, with_json: bool) -> None:
        events = [run_event(n, kind, fields) for n, (kind, fields, _) in enumerate(CASES, start=1)]
        self.responses = [
            engine_service_pb2.WatchRunResponse(
                event=event, event_json=event_json(event) if with_json else ""
            )
            for event in events
            if event.sequence > after
        ]

    async def read(self) -> Any:
        return self.responses.pop(0) if self.responses else grpc.aio.EOF

    def cancel(self) -> bool:
        return True


class Engine:
    def __init__(self, with_json: bool) -> None:
        self.with_json = with_json

    def WatchRun(self, request: engine_service_pb2.WatchRunRequest, **_: Any) -> FinishedRun:  # noqa: N802
        return FinishedRun(request.after_sequence, self.with_json)


async def sse_body(engine: Engine) -> str:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app_with(engine)), base_url="http://t"
    ) as client:
        response = await client.get("/api/agent/runs/run-1/events")
    assert response.status_code == 200, response.text
    return response.text


async def test_a_current_and_an_older_engine_give_clients_the_same_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    older = await sse_body(Engine(with_json=False))

    def encode_again(event: e.RunEvent) -> str:
        raise AssertionError(f"the gateway encoded event {event.sequence}, which the engine had encoded")

    monkeypatch.setattr(gateway.events, "event_json", encode_again)
    current = await sse_body(Engine(with_json=True))
    assert current == older
    data = [line.removeprefix("data: ") for line in current.splitlines() if line.startswith("data: ")]
    assert data == [json for _, _, json in CASES]
