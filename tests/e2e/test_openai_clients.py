"""The OpenAI-compatible endpoint as its clients meet it: the official
`openai` SDK against the five real processes, streamed and not, several
turns, an agent model, the messages a real-wire model receives, and the
refusals a client gets (in OpenAI's error shape, never a 5xx)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.engine.instructions import CLIENT_HEADING, TITLE_SYSTEMS
from tests.e2e.conftest import Launched, recording_env, shared_recording

# A recording OpenAI-compatible server beside the offline models; a request
# names it as the model `recorded`.
RECORDING = shared_recording()
LAUNCH_ENV = recording_env(f"{RECORDING.url}/v1")
CONVERSATION = "X-Switchboard-Conversation"
RUN = "X-Switchboard-Run"


@pytest.fixture
def client(launched: Launched) -> Iterator[openai.OpenAI]:
    # No retries: a test sees the first answer, as the gateway sent it.
    with openai.OpenAI(base_url=f"{launched.url}/v1", api_key=launched.token(), max_retries=0) as sdk:
        yield sdk


@pytest.fixture
def http(launched: Launched) -> Iterator[httpx.Client]:
    with launched.client("alice") as session:
        yield session


def run_record(http: httpx.Client, run_id: str) -> dict[str, Any]:
    response = http.get(f"/api/agent/runs/{run_id}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def layer(record: dict[str, Any], key: str) -> dict[str, Any]:
    return next(dict(item) for item in record["layers"] if item["key"] == key)


def entries(http: httpx.Client, conversation_id: str) -> list[tuple[str, str]]:
    response = http.get(f"/api/agent/conversations/{conversation_id}/entries")
    assert response.status_code == 200, response.text
    return [(e["role"], e["content"]) for e in response.json()["entries"]]


def streamed(
    client: openai.OpenAI, messages: list[dict[str, str]], model: str = "auto", **headers: str
) -> tuple[str, Any, dict[str, str]]:
    """(text, usage, response headers) of a streamed completion."""
    raw = client.chat.completions.with_raw_response.create(
        model=model,
        messages=messages,  # type: ignore[arg-type]
        stream=True,
        stream_options={"include_usage": True},
        extra_headers=headers,
    )
    text, usage = "", None
    for chunk in raw.parse():
        assert chunk.object == "chat.completion.chunk"
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
        if chunk.usage is not None:
            usage = chunk.usage
    return text, usage, dict(raw.headers)


def model_requests() -> list[dict[str, Any]]:
    """What the recording model received, titles aside."""
    return [r for r in RECORDING.script.requests if r["messages"][0]["content"] not in TITLE_SYSTEMS.values()]


def scripted(*answers: str) -> None:
    """The recording model's answers in order; a title request (after a
    conversation's first exchange, at any time) gets a title."""
    queue = list(answers)

    def answer(body: dict[str, Any]) -> str:
        return "say:Titre" if body["messages"][0]["content"] in TITLE_SYSTEMS.values() else queue.pop(0)

    RECORDING.script.steps = [answer] * (2 * len(answers))


def test_models_are_auto_the_configured_ones_and_the_agents(
    client: openai.OpenAI, http: httpx.Client
) -> None:
    created = http.post("/api/agent/agents", json={"id": "reviewer-oa", "display_name": "Reviewer"})
    assert created.status_code == 201, created.text
    ids = [model.id for model in client.models.list()]
    assert ids[:5] == ["auto", "offline-fast", "offline-balanced", "offline-strong", "recorded"]
    assert "agent:reviewer-oa" in ids


def test_a_completion_carries_the_runs_real_usage_and_ids(client: openai.OpenAI, http: httpx.Client) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "Summarise the release checklist in one line"}]
    )
    completion = raw.parse()
    assert completion.object == "chat.completion" and completion.choices[0].finish_reason == "stop"
    answer = completion.choices[0].message.content
    assert answer and completion.choices[0].message.role == "assistant"
    run_id, conversation_id = raw.headers[RUN], raw.headers[CONVERSATION]
    record = run_record(http, run_id)
    assert record["status"] == "done" and record["conversation_id"] == conversation_id
    assert completion.usage is not None and completion.usage.prompt_tokens > 0
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (
        record["tokens_in"],
        record["tokens_out"],
    )
    assert completion.usage.total_tokens == record["tokens_in"] + record["tokens_out"]
    assert entries(http, conversation_id) == [
        ("user", "Summarise the release checklist in one line"),
        ("assistant", answer),
    ]


def test_a_streamed_exchange_of_two_turns_keeps_one_history(
    client: openai.OpenAI, http: httpx.Client
) -> None:
    """The client resends the whole history on its second turn, as chat
    clients do: the conversation holds each turn once, and the second run's
    history layer holds the first turn."""
    first = {"role": "user", "content": "Quand est le déploiement ?"}
    text, usage, headers = streamed(client, [first])
    assert text and usage is not None and usage.total_tokens > 0
    conversation_id = headers[CONVERSATION.lower()]
    record = run_record(http, headers[RUN.lower()])
    assert (usage.prompt_tokens, usage.completion_tokens) == (record["tokens_in"], record["tokens_out"])

    second = {"role": "user", "content": "Et la revue, c'est quand ?"}
    history = [first, {"role": "assistant", "content": text}, second]
    answer, _, again = streamed(client, history, **{CONVERSATION: conversation_id})
    assert answer and again[CONVERSATION.lower()] == conversation_id
    record = run_record(http, again[RUN.lower()])
    assert layer(record, "history")["present"] and layer(record, "history")["item_count"] == 1
    assert entries(http, conversation_id) == [
        ("user", first["content"]),
        ("assistant", text),
        ("user", second["content"]),
        ("assistant", answer),
    ]


def test_a_real_model_gets_each_earlier_turn_once_and_the_clients_instructions(
    client: openai.OpenAI,
) -> None:
    scripted("say:Le déploiement est mardi à midi.", "say:Mardi.")
    system = {"role": "system", "content": "Réponds en français, en une phrase."}
    first = {"role": "user", "content": "When is the deploy?"}
    raw = client.chat.completions.with_raw_response.create(model="recorded", messages=[system, first])  # type: ignore[list-item]
    answer = raw.parse().choices[0].message.content
    assert answer == "Le déploiement est mardi à midi."
    second = {"role": "user", "content": "Tu peux répéter le jour ?"}
    text, _, _ = streamed(
        client,
        [system, first, {"role": "assistant", "content": answer}, second],
        model="recorded",
        **{CONVERSATION: raw.headers[CONVERSATION]},
    )
    assert text == "Mardi."
    received = model_requests()[-1]["messages"]
    assert received[0]["role"] == "system"
    assert f"{CLIENT_HEADING}\nRéponds en français, en une phrase." in received[0]["content"]
    assert [(m["role"], m["content"]) for m in received[1:]] == [
        ("user", "When is the deploy?"),
        ("assistant", "Le déploiement est mardi à midi."),
        ("user", "Tu peux répéter le jour ?"),
    ]


def test_a_new_conversation_starts_from_the_history_the_client_sent(
    client: openai.OpenAI, http: httpx.Client
) -> None:
    """Without the conversation header, the client's earlier turns seed the
    new conversation: the model gets them once, before the new message."""
    scripted("say:Yes, on Tuesday.")
    history = [
        {"role": "assistant", "content": "Bonjour ! Que puis-je faire ?"},
        {"role": "user", "content": "Is the freeze still on?"},
        {"role": "assistant", "content": "It is, until Monday."},
        {"role": "user", "content": "Does the deploy happen after it?"},
    ]
    raw = client.chat.completions.with_raw_response.create(model="recorded", messages=history)  # type: ignore[arg-type]
    assert raw.parse().choices[0].message.content == "Yes, on Tuesday."
    received = model_requests()[-1]["messages"]
    assert [(m["role"], m["content"]) for m in received[1:]] == [(m["role"], m["content"]) for m in history]
    record = run_record(http, raw.headers[RUN])
    assert layer(record, "history")["item_count"] == 2
    assert len(entries(http, raw.headers[CONVERSATION])) == 5


def test_a_history_that_disagrees_with_the_stored_one_is_refused(
    client: openai.OpenAI, http: httpx.Client
) -> None:
    first = {"role": "user", "content": "Name the release manager"}
    raw = client.chat.completions.with_raw_response.create(model="auto", messages=[first])  # type: ignore[list-item]
    answer = raw.parse().choices[0].message.content or ""
    conversation_id = raw.headers[CONVERSATION]
    before = entries(http, conversation_id)
    edited = [
        {"role": "user", "content": "Name the QA lead"},
        {"role": "assistant", "content": answer},
        {"role": "user", "content": "And their deputy?"},
    ]
    with pytest.raises(openai.ConflictError) as refused:
        client.chat.completions.create(
            model="auto",
            messages=edited,  # type: ignore[arg-type]
            extra_headers={CONVERSATION: conversation_id},
        )
    error = refused.value.body
    assert isinstance(error, dict) and error["code"] == "conversation_history_mismatch"
    assert error["type"] == "conflict_error" and error["param"] == "messages"
    assert refused.value.response.headers["x-should-retry"] == "false"
    assert entries(http, conversation_id) == before  # nothing posted

    # Only the new message, or the stored history as it is: both accepted.
    only_new = client.chat.completions.create(
        model="auto",
        messages=[{"role": "user", "content": "Et son adjoint ?"}],
        extra_headers={CONVERSATION: conversation_id},
    )
    assert only_new.choices[0].message.content
    assert len(entries(http, conversation_id)) == 4


def test_an_agent_model_asks_the_agent_on_its_shared_thread(
    client: openai.OpenAI, http: httpx.Client
) -> None:
    http.post("/api/agent/agents", json={"id": "qa-oa", "display_name": "QA", "persona": "Tester"})
    raw = client.chat.completions.with_raw_response.create(
        model="agent:qa-oa",
        messages=[
            {"role": "system", "content": "Answer as a checklist."},
            {"role": "user", "content": "Is the release ready?"},
        ],
    )
    completion = raw.parse()
    assert completion.choices[0].message.content and CONVERSATION not in raw.headers
    record = run_record(http, raw.headers[RUN])
    assert record["agent_id"] == "qa-oa" and record["surface"] == "agent"
    assert layer(record, "client_instructions")["present"]
    thread = http.get("/api/agent/agents/qa-oa/entries").json()["entries"]
    assert ("user", "Is the release ready?") in {(e["role"], e["content"]) for e in thread}

    text, usage, headers = streamed(
        client, [{"role": "user", "content": "Et les tests ?"}], model="agent:qa-oa"
    )
    assert text and usage is not None and run_record(http, headers[RUN.lower()])["agent_id"] == "qa-oa"


def test_another_users_conversation_is_not_found(launched: Launched, client: openai.OpenAI) -> None:
    theirs = client.chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "Private note"}]
    ).headers[CONVERSATION]
    with openai.OpenAI(base_url=f"{launched.url}/v1", api_key="token-bob", max_retries=0) as bob:
        with pytest.raises(openai.NotFoundError) as missing:
            bob.chat.completions.create(
                model="auto",
                messages=[{"role": "user", "content": "Show me"}],
                extra_headers={CONVERSATION: theirs},
            )
    assert isinstance(missing.value.body, dict) and missing.value.body["type"] == "not_found_error"
    with openai.OpenAI(base_url=f"{launched.url}/v1", api_key="not-a-token", max_retries=0) as nobody:
        with pytest.raises(openai.AuthenticationError):
            nobody.models.list()


USER = {"role": "user", "content": "hello"}
REFUSALS = [
    # (body, headers, status, param)
    ({"model": "auto"}, {}, 400, "messages"),
    ({"model": "auto", "messages": []}, {}, 400, "messages"),
    ({"model": "auto", "messages": "hello"}, {}, 400, "messages"),
    ({"model": 5, "messages": [USER]}, {}, 400, "model"),
    ({"messages": [USER]}, {}, 400, "model"),
    ({"model": "auto", "messages": [USER], "stream": "sometimes"}, {}, 400, "stream"),
    ({"model": "auto", "messages": [{"role": "user", "content": 12}]}, {}, 400, "messages[0].content"),
    ({"model": "auto", "messages": [{"role": "robot", "content": "hi"}]}, {}, 400, "messages[0].role"),
    ({"model": "auto", "messages": [{"content": "hi"}]}, {}, 400, "messages[0].role"),
    (
        {"model": "auto", "messages": [USER, {"role": "assistant", "content": "hi"}]},
        {},
        400,
        "messages[1].role",
    ),
    ({"model": "auto", "messages": [{"role": "system", "content": "Be brief"}]}, {}, 400, "messages[0].role"),
    ({"model": "auto", "messages": [{"role": "user", "content": " "}]}, {}, 400, "messages"),
    (
        {
            "model": "auto",
            "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}],
        },
        {},
        400,
        "messages[0].content[0]",
    ),
    (
        {"model": "auto", "messages": [{"role": "tool", "content": "42", "tool_call_id": "c"}, USER]},
        {},
        400,
        None,
    ),
    ({"model": "auto", "messages": [USER], "tools": [{"type": "function"}]}, {}, 400, "tools"),
    ({"model": "auto", "messages": [USER], "n": 2}, {}, 400, "n"),
    ({"model": "gpt-imaginary", "messages": [USER]}, {}, 400, "model"),
    ({"model": "auto", "messages": [{"role": "user", "content": "x" * 32_001}]}, {}, 413, "messages"),
    (
        {"model": "auto", "messages": [{"role": "system", "content": "y" * 32_001}, USER]},
        {},
        413,
        "messages",
    ),
    (
        {"model": "auto", "messages": [USER]},
        {CONVERSATION: "00000000-0000-4000-8000-000000000000"},
        404,
        None,
    ),
    ({"model": "agent:nobody-oa", "messages": [USER]}, {}, 404, None),
    ({"model": "agent:qa-oa", "messages": [USER]}, {CONVERSATION: "any"}, 400, CONVERSATION),
]


@pytest.mark.parametrize(("body", "headers", "status", "param"), REFUSALS)
def test_client_mistakes_are_4xx_in_openais_error_shape(
    http: httpx.Client, body: dict[str, Any], headers: dict[str, str], status: int, param: str | None
) -> None:
    response = http.post("/v1/chat/completions", json=body, headers=headers)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"] and error["code"]
    if param is not None:
        assert error["param"] == param, error
    assert response.headers["x-should-retry"] == "false"


def test_a_body_past_the_size_limit_and_unknown_routes_answer_in_openais_shape(http: httpx.Client) -> None:
    huge = {"model": "auto", "messages": [{"role": "user", "content": "z" * 300_000}]}
    response = http.post("/v1/chat/completions", json=huge)
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "invalid_request_error"
    response = http.post("/v1/embeddings", json={"model": "auto", "input": "hi"})
    assert response.status_code == 404 and response.json()["error"]["code"] == "unknown_url"


@settings(max_examples=40, derandomize=True, database=None, deadline=None)
@given(
    value=st.one_of(
        # What HTTP lets a header hold (DEL and controls are the HTTP server's to refuse).
        st.text(
            st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"), max_size=200
        ),
        st.sampled_from(
            ["", " ", "..", "../../etc", "%00", "00000000-0000-4000-8000-00000000000Z", "x" * 129]
        ),
    )
)
def test_any_conversation_header_is_refused_or_served_never_500(launched: Launched, value: str) -> None:
    with launched.client("alice") as session:
        response = session.post(
            "/v1/chat/completions",
            json={"model": "auto", "messages": [USER]},
            headers={CONVERSATION: value.strip().encode("latin-1")},
        )
    if not value.strip():
        # No conversation named: a new one, and a run.
        assert response.status_code == 200 and response.headers[CONVERSATION], response.text
        return
    assert response.status_code in (400, 404), response.text
    assert set(response.json()["error"]) == {"message", "type", "param", "code"}


def test_a_run_that_fails_after_it_started_is_an_upstream_error(
    client: openai.OpenAI, http: httpx.Client
) -> None:
    """The model's provider refuses the request: not the client's mistake,
    a 502 (not retried) naming the failed run; streamed, an error event the
    SDK raises."""
    scripted("status:400")
    with pytest.raises(openai.APIStatusError) as failed:
        client.chat.completions.create(model="recorded", messages=[{"role": "user", "content": "Résume"}])
    assert failed.value.status_code == 502 and failed.value.response.headers["x-should-retry"] == "false"
    assert isinstance(failed.value.body, dict) and failed.value.body["code"] == "dependency_unavailable"
    assert failed.value.body["type"] == "server_error"
    assert run_record(http, failed.value.response.headers[RUN])["status"] == "failed"

    scripted("status:400")
    stream = client.chat.completions.create(
        model="recorded", messages=[{"role": "user", "content": "Summarise"}], stream=True
    )
    with pytest.raises(openai.APIError, match="recording"):
        for _ in stream:
            pass
