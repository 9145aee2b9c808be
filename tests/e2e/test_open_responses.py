"""Open Responses as its clients meet it: the official `openai` SDK's
`responses` calls against the five real processes, with the recording
real-wire model: streamed and not, in French and English, several turns by
`previous_response_id`, a tool call as an output item, a background
response resumed from `starting_after` with no gap and no duplicate, and a
cancel."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.e2e.conftest import Launched, model_requests, recording_env, shared_recording
from tests.e2e.conftest import script_answers as script
from tests.fakes.llm_server import ANSWER, INPUT_TOKENS
from tests.gateway_routes import OPENAI_MATRIX

RECORDING = shared_recording()
LAUNCH_ENV = recording_env(f"{RECORDING.url}/v1")
CASES = {
    "en": ("What is the deploy window?", "Tuesdays, nine to eleven."),
    "fr": ("Quelle est la fenêtre de déploiement ?", "Le mardi, de neuf à onze heures."),
}


@pytest.fixture
def client(launched: Launched) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{launched.url}/v1", api_key=launched.token(), max_retries=0) as sdk:
        yield sdk


def run_record(launched: Launched, response_id: str) -> dict[str, Any]:
    with launched.client() as http:
        found = http.get(f"/api/agent/runs/{response_id.removeprefix('resp_')}")
        assert found.status_code == 200, found.text
        return dict(found.json())


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_a_streamed_response_is_typed_events_and_the_model_receives_the_input(
    client: openai.OpenAI, launched: Launched, lang: str
) -> None:
    question, answer = CASES[lang]
    script(f"say:{answer}")
    events = list(client.responses.create(model="recorded", input=question, stream=True))
    kinds = [event.type for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == answer
    done = events[-1].response
    assert done.status == "completed" and done.output_text == answer
    assert done.output[0].type == "message" and done.output[0].content[0].text == answer
    # The run's real tokens, as the provider counted them.
    assert done.usage is not None and done.usage.input_tokens == INPUT_TOKENS
    assert run_record(launched, done.id)["tokens_in"] == INPUT_TOKENS
    [received] = model_requests()
    assert received["model"] == "model-x" and received["messages"][-1] == {
        "role": "user",
        "content": question,
    }


def test_a_whole_response_then_a_second_turn_by_previous_response_id(client: openai.OpenAI) -> None:
    question, answer = CASES["fr"]
    script(f"say:{answer}", "say:Oui, sauf les jours fériés.")
    first = client.responses.create(
        model="recorded", input=question, instructions="Réponds en français, brièvement."
    )
    assert first.status == "completed" and first.output_text == answer
    second = client.responses.create(
        model="recorded", input="Même les jours fériés ?", previous_response_id=first.id
    )
    assert second.output_text == "Oui, sauf les jours fériés." and second.previous_response_id == first.id
    assert second.metadata is not None and first.metadata is not None
    assert second.metadata["conversation_id"] == first.metadata["conversation_id"]
    # The second turn's model call carries the first exchange as history.
    messages = model_requests()[-1]["messages"]
    assert {"role": "user", "content": question} in messages
    assert {"role": "assistant", "content": answer} in messages
    assert messages[-1] == {"role": "user", "content": "Même les jours fériés ?"}

    # Instructions are the request's own: not carried to the next turn (as in OpenAI's API).
    def system(request: dict[str, Any]) -> str:
        return " ".join(m["content"] for m in request["messages"] if m["role"] == "system")

    first_call, second_call = model_requests()
    assert "Réponds en français, brièvement." in system(first_call)
    assert "Réponds en français, brièvement." not in system(second_call)


def test_a_tool_call_is_a_function_call_output_item(client: openai.OpenAI) -> None:
    note = {"kind": "decision", "title": "Deploy window", "body": "Tuesdays 9-11", "reason": "lasting"}
    script(f"tool:save_note:{json.dumps(note)}", "say:Noted.")
    response = client.responses.create(
        model="recorded", input="We decided: the deploy window is Tuesdays 9-11."
    )
    calls = [item for item in response.output if item.type == "function_call"]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("save_note", note)]
    tool_message = model_requests()[-1]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == calls[0].call_id
    assert response.output_text == "Noted."


def test_a_background_response_streams_again_from_starting_after(
    client: openai.OpenAI, launched: Launched
) -> None:
    script("slow:0.05")
    started = client.responses.create(model="recorded", input="Describe the release.", background=True)
    assert started.status == "in_progress" and started.background
    whole = list(client.responses.retrieve(started.id, stream=True))
    assert whole[-1].type == "response.completed"
    assert "".join(e.delta for e in whole if e.type == "response.output_text.delta") == ANSWER
    cut = next(e.sequence_number for e in whole if e.type == "response.output_text.delta") + 2
    rest = list(client.responses.retrieve(started.id, stream=True, starting_after=cut))
    assert [e.sequence_number for e in rest] == list(range(cut + 1, len(whole)))
    assert [e.model_dump() for e in rest] == [e.model_dump() for e in whole[cut + 1 :]]
    again = client.responses.retrieve(started.id)
    assert again.status == "completed" and again.output_text == ANSWER


def test_cancelling_a_background_response_cancels_its_run(client: openai.OpenAI, launched: Launched) -> None:
    script("slow:0.5")
    started = client.responses.create(model="recorded", input="Write a long report.", background=True)
    client.responses.cancel(started.id)
    deadline = time.monotonic() + 30
    while (status := client.responses.retrieve(started.id).status) == "in_progress":
        assert time.monotonic() < deadline, "the run did not stop"
        time.sleep(0.1)
    assert status == "cancelled"
    assert run_record(launched, started.id)["status"] == "cancelled"


def test_refusals_are_in_openais_shape(client: openai.OpenAI, launched: Launched) -> None:
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve("resp_no-such-run")
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="recorded", input=[{"role": "assistant", "content": "Hi"}])
    assert refused.value.code == "invalid_request"
    with pytest.raises(openai.BadRequestError) as unknown:
        client.responses.create(model="no-such-model", input="Hello")
    assert unknown.value.code == "model_not_found"
    # Another user's response is theirs: 404, as a missing one.
    script("say:Mine.")
    mine = client.responses.create(model="recorded", input="Hello")
    with httpx.Client(base_url=f"{launched.url}/v1", headers=launched.headers("bob")) as bob:
        assert bob.get(f"/responses/{mine.id}").status_code == 404


RESPONSE_ROWS = [row for row in OPENAI_MATRIX if "{r}" in row[1]]


@pytest.mark.parametrize("row", RESPONSE_ROWS, ids=[f"{row[0]} {row[1]}" for row in RESPONSE_ROWS])
def test_another_users_response_is_404_exactly_as_a_missing_one(
    client: openai.OpenAI, launched: Launched, row: tuple[Any, ...]
) -> None:
    method, template, _ = row
    script("say:Mine.")
    mine = client.responses.create(model="recorded", input="Hello")
    missing = "00000000-0000-4000-8000-000000000000"
    run_id = mine.id.removeprefix("resp_")
    with httpx.Client(base_url=launched.url, headers=launched.headers("bob"), timeout=30) as bob:
        theirs = bob.request(method, template.format(r=run_id))
        nobody = bob.request(method, template.format(r=missing))
    assert theirs.status_code == nobody.status_code == 404, (theirs.text, nobody.text)
    shape, other = theirs.json()["error"], nobody.json()["error"]
    assert (shape["type"], shape["code"]) == (other["type"], other["code"])
    assert shape["message"].replace(run_id, "ID") == other["message"].replace(missing, "ID")
    # Alice's response is untouched by bob's attempts.
    assert client.responses.retrieve(mine.id).status == "completed"


def test_an_agent_model_asks_the_agent_on_its_shared_thread(
    client: openai.OpenAI, launched: Launched
) -> None:
    agent = f"reviewer-or-{launched.namespace}"
    with launched.client() as http:
        made = http.post(
            "/api/agent/agents", json={"id": agent, "display_name": "Relecteur", "model": "recorded"}
        )
        assert made.status_code == 201, made.text
    script("say:Relu, rien à signaler.")
    response = client.responses.create(model=f"agent:{agent}", input="Peux-tu relire la note de version ?")
    assert response.status == "completed" and response.output_text == "Relu, rien à signaler."
    with launched.client() as http:
        thread = http.get(f"/api/agent/agents/{agent}/entries").json()["entries"]
    assert [e["content"] for e in thread][-2:] == [
        "Peux-tu relire la note de version ?",
        "Relu, rien à signaler.",
    ]
