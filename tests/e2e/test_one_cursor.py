"""One log, one cursor: a run read through every protocol Switchboard
speaks (its own SSE, AG-UI with @ag-ui/client, Open Responses with the
`openai` SDK, A2A with the a2a-sdk client and the resume-cursor extension),
each connection dropped at the same piece of the answer and resumed from
its cursor. Each protocol then gives the rest of the answer: the same
pieces, none lost, none twice. An AG-UI run is a chat run and an A2A task
an agent's ask, so A2A is proven on an ask read by the three others that
can read it."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import openai
from a2a.types import a2a_pb2

from gateway.a2a.tasks import CURSOR_EXTENSION
from tests.e2e.conftest import Launched, recording_env, shared_recording
from tests.e2e.conftest import script_answers as script
from tests.e2e.sse import read_events
from tests.e2e.test_a2a import auth, chunks, client_of, cursor, user_message
from tests.e2e.test_agui import run_client

RECORDING = shared_recording()
LAUNCH_ENV = recording_env(f"{RECORDING.url}/v1")
ANSWER = "Le déploiement a lieu le mardi, de neuf à onze heures, après la revue de code."
CUT = 3  # the connection drops after this many pieces of the answer


def native(http: httpx.Client, run_id: str, after: str = "") -> list[tuple[str, dict[str, Any]]]:
    headers = {"Last-Event-ID": after} if after else {}
    with http.stream("GET", f"/api/agent/runs/{run_id}/events", headers=headers) as response:
        assert response.status_code == 200, response.read()
        return [(event.event, {**event.data, "id": event.id}) for event in read_events(response)]


def pieces(events: list[tuple[str, dict[str, Any]]]) -> list[str]:
    return [data["text"] for kind, data in events if kind == "delta"]


def responses_after(launched: Launched, run_id: str, answer: list[str]) -> list[str]:
    """Open Responses: the run as a response, resumed after the event of the CUT-th piece."""
    with openai.OpenAI(base_url=f"{launched.url}/v1", api_key=launched.token(), max_retries=0) as sdk:
        response_id = f"resp_{run_id}"
        deltas = [
            e
            for e in sdk.responses.retrieve(response_id, stream=True)
            if e.type == "response.output_text.delta"
        ]
        assert [e.delta for e in deltas] == answer
        after = deltas[CUT - 1].sequence_number
        return [
            e.delta
            for e in sdk.responses.retrieve(response_id, stream=True, starting_after=after)
            if e.type == "response.output_text.delta"
        ]


def test_every_protocol_resumes_one_run_at_the_same_piece(launched: Launched) -> None:
    script(f"slow:0.05:{ANSWER}")  # a word every 50 ms: the engine streams several pieces
    thread, agui_run = f"thread-{uuid.uuid4()}", f"run-{uuid.uuid4()}"
    options = {"threadId": thread, "runId": agui_run, "message": "Quand a lieu le déploiement ?"}
    started = run_client(launched, **options, forwardedProps={"model": "recorded"})
    run_id = started["events"][-1]["result"]["switchboard_run_id"]

    with launched.client() as http:
        # Switchboard's own SSE: every run event, its sequence as its id.
        whole = native(http, run_id)
        answer = pieces(whole)
        assert "".join(answer) == ANSWER and len(answer) > CUT
        cut_sequence = [data["id"] for kind, data in whole if kind == "delta"][CUT - 1]
        rest_native = pieces(native(http, run_id, after=cut_sequence))

    # AG-UI: the same run (its run id is the key), resumed after the run event's sequence.
    rest_agui = run_client(
        launched, **options, forwardedProps={"model": "recorded"}, lastEventId=cut_sequence
    )
    rest_agui_pieces = [e["delta"] for e in rest_agui["events"] if e["type"] == "TEXT_MESSAGE_CONTENT"]

    rest_responses = responses_after(launched, run_id, answer)

    expected = answer[CUT:]
    assert rest_native == rest_agui_pieces == rest_responses == expected, json.dumps(
        {"native": rest_native, "agui": rest_agui_pieces, "responses": rest_responses}, ensure_ascii=False
    )


async def test_an_a2a_task_resumes_at_the_same_piece_as_the_other_protocols(launched: Launched) -> None:
    script(f"slow:0.05:{ANSWER}")
    agent = f"cursor-{uuid.uuid4().hex[:8]}"
    with launched.client() as http:
        made = http.post("/api/agent/agents", json={"id": agent, "model": "recorded"})
        assert made.status_code == 201, made.text
    with_extension = auth(launched, "alice", CURSOR_EXTENSION)
    async with client_of(launched, agent, "JSONRPC") as client:
        # A2A: the task streamed, the connection dropped after CUT pieces.
        seen: list[a2a_pb2.StreamResponse] = []
        stream = client.send_message(user_message("Quand a lieu le déploiement ?"), context=with_extension)
        async for event in stream:
            seen.append(event)
            if len(chunks(seen)) == CUT:
                break
        await stream.aclose()  # type: ignore[attr-defined]
        run_id, cut_sequence = seen[0].task.id, cursor(seen[-1])
        resumed = auth(launched, "alice", CURSOR_EXTENSION, cursor=cut_sequence)
        request = a2a_pb2.SubscribeToTaskRequest(id=run_id)
        rest_a2a = chunks([e async for e in client.subscribe(request, context=resumed)])

    with launched.client() as http:
        whole = native(http, run_id)
        answer = pieces(whole)
        # The A2A cursor is the run event's sequence, the native stream's event id.
        assert [data["id"] for kind, data in whole if kind == "delta"][CUT - 1] == cut_sequence
        rest_native = pieces(native(http, run_id, after=cut_sequence))
    rest_responses = responses_after(launched, run_id, answer)

    assert "".join(answer) == ANSWER and chunks(seen) == answer[:CUT]
    assert rest_a2a == rest_native == rest_responses == answer[CUT:], json.dumps(
        {"a2a": rest_a2a, "native": rest_native, "responses": rest_responses}, ensure_ascii=False
    )
