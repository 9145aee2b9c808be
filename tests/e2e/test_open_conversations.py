"""OpenAI's conversations as their clients meet them: the official `openai`
SDK's `conversations` calls against the real processes (the launched system
of test_open_responses.py, with the recording real-wire model): items kept
and paged, a response that continues a conversation and whose model gets
exactly its earlier turns, in French and English; what a conversation
cannot do refused in OpenAI's shape; another user's conversation 404."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.e2e.conftest import Launched, model_requests, recording_env, shared_recording
from tests.e2e.conftest import script_answers as script
from tests.gateway_routes import OPENAI_MATRIX

RECORDING = shared_recording()
LAUNCH_ENV = recording_env(f"{RECORDING.url}/v1")
MISSING = "00000000-0000-4000-8000-000000000000"
TURNS = {
    "en": ["Who owns the billing service?", "The payments team.", "Since when?", "Since March."],
    "fr": ["Qui gère le service de facturation ?", "L'équipe paiements.", "Depuis quand ?", "Depuis mars."],
}


@pytest.fixture
def client(launched: Launched) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{launched.url}/v1", api_key=launched.token(), max_retries=0) as sdk:
        yield sdk


def said(items: Any) -> list[tuple[str, str]]:
    """(role, text) of message items."""
    return [(i.role, i.content[0].text) for i in items if i.type == "message"]


def dialogue(request: dict[str, Any]) -> list[dict[str, Any]]:
    """What the model received after the instruction layers."""
    return [m for m in request["messages"] if m["role"] != "system"]


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_a_response_continues_a_conversation_and_its_model_gets_the_earlier_turns(
    client: openai.OpenAI, lang: str
) -> None:
    question, answer, follow_up, reply = TURNS[lang]
    conversation = client.conversations.create(
        items=[
            {"type": "message", "role": "user", "content": question},
            {"type": "message", "role": "assistant", "content": answer},
        ],
        metadata={"lang": lang},
    )
    assert conversation.id.startswith("conv_") and conversation.metadata == {"lang": lang}
    script(f"say:{reply}")
    response = client.responses.create(model="recorded", conversation=conversation.id, input=follow_up)
    assert response.output_text == reply
    assert response.conversation is not None and response.conversation.id == conversation.id
    assert dialogue(model_requests()[-1]) == [
        {"role": "user", "content": question},
        {"role": "assistant", "content": answer},
        {"role": "user", "content": follow_up},
    ]
    # The next response's earlier input items join the conversation before its message.
    script("say:OK.")
    client.responses.create(
        model="recorded",
        conversation={"id": conversation.id},
        input=[{"role": "user", "content": "Note."}, {"role": "user", "content": "Merci ?"}],
    )
    assert dialogue(model_requests()[-1])[3:] == [
        {"role": "assistant", "content": reply},
        {"role": "user", "content": "Note."},
        {"role": "user", "content": "Merci ?"},
    ]
    assert said(client.conversations.items.list(conversation.id, order="asc")) == [
        ("user", question),
        ("assistant", answer),
        ("user", follow_up),
        ("assistant", reply),
        ("user", "Note."),
        ("user", "Merci ?"),
        ("assistant", "OK."),
    ]


def test_items_page_either_way_and_a_runs_tool_call_is_an_item(client: openai.OpenAI) -> None:
    texts = [("user", f"question {n}") if n % 2 == 0 else ("assistant", f"réponse {n}") for n in range(5)]
    conversation = client.conversations.create(
        items=[{"type": "message", "role": role, "content": text} for role, text in texts]
    )
    # The SDK's own paging: each page after the last item of the one before.
    assert said(client.conversations.items.list(conversation.id, order="asc", limit=2)) == texts
    newest = client.conversations.items.list(conversation.id, limit=2)
    assert said(newest.data) == texts[::-1][:2] and newest.has_more
    assert said(newest) == texts[::-1]
    second = newest.data[1]
    assert said([client.conversations.items.retrieve(second.id, conversation_id=conversation.id)]) == [
        texts[3]
    ]
    added = client.conversations.items.create(
        conversation.id,
        items=[
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Et ensuite ?"}]}
        ],
    )
    assert said(added.data) == [("user", "Et ensuite ?")]
    note = {"kind": "fact", "title": "Owner", "body": "Payments", "reason": "lasting"}
    script(f"tool:save_note:{json.dumps(note)}", "say:Noté.")
    client.responses.create(
        model="recorded", conversation=conversation.id, input="Le responsable : l'équipe paiements."
    )
    run_items = client.conversations.items.list(conversation.id, limit=4).data[::-1]
    assert [i.type for i in run_items] == ["message", "function_call", "function_call_output", "message"]
    call, output = run_items[1], run_items[2]
    assert (call.name, json.loads(call.arguments)) == ("save_note", note) and output.call_id == call.call_id
    assert said([run_items[0], run_items[3]]) == [
        ("user", "Le responsable : l'équipe paiements."),
        ("assistant", "Noté."),
    ]


def test_metadata_update_delete_and_what_a_conversation_refuses(client: openai.OpenAI) -> None:
    conversation = client.conversations.create(
        items=[{"type": "message", "role": "user", "content": "Bonjour"}]
    )
    updated = client.conversations.update(conversation.id, metadata={"projet": "facturation"})
    assert (
        client.conversations.retrieve(conversation.id).metadata
        == updated.metadata
        == {"projet": "facturation"}
    )
    [item] = client.conversations.items.list(conversation.id).data
    items, cid = client.conversations.items, conversation.id

    def message(role: str, content: Any) -> list[Any]:
        return [{"type": "message", "role": role, "content": content}]

    image = [{"type": "input_image", "image_url": "https://example.com/plan.png"}]
    bad, update, respond = openai.BadRequestError, client.conversations.update, client.responses.create
    too_many = {f"k{n}": "v" for n in range(17)}
    both: Any = {"conversation": cid, "previous_response_id": "resp_a"}
    refusals: list[tuple[type[openai.APIStatusError], str, Any]] = [
        # Append-only: an item stays.
        (bad, "unsupported_operation", lambda: items.delete(item.id, conversation_id=cid)),
        (bad, "unsupported_role", lambda: items.create(cid, items=message("system", "Sois bref."))),
        (bad, "unsupported_content", lambda: items.create(cid, items=message("user", image))),
        (bad, "invalid_request", lambda: items.create(cid, items=[])),
        (bad, "invalid_request", lambda: update(cid, metadata=too_many)),
        (bad, "invalid_argument", lambda: update(cid, metadata={"k" * 65: "v"})),
        (bad, "invalid_request", lambda: items.list(cid, limit=101)),
        (bad, "invalid_request", lambda: respond(model="x", input="Hi", **both)),
        (bad, "invalid_request", lambda: respond(model="recorded", input="Hi", conversation="no-conv")),
        (openai.NotFoundError, "not_found", lambda: items.list(cid, after=f"msg_{MISSING}")),
        (openai.NotFoundError, "not_found", lambda: items.retrieve("fc_nothing", conversation_id=cid)),
        (openai.NotFoundError, "not_found", lambda: client.conversations.retrieve(MISSING)),
    ]  # fmt: skip
    for error, code, call in refusals:
        with pytest.raises(error) as refused:
            call()
        assert refused.value.code == code, refused.value.body
    assert [i.id for i in client.conversations.items.list(conversation.id)] == [item.id]
    deleted = client.conversations.delete(conversation.id)
    assert (deleted.id, deleted.deleted) == (conversation.id, True)
    # Deleted: gone from this API, a response cannot continue it.
    with pytest.raises(openai.NotFoundError):
        client.conversations.retrieve(conversation.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="recorded", input="Encore ?", conversation=conversation.id)


CONVERSATION_ROWS = [row for row in OPENAI_MATRIX if "{c}" in json.dumps(row[1:3])]


def _filled(value: Any, ids: dict[str, str]) -> Any:
    return (
        None
        if value is None
        else json.loads(json.dumps(value).replace("{c}", ids["c"]).replace("{i}", ids["i"]))
    )


@pytest.mark.parametrize("row", CONVERSATION_ROWS, ids=[f"{row[0]} {row[1]}" for row in CONVERSATION_ROWS])
def test_another_users_conversation_is_404_exactly_as_a_missing_one(
    client: openai.OpenAI, launched: Launched, row: tuple[Any, ...]
) -> None:
    method, template, body = row
    mine = client.conversations.create(
        items=[{"type": "message", "role": "user", "content": "À moi."}], metadata={"owner": "alice"}
    )
    [item] = client.conversations.items.list(mine.id).data
    ids = {"c": mine.id.removeprefix("conv_"), "i": item.id.removeprefix("msg_")}
    nothing = {"c": MISSING, "i": MISSING}
    with httpx.Client(base_url=launched.url, headers=launched.headers("bob"), timeout=30) as bob:
        theirs = bob.request(method, template.format(**ids), json=_filled(body, ids))
        nobody = bob.request(method, template.format(**nothing), json=_filled(body, nothing))
    assert theirs.status_code == nobody.status_code == 404, (theirs.text, nobody.text)
    shape, other = theirs.json()["error"], nobody.json()["error"]
    assert (
        (shape["type"], shape["code"]) == (other["type"], other["code"]) == ("not_found_error", "not_found")
    )
    assert shape["message"].replace(ids["c"], "ID") == other["message"].replace(MISSING, "ID")
    # Alice's conversation is untouched by bob's attempts.
    assert client.conversations.retrieve(mine.id).metadata == {"owner": "alice"}
    assert [i.id for i in client.conversations.items.list(mine.id)] == [item.id]
