"""A2A as its clients meet it: the `a2a-sdk` package's own client against
the launched system, over both bindings (JSON-RPC over HTTP, and gRPC on
the gateway's A2A port), with the recording real-wire model: card
discovery (an agent's card and the host's), a message sent and streamed in
French and English, a stream dropped and resubscribed with and without the
resume-cursor extension, a cancel, a push notification signed as every
webhook, and a non-member's 404."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import grpc
import httpx
import pytest
from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.client import Client
from a2a.client.errors import A2AClientError
from a2a.types import a2a_pb2
from a2a.utils.errors import InvalidParamsError, TaskNotCancelableError, UnsupportedOperationError
from standardwebhooks import Webhook

from gateway.a2a.tasks import CURSOR_EXTENSION
from tests.e2e.conftest import (
    A2A_DEFAULT_AGENT,
    WEBHOOK_SECRET,
    Launched,
    model_requests,
    recording_env,
    shared_recording,
)
from tests.e2e.conftest import script_answers as script
from tests.e2e.sse import read_events
from tests.fakes.webhook_receiver import WebhookReceiver, webhook_receiver

RECORDING = shared_recording()
DEFAULT_AGENT = A2A_DEFAULT_AGENT
PROJECT = "a2a-desk"  # a shared project: bob is no member of it
SECRET = WEBHOOK_SECRET
# The recording model's system, shared with the modules that launch with the same settings.
LAUNCH_ENV = recording_env(f"{RECORDING.url}/v1")
BINDINGS = ["JSONRPC", "GRPC"]
CASES = {
    "en": ("When is the deploy window?", "Tuesdays, from nine to eleven."),
    "fr": ("Quand est la fenêtre de déploiement ?", "Le mardi, de neuf à onze heures."),
}
SLOW = "Le déploiement a lieu le mardi de neuf à onze heures après la revue de code et les tests."
CUT = 3  # pieces of the answer read before the connection drops


@pytest.fixture(scope="module")
def agent(launched: Launched) -> str:
    """The agent of alice's project (the deployment's default), on the recording model."""
    with launched.client() as http:
        project = http.post("/api/agent/projects", json={"id": PROJECT, "display_name": "Accueil"})
        assert project.status_code == 201, project.text
        made = http.post(
            "/api/agent/agents",
            params={"project_id": PROJECT},
            json={"id": DEFAULT_AGENT, "display_name": "Accueil", "model": "recorded"},
        )
        assert made.status_code == 201, made.text
    return DEFAULT_AGENT


@pytest.fixture(scope="module")
def receiver() -> AsyncIterator[WebhookReceiver]:
    with webhook_receiver() as found:
        yield found  # type: ignore[misc]


def auth(launched: Launched, user: str = "alice", *extensions: str, cursor: str = "") -> ClientCallContext:
    parameters = {"Authorization": f"Bearer {launched.token(user)}"}
    if extensions:
        parameters["A2A-Extensions"] = ",".join(extensions)
    if cursor:
        parameters["Last-Event-ID"] = cursor
    return ClientCallContext(service_parameters=parameters, timeout=60)


async def card_of(launched: Launched, agent: str = "", user: str = "alice") -> a2a_pb2.AgentCard:
    base = f"{launched.url}/a2a/agents/{agent}" if agent else launched.url
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {launched.token(user)}"}) as http:
        return await A2ACardResolver(http, base).get_agent_card()


@asynccontextmanager
async def client_of(
    launched: Launched, agent: str, binding: str, *, streaming: bool = True, **config: Any
) -> AsyncIterator[Client]:
    """The SDK's client of the agent over ``binding``; closed with the HTTP
    client it was given (the SDK leaves a given one open)."""
    card = await card_of(launched, agent)
    async with httpx.AsyncClient(timeout=60) as http:
        factory = ClientFactory(
            ClientConfig(
                streaming=streaming,
                supported_protocol_bindings=[binding],
                grpc_channel_factory=grpc.aio.insecure_channel,
                httpx_client=http,
                **config,
            )
        )
        async with factory.create(card) as client:
            yield client


def user_message(text: str, context_id: str = "") -> a2a_pb2.SendMessageRequest:
    message = a2a_pb2.Message(
        message_id=str(uuid.uuid4()),
        context_id=context_id,
        role=a2a_pb2.ROLE_USER,
        parts=[a2a_pb2.Part(text=text)],
    )
    return a2a_pb2.SendMessageRequest(message=message)


def chunks(events: list[a2a_pb2.StreamResponse]) -> list[str]:
    """The answer's streamed pieces (the final whole artifact aside)."""
    return [
        e.artifact_update.artifact.parts[0].text
        for e in events
        if e.HasField("artifact_update") and not e.artifact_update.last_chunk
    ]


def cursor(event: a2a_pb2.StreamResponse) -> str:
    which = event.WhichOneof("payload")
    metadata = getattr(event, str(which)).metadata
    return str(int(metadata[CURSOR_EXTENSION]["sequence"]))


async def test_the_cards_name_both_bindings_the_cursor_extension_and_bearer(
    launched: Launched, agent: str
) -> None:
    card = await card_of(launched, agent)
    assert card.name == "Accueil" and card.capabilities.streaming and card.capabilities.push_notifications
    assert [e.uri for e in card.capabilities.extensions] == [CURSOR_EXTENSION]
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
    bindings = {i.protocol_binding: i for i in card.supported_interfaces}
    assert bindings["JSONRPC"].url == f"{launched.url}/a2a/agents/{agent}"
    assert bindings["GRPC"].url == f"127.0.0.1:{launched.ports['a2a']}" and bindings["GRPC"].tenant == agent
    assert card.skills and all(s.id and s.tags for s in card.skills)
    # The host's card is the default agent's, so a client knowing only the host finds it.
    assert await card_of(launched) == card
    with launched.client() as http:
        listed = http.get("/a2a/agents").json()["agents"]
    assert {"id": agent, "name": "Accueil", "url": bindings["JSONRPC"].url} | {
        "card_url": f"{bindings['JSONRPC'].url}/.well-known/agent-card.json"
    } in listed


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("lang", ["en", "fr"])
async def test_a_message_is_an_ask_and_the_task_its_run(
    launched: Launched, agent: str, binding: str, lang: str
) -> None:
    question, answer = CASES[lang]
    script(f"say:{answer}")
    context_id = f"ctx-{uuid.uuid4()}"
    async with client_of(launched, agent, binding, streaming=False) as client:
        [response] = [
            r async for r in client.send_message(user_message(question, context_id), context=auth(launched))
        ]
        task = response.task
        assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED, task
        assert task.context_id == context_id and task.artifacts[0].parts[0].text == answer
        assert task.status.message.parts[0].text == answer
        # What the model received: the question, as the agent's last user turn.
        asked = f"{launched.user()} asks: {question}"
        assert model_requests()[-1]["messages"][-1] == {"role": "user", "content": asked}
        again = await client.get_task(a2a_pb2.GetTaskRequest(id=task.id), context=auth(launched))
        assert (
            again.status.state == a2a_pb2.TASK_STATE_COMPLETED and again.artifacts[0].parts[0].text == answer
        )
        listed = await client.list_tasks(
            a2a_pb2.ListTasksRequest(context_id=context_id), context=auth(launched)
        )
        assert [t.id for t in listed.tasks] == [task.id]
    # The ask is on the agent's shared thread: the caller is the requester, contextId the correlation.
    with launched.client() as http:
        view = http.get(f"/api/agent/agents/{agent}/entries", params={"correlation_id": context_id}).json()
    assert [(e["requester"], e["content"]) for e in view["entries"]] == [
        (launched.user(), question),
        (launched.user(), answer),
    ]


def http_ask(launched: Launched, agent: str, question: str, correlation_id: str = "") -> str:
    """An ask made without A2A (the HTTP route); its run's id."""
    body = {"message": question, "correlation_id": correlation_id}
    with (
        launched.client(path="/api/agent", timeout=60) as http,
        http.stream("POST", f"/agents/{agent}/asks", json=body) as response,
    ):
        assert response.status_code == 200, response.read()
        events = list(read_events(response))  # to its end: the task has ended
    return str(next(e.data["run_id"] for e in events if e.event == "run_started"))


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_tasks_context_is_its_asks_correlation_however_it_was_asked(
    launched: Launched, agent: str, binding: str
) -> None:
    script("say:Le mardi.", "say:Tuesday.", "say:Encore le mardi.")
    correlation = f"release-{uuid.uuid4().hex[:8]}"
    named = http_ask(launched, agent, "Quand livre-t-on ?", correlation)
    unnamed = http_ask(launched, agent, "When do we ship?")
    later = http_ask(launched, agent, "Et la suivante ?")  # newer: another context on the first page
    async with client_of(launched, agent, binding, streaming=False) as client:
        task = await client.get_task(a2a_pb2.GetTaskRequest(id=named), context=auth(launched))
        assert task.context_id == correlation and task.artifacts[0].parts[0].text == "Le mardi."
        own = await client.get_task(a2a_pb2.GetTaskRequest(id=unnamed), context=auth(launched))
        assert own.context_id == unnamed  # no correlation named: the run's id
        # The context is filtered by the query, not within a page of the thread's runs.
        one = a2a_pb2.ListTasksRequest(context_id=correlation, page_size=1)
        listed = await client.list_tasks(one, context=auth(launched))
        assert [t.id for t in listed.tasks] == [named] and listed.tasks[0].context_id == correlation
        newest = await client.list_tasks(a2a_pb2.ListTasksRequest(page_size=1), context=auth(launched))
        assert [t.id for t in newest.tasks] == [later]


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("lang", ["en", "fr"])
async def test_a_streamed_message_is_the_task_then_its_updates(
    launched: Launched, agent: str, binding: str, lang: str
) -> None:
    question, answer = CASES[lang]
    script(f"slow:0.01:{answer}")
    async with client_of(launched, agent, binding) as client:
        events = [e async for e in client.send_message(user_message(question), context=auth(launched))]
    assert events[0].HasField("task") and events[0].task.status.state == a2a_pb2.TASK_STATE_SUBMITTED
    assert events[0].task.history[0].parts[0].text == question
    assert "".join(chunks(events)) == answer and len(chunks(events)) > 1
    last = events[-1].status_update
    assert last.status.state == a2a_pb2.TASK_STATE_COMPLETED and last.status.message.parts[0].text == answer
    labels = [
        e.status_update.status.message.parts[0].text for e in events[1:-1] if e.HasField("status_update")
    ]
    assert labels, "the run's steps are working status updates"
    assert model_requests()[-1]["messages"][-1]["content"] == f"{launched.user()} asks: {question}"


async def dropped_stream(client: Client, launched: Launched, question: str) -> list[a2a_pb2.StreamResponse]:
    """The events of a streamed message until CUT pieces of the answer, then
    the connection dropped (the run goes on)."""
    seen: list[a2a_pb2.StreamResponse] = []
    stream = client.send_message(user_message(question), context=auth(launched, "alice", CURSOR_EXTENSION))
    async for event in stream:
        seen.append(event)
        if len(chunks(seen)) == CUT:
            break
    await stream.aclose()  # type: ignore[attr-defined]
    return seen


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_dropped_stream_resubscribed_with_the_cursor_misses_nothing_and_repeats_nothing(
    launched: Launched, agent: str, binding: str
) -> None:
    script(f"slow:0.05:{SLOW}")
    async with client_of(launched, agent, binding) as client:
        seen = await dropped_stream(client, launched, "Quand a lieu le déploiement ?")
        task_id = seen[0].task.id
        request = a2a_pb2.SubscribeToTaskRequest(id=task_id)
        with_cursor = auth(launched, "alice", CURSOR_EXTENSION, cursor=cursor(seen[-1]))
        rest = [e async for e in client.subscribe(request, context=with_cursor)]
    assert rest[0].HasField("task") and rest[0].task.id == task_id
    # Every piece once: the ones read before the drop, then the rest.
    assert "".join(chunks(seen) + chunks(rest)) == SLOW
    resumed = [int(cursor(e)) for e in rest[1:]]
    assert resumed == sorted(resumed) and resumed[0] > int(cursor(seen[-1]))
    assert rest[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_resubscription_without_the_extension_gets_the_task_and_its_answer_again(
    launched: Launched, agent: str, binding: str
) -> None:
    script(f"slow:0.1:{SLOW}")
    async with client_of(launched, agent, binding) as client:
        seen = await dropped_stream(client, launched, "When is the deploy?")
        task_id = seen[0].task.id
        rest = [
            e
            async for e in client.subscribe(
                a2a_pb2.SubscribeToTaskRequest(id=task_id), context=auth(launched)
            )
        ]
        # The spec's behaviour: the task first, then its updates; the answer
        # artifact starts again (its first chunk replaces what the client had).
        assert rest[0].HasField("task") and rest[0].task.id == task_id
        first_chunk = next(e.artifact_update for e in rest if e.HasField("artifact_update"))
        assert not first_chunk.append and "".join(chunks(rest)) == SLOW
        assert all(not getattr(e, str(e.WhichOneof("payload"))).metadata for e in rest[1:])
        # An ended task is not subscribed to without the cursor extension.
        with pytest.raises(UnsupportedOperationError):
            _ = [
                e
                async for e in client.subscribe(
                    a2a_pb2.SubscribeToTaskRequest(id=task_id), context=auth(launched)
                )
            ]


@pytest.mark.parametrize("binding", BINDINGS)
async def test_get_task_gives_the_answer_so_far_and_the_history_of_question_and_answer(
    launched: Launched, agent: str, binding: str
) -> None:
    script(f"slow:0.1:{SLOW}")
    question = "Quand a lieu le déploiement, exactement ?"
    async with client_of(launched, agent, binding) as client:
        seen = await dropped_stream(client, launched, question)
        asked = seen[0].task.history[0]
        running = await client.get_task(a2a_pb2.GetTaskRequest(id=asked.task_id), context=auth(launched))
        assert running.status.state == a2a_pb2.TASK_STATE_WORKING
        # The answer streamed so far: at least what the client read, never more than the answer.
        so_far = running.artifacts[0].parts[0].text
        assert so_far.startswith("".join(chunks(seen))) and SLOW.startswith(so_far) and so_far != SLOW
        assert [(m.role, m.message_id, m.parts[0].text) for m in running.history] == [
            (a2a_pb2.ROLE_USER, asked.message_id, question)
        ]
        done = await settled(client, launched, asked.task_id)
        assert done.artifacts[0].parts[0].text == SLOW
        assert [(m.role, m.parts[0].text) for m in done.history] == [
            (a2a_pb2.ROLE_USER, question),
            (a2a_pb2.ROLE_AGENT, SLOW),
        ]
        for length, expected in ((1, [SLOW]), (0, []), (5, [question, SLOW])):
            request = a2a_pb2.GetTaskRequest(id=asked.task_id, history_length=length)
            task = await client.get_task(request, context=auth(launched))
            assert [m.parts[0].text for m in task.history] == expected, length


@pytest.mark.parametrize("binding", BINDINGS)
async def test_cancelling_a_task_cancels_its_run(launched: Launched, agent: str, binding: str) -> None:
    script(f"slow:0.2:{SLOW}")
    async with client_of(launched, agent, binding) as client:
        seen = await dropped_stream(client, launched, "Annule-moi")
        task = await client.cancel_task(a2a_pb2.CancelTaskRequest(id=seen[0].task.id), context=auth(launched))
        assert task.status.state == a2a_pb2.TASK_STATE_CANCELED
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(a2a_pb2.CancelTaskRequest(id=task.id), context=auth(launched))
    with launched.client() as http:
        assert http.get(f"/api/agent/runs/{task.id}").json()["status"] == "cancelled"


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_push_notification_config_is_a_signed_webhook(
    launched: Launched, agent: str, binding: str, receiver: WebhookReceiver
) -> None:
    script("say:Noté.")
    before = len(receiver.requests)
    push = a2a_pb2.TaskPushNotificationConfig(url=receiver.url)
    async with client_of(launched, agent, binding, streaming=False, push_notification_config=push) as client:
        [response] = [
            r async for r in client.send_message(user_message("Préviens-moi."), context=auth(launched))
        ]
        configs = await client.list_task_push_notification_configs(
            a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=response.task.id), context=auth(launched)
        )
    assert [c.url for c in configs.configs] == [receiver.url]
    delivered = (await receiver.arrived(before + 1))[before]
    # Signed as every webhook (Standard Webhooks), with the run's record.
    payload = Webhook(SECRET).verify(delivered.body.decode(), delivered.headers)
    run = payload["data"]["run"]
    assert run["id"] == response.task.id and run["status"] == "RUN_STATUS_DONE", payload


async def settled(client: Client, launched: Launched, task_id: str) -> a2a_pb2.Task:
    """The task once it has ended (read to its end with the cursor extension)."""
    request = a2a_pb2.SubscribeToTaskRequest(id=task_id)
    events = [
        e
        async for e in client.subscribe(
            request, context=auth(launched, "alice", CURSOR_EXTENSION, cursor="0")
        )
    ]
    assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED, events[-1]
    return await client.get_task(a2a_pb2.GetTaskRequest(id=task_id), context=auth(launched))


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_push_notification_config_set_on_a_running_task_gets_its_end_and_a_deleted_one_nothing(
    launched: Launched, agent: str, binding: str, receiver: WebhookReceiver
) -> None:
    script(f"slow:0.05:{SLOW}", f"slow:0.05:{SLOW}")
    before = len(receiver.requests)
    async with client_of(launched, agent, binding) as client:
        task_id = (await dropped_stream(client, launched, "Préviens-moi à la fin.")).pop(0).task.id
        made = await client.create_task_push_notification_config(
            a2a_pb2.TaskPushNotificationConfig(task_id=task_id, url=receiver.url), context=auth(launched)
        )
        assert (made.task_id, made.url) == (task_id, receiver.url) and made.id
        read = a2a_pb2.GetTaskPushNotificationConfigRequest(task_id=task_id, id=made.id)
        assert await client.get_task_push_notification_config(read, context=auth(launched)) == made
        await settled(client, launched, task_id)
        delivered = (await receiver.arrived(before + 1))[before]
        # Signed as every webhook (Standard Webhooks), with the run's record.
        run = Webhook(SECRET).verify(delivered.body.decode(), delivered.headers)["data"]["run"]
        assert run["id"] == task_id and run["status"] == "RUN_STATUS_DONE", run
        # An ended task's delivery is decided: a new config is refused, clearly.
        with pytest.raises(UnsupportedOperationError, match="ended"):
            await client.create_task_push_notification_config(
                a2a_pb2.TaskPushNotificationConfig(task_id=task_id, url=receiver.url), context=auth(launched)
            )
        # Set, then deleted while the task runs: its end goes nowhere.
        other = (await dropped_stream(client, launched, "Ne me préviens pas.")).pop(0).task.id
        push = a2a_pb2.TaskPushNotificationConfig(task_id=other, url=receiver.url)
        made = await client.create_task_push_notification_config(push, context=auth(launched))
        await client.delete_task_push_notification_config(
            a2a_pb2.DeleteTaskPushNotificationConfigRequest(task_id=other, id=made.id), context=auth(launched)
        )
        listed = await client.list_task_push_notification_configs(
            a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=other), context=auth(launched)
        )
        assert not listed.configs
        await settled(client, launched, other)
        # Deliveries are signed by Switchboard: a client's own token is refused, not ignored.
        with pytest.raises(InvalidParamsError, match="token"):
            await client.create_task_push_notification_config(
                a2a_pb2.TaskPushNotificationConfig(task_id=other, url=receiver.url, token="mine"),
                context=auth(launched),
            )
    with launched.client() as http:
        record = http.get(f"/api/agent/runs/{other}/deliveries").json()
    assert (record["webhook_url"], record["state"], record["deliveries"]) == ("", "", [])
    assert len(receiver.requests) == before + 1


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_non_member_finds_no_agent_and_a_bad_token_is_refused(
    launched: Launched, agent: str, binding: str
) -> None:
    with httpx.Client(base_url=launched.url, headers=launched.headers("bob")) as http:
        assert http.get(f"/a2a/agents/{agent}/.well-known/agent-card.json").status_code == 404
        assert http.get("/.well-known/agent-card.json").status_code == 404
        assert agent not in [a["id"] for a in http.get("/a2a/agents").json()["agents"]]
    assert httpx.get(f"{launched.url}/a2a/agents/{agent}/.well-known/agent-card.json").status_code == 401
    async with client_of(launched, agent, binding, streaming=False) as client:
        for user, refused in (("bob", "404|NOT_FOUND"), ("nobody", "401|UNAUTHENTICATED")):
            context = (
                auth(launched, user)
                if user == "bob"
                else ClientCallContext(service_parameters={"Authorization": "Bearer not-a-token"})
            )
            with pytest.raises(A2AClientError) as raised:
                _ = [r async for r in client.send_message(user_message("Bonjour ?"), context=context)]
            assert any(word in str(raised.value) for word in refused.split("|")), raised.value


async def test_the_json_rpc_wire_is_a2a_1_0(launched: Launched, agent: str) -> None:
    """One exchange on the wire, as docs/connect-agents.md shows it."""
    script("say:Le mardi, de neuf à onze heures.")
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": "msg-1",
                "contextId": f"release-{uuid.uuid4().hex[:8]}",
                "role": "ROLE_USER",
                "parts": [{"text": "Quand est la fenêtre de déploiement ?"}],
            }
        },
    }
    async with httpx.AsyncClient(base_url=launched.url, headers=launched.headers(), timeout=60) as http:
        response = await http.post(f"/a2a/agents/{agent}", json=body, headers={"A2A-Version": "1.0"})
    assert response.status_code == 200, response.text
    task = response.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"][0]["text"] == "Le mardi, de neuf à onze heures."
    print(json.dumps({"request": body, "response": response.json()}, ensure_ascii=False, indent=2))
