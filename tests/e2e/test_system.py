"""The whole system as a user meets it: five processes started by the local
launcher, driven over HTTP and SSE, on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import re
import time
import uuid

import grpc
import httpx
import pytest

from services.engine.instructions import TITLE_SYSTEMS
from services.shared.identity import user_metadata
from switchboard.memory.v1 import pages_pb2, pages_service_pb2, pages_service_pb2_grpc
from tests.e2e.conftest import Launched, recording_env, shared_recording
from tests.e2e.otlp import ReceivedSpan
from tests.e2e.sse import SseEvent, read_events

# A recording OpenAI-compatible server beside the offline models: Auto never
# picks it (an offline model of each profile comes first); a message names it.
RECORDING = shared_recording()
LAUNCH_ENV = recording_env(f"{RECORDING.url}/v1")


@pytest.fixture
def client(launched: Launched) -> httpx.Client:
    with launched.client("alice") as http:
        yield http


def new_conversation(client: httpx.Client, **body: object) -> str:
    response = client.post("/api/agent/conversations", json=body)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def post_message(client: httpx.Client, conversation_id: str, message: str, model: str = "") -> list[SseEvent]:
    body = {"message": message, **({"model": model} if model else {})}
    with client.stream("POST", f"/api/agent/conversations/{conversation_id}/messages", json=body) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        return list(read_events(r))


def test_a_message_runs_through_every_service(client: httpx.Client) -> None:
    conversation_id = new_conversation(client, title="First chat")
    events = post_message(client, conversation_id, "Draft a reply to this email from the supplier")
    names = [e.event for e in events]
    assert names[0] == "run_started" and names[-1] == "final"
    assert {"step", "delta"} <= set(names)
    assert [int(e.id or 0) for e in events] == list(range(1, len(events) + 1))  # every event has an id
    steps = [(e.data["key"], e.data["status"]) for e in events if e.event == "step"]
    assert steps == [
        ("context", "started"),
        ("context", "completed"),
        ("routing", "started"),
        ("routing", "completed"),
        ("generate", "started"),
        ("generate", "completed"),
    ]
    skills = [e.data["name"] for e in events if e.event == "skill_used"]
    assert skills == ["email-reply-draft"]
    final = events[-1].data
    assert "".join(e.data["text"] for e in events if e.event == "delta") == final["text"]

    run = client.get(f"/api/agent/runs/{final['run_id']}")
    assert run.status_code == 200
    record = run.json()
    assert record["status"] == "done" and record["conversation_id"] == conversation_id
    assert record["model"] == final["model"] and record["provider"] == "offline"
    assert record["tokens_in"] > 0 and record["tokens_out"] == final["usage"]["tokens_out"] > 0
    assert record["skills"] == [
        {"skill_id": record["skills"][0]["skill_id"], "name": "email-reply-draft", "invocation": "auto"}
    ]
    assert record["router_decision"]["branch"] == "ROUTE_BRANCH_HIGH"
    assert record["model_decision"]["model"]["model"] == final["model"]
    assert record["finish_time"] and record["credits"] == 0

    history = client.get(f"/api/agent/conversations/{conversation_id}/entries").json()["entries"]
    assert [(e["role"], e["content"], e["run_id"]) for e in history] == [
        ("user", "Draft a reply to this email from the supplier", final["run_id"]),
        ("assistant", final["text"], final["run_id"]),
    ]


def test_the_offline_model_is_deterministic(client: httpx.Client) -> None:
    answers = [
        post_message(client, new_conversation(client), "How many days are in a leap year?")[-1].data["text"]
        for _ in range(2)
    ]
    assert answers[0] == answers[1] and "leap year" in answers[0]


def test_a_stream_resumes_from_last_event_id(client: httpx.Client) -> None:
    events = post_message(client, new_conversation(client), "hello")
    run_id = events[0].data["run_id"]
    with client.stream("GET", f"/api/agent/runs/{run_id}/events", headers={"Last-Event-ID": "3"}) as response:
        assert response.status_code == 200
        resumed = list(read_events(response))
    assert [(e.id, e.event, e.data) for e in resumed] == [(e.id, e.event, e.data) for e in events[3:]]
    # After the terminal event there is nothing to resume: 204.
    done = client.get(f"/api/agent/runs/{run_id}/events", headers={"Last-Event-ID": events[-1].id or ""})
    assert done.status_code == 204


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b'{"message": ', 400, "INVALID_ARGUMENT"),
        (b"{}", 400, "INVALID_ARGUMENT"),
        (b'{"message": "hi", "surprise": 1}', 400, "INVALID_ARGUMENT"),
        (b'{"message": "   "}', 400, "INVALID_ARGUMENT"),
        (b'{"message": "' + b"x" * 40_000 + b'"}', 413, "PAYLOAD_TOO_LARGE"),
        (b'{"message": "' + b"x" * 400_000 + b'"}', 413, "PAYLOAD_TOO_LARGE"),
    ],
)
def test_bad_messages_get_a_json_error(client: httpx.Client, body: bytes, status: int, code: str) -> None:
    conversation_id = new_conversation(client)
    response = client.post(
        f"/api/agent/conversations/{conversation_id}/messages",
        content=body,
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code and response.json()["error"]["message"]
    # Nothing was written: an appended entry would have moved update_time.
    conversation = client.get(f"/api/agent/conversations/{conversation_id}").json()
    assert conversation["update_time"] == conversation["create_time"]


def test_unknown_ids_are_404(client: httpx.Client) -> None:
    for method, path, body in [
        ("POST", "/api/agent/conversations/no-such/messages", {"message": "hi"}),
        ("GET", "/api/agent/conversations/no-such", None),
        ("GET", "/api/agent/runs/no-such", None),
        ("GET", "/api/agent/runs/no-such/events", None),
    ]:
        response = client.request(method, path, json=body)
        assert response.status_code == 404, (path, response.text)
        assert response.json()["error"]["code"] == "NOT_FOUND"


def test_users_only_see_their_own_objects(launched: Launched, client: httpx.Client) -> None:
    conversation_id = new_conversation(client, title="Alice's")
    run_id = post_message(client, conversation_id, "hello")[0].data["run_id"]
    with launched.client("bob") as bob:
        for method, path, body in [
            ("GET", f"/api/agent/conversations/{conversation_id}", None),
            ("POST", f"/api/agent/conversations/{conversation_id}/messages", {"message": "hi"}),
            ("GET", f"/api/agent/runs/{run_id}", None),
            ("GET", f"/api/agent/conversations/{conversation_id}/entries", None),
            ("PATCH", f"/api/agent/conversations/{conversation_id}", {"title": "mine now"}),
            ("POST", f"/api/agent/conversations/{conversation_id}/archive", None),
            ("GET", f"/api/agent/runs/{run_id}/events", None),
        ]:
            mine = bob.request(method, path, json=body)
            missing = bob.request(
                method, path.replace(conversation_id, "no-such").replace(run_id, "no-such"), json=body
            )
            assert mine.status_code == missing.status_code == 404
            assert mine.json()["error"]["code"] == missing.json()["error"]["code"]
        assert all(
            c["id"] != conversation_id for c in bob.get("/api/agent/conversations").json()["conversations"]
        )
    anonymous = httpx.get(f"{launched.url}/api/agent/conversations")
    assert anonymous.status_code == 401 and anonymous.json()["error"]["code"] == "UNAUTHENTICATED"


def test_the_web_page_and_openapi_are_served(launched: Launched) -> None:
    page = httpx.get(f"{launched.url}/")
    assert page.status_code == 200 and "<textarea" in page.text and "/api/agent" in page.text
    schema = httpx.get(f"{launched.url}/openapi.json").json()
    assert "/api/agent/conversations/{conversation_id}/messages" in schema["paths"]


EXPECTED_SERVICES = {f"switchboard-{name}" for name in ("gateway", "engine", "router", "threads", "memory")}
REQUEST_SPAN = "POST /api/agent/conversations/{conversation_id}/messages"
EXPECTED_SPANS = {
    REQUEST_SPAN,
    "/switchboard.engine.v1.EngineService/StartRun",
    "invoke_agent personal",
    "/switchboard.threads.v1.ThreadsService/AppendEntries",
    "/switchboard.memory.v1.MemoryService/GetChatContext",
    "/switchboard.router.v1.RouterService/RouteMessage",
}


def run_trace(launched: Launched, run_id: str) -> list[ReceivedSpan]:
    """Every span of the run's trace(s). Spans arrive in batches from five
    processes, a span after its children (a server span ends with its
    stream): wait for the whole trace, every span's parent among them but
    the gateway's request span's (none, or the browser's). The names alone
    are not enough: the gateway's client span of StartRun has the engine's
    server span's name, and may arrive first."""
    deadline = time.monotonic() + 20
    while True:
        spans = launched.traces.snapshot()
        traces = {s.trace_id for s in spans if s.run_id == run_id}
        in_trace = [s for s in spans if s.trace_id in traces]
        ids = {s.span_id for s in in_trace}
        complete = (
            EXPECTED_SERVICES <= {s.service for s in in_trace}
            and EXPECTED_SPANS <= {s.name for s in in_trace}
            and all(s.parent_span_id in ids for s in in_trace if s.name != REQUEST_SPAN)
        )
        if complete or time.monotonic() > deadline:
            return in_trace
        time.sleep(0.2)


def test_one_run_is_one_trace_across_all_five_processes(launched: Launched, client: httpx.Client) -> None:
    conversation = new_conversation(client)
    run_id = post_message(client, conversation, "Summarise the meeting notes")[0].data["run_id"]
    in_trace = run_trace(launched, run_id)
    assert len({s.trace_id for s in in_trace}) == 1  # the run is one trace...
    assert {s.service for s in in_trace} == EXPECTED_SERVICES  # ...that spans all five processes
    names = {s.name for s in in_trace}
    assert EXPECTED_SPANS <= names, names

    # OpenTelemetry GenAI conventions: invoke_agent for the run, chat {model} under it.
    by_id = {s.span_id: s for s in in_trace}
    (agent,) = [s for s in in_trace if s.name == "invoke_agent personal"]
    (chat,) = [s for s in in_trace if s.name.startswith("chat ")]
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.conversation.id"] == conversation
    assert by_id[agent.parent_span_id].name == "/switchboard.engine.v1.EngineService/StartRun"
    assert chat.parent_span_id == agent.span_id or by_id[chat.parent_span_id].parent_span_id == agent.span_id
    model = chat.attributes["gen_ai.request.model"]
    assert chat.name == f"chat {model}"
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.provider.name"] == "offline"
    assert chat.attributes["gen_ai.response.model"] == model
    assert chat.attributes["gen_ai.conversation.id"] == conversation
    assert int(chat.attributes["gen_ai.usage.input_tokens"]) > 0  # type: ignore[call-overload]
    assert int(chat.attributes["gen_ai.usage.output_tokens"]) > 0  # type: ignore[call-overload]
    # Prompt and answer text stay out of traces unless an operator opts in.
    assert not any(
        "gen_ai.input.messages" in s.attributes or "gen_ai.output.messages" in s.attributes for s in in_trace
    )
    recorded = " ".join(str(v) for s in in_trace for v in s.attributes.values())
    assert "Summarise the meeting notes" not in recorded


def test_a_tool_call_is_an_execute_tool_span_of_the_run(launched: Launched, client: httpx.Client) -> None:
    conversation = new_conversation(client, allowed_sources={"workspace": True, "connectors": ["testmail"]})
    events = post_message(client, conversation, "check my mail for invoice")
    assert "4711" in events[-1].data["text"]
    in_trace = run_trace(launched, events[0].data["run_id"])
    (agent,) = [s for s in in_trace if s.name == "invoke_agent personal"]
    (tool,) = [s for s in in_trace if s.name.startswith("execute_tool ")]
    assert tool.name == "execute_tool query_connector" and tool.parent_span_id == agent.span_id
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "query_connector"


def test_the_browsers_traceparent_is_honoured(launched: Launched, client: httpx.Client) -> None:
    trace_id = uuid.uuid4().hex
    conversation = new_conversation(client)
    with client.stream(
        "POST",
        f"/api/agent/conversations/{conversation}/messages",
        json={"message": "hello"},
        headers={"traceparent": f"00-{trace_id}-{uuid.uuid4().hex[:16]}-01"},
    ) as r:
        run_id = list(read_events(r))[0].data["run_id"]
    assert {s.trace_id for s in run_trace(launched, run_id)} == {trace_id}


def test_health_checks_are_not_traced(launched: Launched) -> None:
    # The launcher polled every service's health and the gateway's /healthz at start-up.
    names = {s.name for s in launched.traces.snapshot()}
    assert names, "no spans at all: the receiver is not wired"
    assert not [n for n in names if "Health" in n or "healthz" in n or "metrics" in n], names


def scrape(url: str) -> dict[str, float]:
    """Prometheus text format -> {"name{labels}": value}."""
    text = httpx.get(url, timeout=10).text
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            samples[key] = float(value)
    return samples


def test_prometheus_metrics_count_rpcs_runs_tokens_and_sse_clients(
    launched: Launched, client: httpx.Client
) -> None:
    post_message(client, new_conversation(client), "count me")
    engine = scrape(f"http://127.0.0.1:{launched.metrics_ports['engine']}/metrics")
    start_run = (
        'grpc_server_handled_total{grpc_code="OK",grpc_method="StartRun",'
        'grpc_service="switchboard.engine.v1.EngineService",grpc_type="server_stream"}'
    )
    assert engine[start_run] >= 1
    assert engine['switchboard_runs_total{status="done"}'] >= 1
    assert sum(v for k, v in engine.items() if k.startswith("switchboard_llm_tokens_total{")) > 0
    threads = scrape(f"http://127.0.0.1:{launched.metrics_ports['threads']}/metrics")
    assert any(k.startswith("grpc_server_handling_seconds_bucket{") and "AppendEntries" in k for k in threads)
    gateway = scrape(f"{launched.url}/metrics")
    assert "switchboard_sse_clients" in gateway
    assert any(k.startswith("http_requests_total{") and "/messages" in k for k in gateway)
    # No unbounded labels: no id of a user, run or conversation anywhere.
    every_key = " ".join([*engine, *threads, *gateway])
    assert not re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-", every_key)
    assert "alice" not in every_key


def test_every_grpc_service_process_serves_on_uvloop(launched: Launched) -> None:
    """Each of the four processes reports the loop it runs on
    (services/shared/event_loop.py): uvloop, the default."""
    loops = {}
    for service, port in launched.metrics_ports.items():
        samples = scrape(f"http://127.0.0.1:{port}/metrics")
        loops[service] = sorted(
            key for key, value in samples.items() if key.startswith("switchboard_event_loop_info{") and value
        )
    assert loops == {
        service: ['switchboard_event_loop_info{loop="uvloop"}']
        for service in ("threads", "memory", "router", "engine")
    }


def test_pin_rename_and_find_a_conversation(client: httpx.Client) -> None:
    """Over HTTP: the first exchange titles a conversation
    automatically; renaming makes the title manual for good; pinned ones come
    first; search finds by title; archived ones leave the list."""
    chat = new_conversation(client)
    post_message(client, chat, "Prepare the quarterly review for finance")
    assert (
        client.get(f"/api/agent/conversations/{chat}").json()["title"]
        == "Prepare the quarterly review for finance"
    )

    other = new_conversation(client)
    renamed = client.patch(
        f"/api/agent/conversations/{other}", json={"title": "Offsite ideas", "pinned": True}
    )
    assert renamed.status_code == 200 and renamed.json()["title_auto"] is False
    post_message(client, other, "Where should we go this year?")  # no auto title over a manual one
    assert client.get(f"/api/agent/conversations/{other}").json()["title"] == "Offsite ideas"

    listed = client.get("/api/agent/conversations").json()["conversations"]
    assert listed[0]["id"] == other and listed[0]["pinned"] is True
    found = client.get("/api/agent/conversations", params={"q": "QUARTERLY"}).json()["conversations"]
    assert [c["id"] for c in found] == [chat]

    assert client.post(f"/api/agent/conversations/{chat}/archive").status_code == 200
    assert chat not in [c["id"] for c in client.get("/api/agent/conversations").json()["conversations"]]
    archived = client.get("/api/agent/conversations", params={"include_archived": "true", "q": "quarterly"})
    assert [c["id"] for c in archived.json()["conversations"]] == [chat]

    for body in ({}, {"title": ""}, {"pinned": "maybe"}, {"colour": "red"}):
        response = client.patch(f"/api/agent/conversations/{other}", json=body)
        assert response.status_code == 400, (body, response.text)


def test_a_real_model_gets_the_previous_turn_of_the_conversation(client: httpx.Client) -> None:
    """Two messages over HTTP to a conversation whose model is served by a
    real-wire provider: the second request holds the first turn, in order."""
    chat = new_conversation(client)
    answers = ["say:Le déploiement est mardi à midi.", "say:Mardi."]
    RECORDING.script.reset()

    def titling(body: dict[str, object]) -> bool:
        return body["messages"][0]["content"] in TITLE_SYSTEMS.values()  # type: ignore[index]

    def answer(body: dict[str, object]) -> str:
        # The title model's request (after the first exchange) may come at any time.
        return "say:Déploiement" if titling(body) else answers.pop(0)

    RECORDING.script.steps = [answer] * 3
    first = post_message(client, chat, "Quand est le déploiement ?", model="recorded")
    assert first[-1].event == "final"
    second = post_message(client, chat, "Tu peux répéter le jour ?", model="recorded")
    assert second[-1].event == "final" and second[-1].data["text"] == "Mardi."
    # A French conversation: its title is asked for in French (by the
    # background title model, once the first exchange was recorded).
    deadline = time.monotonic() + 20
    while client.get(f"/api/agent/conversations/{chat}").json()["title"] != "Déploiement":
        assert time.monotonic() < deadline, "the title model's title never came"
        time.sleep(0.05)
    (title_request,) = [r for r in RECORDING.script.requests if titling(r)]
    assert [(m["role"], m["content"]) for m in title_request["messages"]] == [
        ("system", TITLE_SYSTEMS["fr"]),
        ("user", "Utilisateur : Quand est le déploiement ?\n\nAssistant : Le déploiement est mardi à midi."),
    ]
    requests = [r for r in RECORDING.script.requests if not titling(r)]
    turns = [(m["role"], m["content"]) for m in requests[-1]["messages"][1:]]
    assert turns == [
        ("user", "Quand est le déploiement ?"),
        ("assistant", "Le déploiement est mardi à midi."),
        ("user", "Tu peux répéter le jour ?"),
    ]
    run_id = second[0].data["run_id"]
    record = client.get(f"/api/agent/runs/{run_id}").json()
    history = next(layer for layer in record["layers"] if layer["key"] == "history")
    assert history["present"] and history["item_count"] == 1 and int(history["size_tokens"]) > 0


@pytest.mark.parametrize(
    ("message", "decision"),
    [
        ("Remember that I sign as Alice", ("accept", "accepted")),
        ("Souviens-toi que je signe « Alice »", ("refuse", "refused")),
    ],
)
def test_deciding_a_proposal_settles_the_run_that_waited_for_it(
    client: httpx.Client, message: str, decision: tuple[str, str]
) -> None:
    events = post_message(client, new_conversation(client), message)
    proposal = next(e.data for e in events if e.event == "proposal")
    run_id = events[0].data["run_id"]
    assert client.get(f"/api/agent/runs/{run_id}").json()["status"] == "waiting_approval"
    verb, decided = decision
    response = client.post(f"/api/agent/proposals/{proposal['proposal_id']}/{verb}", json={})
    assert response.status_code == 200, response.text
    run = client.get(f"/api/agent/runs/{run_id}").json()
    assert (run["status"], run["approval"]) == ("done", decided)


def create_page(launched: Launched, title: str, body: str) -> str:
    """One of alice's workspace pages (written through the memory service, as
    any page is)."""
    with grpc.insecure_channel(f"127.0.0.1:{launched.ports['memory']}") as channel:
        response = pages_service_pb2_grpc.PagesServiceStub(channel).CreatePage(
            pages_service_pb2.CreatePageRequest(
                request_id=str(uuid.uuid4()), page=pages_pb2.Page(title=title, body=body)
            ),
            metadata=user_metadata(launched.user("alice")),
            timeout=10,
        )
    return str(response.page.id)


def test_one_run_reads_a_page_a_connector_and_an_mcp_server_and_records_only_what_it_read(
    launched: Launched, client: httpx.Client
) -> None:
    """A multi-source task in one run: the model (a real-wire recording
    server) reads a workspace page, queries the mail connector and calls an
    MCP server's tool in one step, then answers from what they returned. It
    received each source's content; the run's record lists exactly the
    three sources read, not the page nor the MCP server that were available
    and left unread (memory is off for the conversation, so no recalled note
    joins them)."""
    plan = create_page(launched, "Atlas launch plan", "The Atlas launch is on 14 May; Dana owns the rollout.")
    unread = create_page(launched, "Cafeteria menu", "Lentil soup on Monday, Atlas salad on Friday.")
    conversation = new_conversation(
        client,
        title="Atlas launch check",  # a titled conversation: no title model call
        allowed_sources={
            "workspace": True,
            "connectors": ["testmail"],
            "mcp_servers": ["glossary", "spare"],
            "memory": False,
        },
    )
    calls = [
        {"name": "read_page", "arguments": {"page_id": plan}},
        {"name": "query_connector", "arguments": {"connector": "testmail", "query": "invoice"}},
        {"name": "mcp__glossary__lookup", "arguments": {"word": "handoff"}},
    ]
    answer = "The launch is on 14 May, invoice 4711 is paid, and the handoff summary closes the segment."
    RECORDING.script.reset()
    RECORDING.script.steps = [f"tools:{json.dumps(calls)}", f"say:{answer}"]
    request = "Is everything ready for the Atlas launch? Check the plan, my mail and the glossary."
    events = post_message(client, conversation, request, model="recorded")
    assert events[-1].event == "final" and events[-1].data["text"] == answer

    # The model was offered the three families and got each source's content back.
    first, second = RECORDING.script.requests
    offered = {tool["function"]["name"] for tool in first["tools"]}
    assert {"read_page", "query_connector", "mcp__glossary__lookup", "mcp__spare__lookup"} <= offered
    results = [m["content"] for m in second["messages"] if m["role"] == "tool"]
    assert len(results) == 3
    assert "The Atlas launch is on 14 May; Dana owns the rollout." in results[0]
    assert "Invoice 4711 (1,250 EUR) was paid on 3 March." in results[1]
    assert "A handoff is the bounded summary that closes a thread segment." in results[2]
    assert not any("Lentil soup" in str(m["content"]) for m in second["messages"])

    record = client.get(f"/api/agent/runs/{events[0].data['run_id']}").json()
    assert record["status"] == "done"
    read = {(s["kind"], s["id"]): s["title"] for s in record["sources"]}
    expected = {
        ("connector", "testmail"): "Test mail",
        ("mcp", "glossary"): "MCP server glossary",
        ("page", plan): "Atlas launch plan",
    }
    # Alice's active instruction page (an earlier test of this module made
    # one) is read too, as the prompt's instruction layer, and said so.
    if {layer["key"]: layer for layer in record["layers"]}["instruction_page"]["present"]:
        active = client.get("/api/agent/personal-settings").json()["active_instruction_page_id"]
        expected[("page", active)] = read.get(("page", active), "")
    assert read == expected
    assert ("page", unread) not in read and ("mcp", "spare") not in read


def test_the_sources_offered_are_exactly_what_the_engine_is_configured_with(client: httpx.Client) -> None:
    """The gateway has no sources setting of its own: the popover offers the
    engine's connector (conftest switches the test mailbox on) and MCP
    servers, in their configured order, with their titles (French included),
    or the name when none is configured."""
    servers = json.loads(LAUNCH_ENV["SWITCHBOARD_ENGINE_MCP_SERVERS_JSON"])
    conversation = new_conversation(
        client, allowed_sources={"workspace": False, "connectors": ["testmail"], "mcp_servers": ["spare"]}
    )
    sources = client.get("/api/agent/sources", params={"conversation_id": conversation}).json()
    assert sources["workspace"]["checked"] is False
    assert sources["connectors"] == [
        {"kind": "connector", "name": "testmail", "title": "Test mail", "checked": True}
    ]
    assert sources["mcp_servers"] == [
        {
            "kind": "mcp",
            "name": s["name"],
            "title": s.get("title", s["name"]),
            "checked": s["name"] == "spare",
        }
        for s in servers
    ]
    assert [(s["name"], s["title"]) for s in sources["mcp_servers"]] == [
        ("glossary", "Glossaire de l'équipe"),
        ("spare", "spare"),
    ]
    # Without a conversation: the same entries, without `checked`.
    unmarked = client.get("/api/agent/sources").json()
    assert [s["name"] for s in unmarked["connectors"] + unmarked["mcp_servers"]] == [
        "testmail",
        "glossary",
        "spare",
    ]
    assert not any("checked" in s for s in unmarked["connectors"] + unmarked["mcp_servers"])
    # Nothing of a server's command line reaches a client.
    assert "tests.fakes.mcp_server" not in json.dumps(sources) + json.dumps(unmarked)


def stream_message(client: httpx.Client, conversation_id: str, body: dict[str, object]) -> list[SseEvent]:
    with client.stream("POST", f"/api/agent/conversations/{conversation_id}/messages", json=body) as r:
        assert r.status_code == 200, r.read()
        return list(read_events(r))


def test_a_french_user_reads_french_in_the_stream_and_the_record(launched: Launched) -> None:
    """A user whose browser asks for French and who has no instruction page
    says "Retiens que…": every text of the run's SSE stream (steps, proposal,
    answer), the record and the page made for them are French. A notice too.
    The page's own language (the body's) wins over the browser's: English."""
    headers = {**launched.headers("carol"), "Accept-Language": "fr-FR,fr;q=0.9,en;q=0.8"}
    with httpx.Client(base_url=launched.url, headers=headers, timeout=30) as carol:
        chat = new_conversation(carol, title="Préférences")
        events = stream_message(carol, chat, {"message": "Retiens que je préfère les réponses courtes"})
        assert events[0].event == "run_started" and events[0].data["language"] == "fr"
        steps = [(e.data["key"], e.data["label"]) for e in events if e.event == "step"]
        assert steps == [
            ("context", "Lecture du contexte"),
            ("context", "Lecture du contexte"),
            ("proposal", "Préparation d'une modification de vos instructions"),
            ("proposal", "Préparation d'une modification de vos instructions"),
        ]
        (proposal,) = [e.data for e in events if e.event == "proposal"]
        assert (proposal["summary"], proposal["page_title"]) == (
            "Je préfère les réponses courtes",
            "Mon IA Switchboard",
        )
        assert events[-1].event == "final" and events[-1].data["text"] == (
            "J'ajouterais ceci à votre page d'instructions « Mon IA Switchboard » : Je préfère les réponses "
            "courtes. Rien ne change tant que vous n'acceptez pas la proposition."
        )
        record = carol.get(f"/api/agent/runs/{events[0].data['run_id']}").json()
        assert (record["language"], record["status"]) == ("fr", "waiting_approval")
        page = carol.get(f"/api/agent/pages/{proposal['page_id']}").json()
        assert page["body"].startswith("# Mon IA Switchboard\n\n> Quiconque peut modifier cette page")
        stored = carol.get(f"/api/agent/proposals/{proposal['proposal_id']}").json()
        assert stored["reason"] == "L'utilisateur m'a demandé de retenir : Je préfère les réponses courtes"

        closed = new_conversation(carol, title="Fermée", allowed_sources={"workspace": False})
        french = stream_message(carol, closed, {"message": "Résume @page:roadmap"})
        english = stream_message(carol, closed, {"message": "Résume @page:roadmap", "language": "en"})
    assert [(e.data["code"], e.data["message"]) for e in french if e.event == "notice"] == [
        (
            "MENTION_NOT_ALLOWED",
            "@page:roadmap ne fait pas partie des sources autorisées de cette conversation : "
            "cette source ne sera pas lue.",
        )
    ]
    assert english[0].data["language"] == "en"
    assert [(e.data["code"], e.data["message"]) for e in english if e.event == "notice"] == [
        (
            "MENTION_NOT_ALLOWED",
            "@page:roadmap is not among this conversation's allowed sources; it will not be read.",
        )
    ]
    assert [e.data["label"] for e in english if e.event == "step"][:2] == [
        "Reading context",
        "Reading context",
    ]
