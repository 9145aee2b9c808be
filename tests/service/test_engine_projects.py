"""Runs read the memory of the right project, proven on the wire: an ask
reads the notes, project context and live state of the *asked agent's*
project, a chat run those of the project its request names, and save_note
writes into the run's project. The four services run in this process; the
threads service asks memory's ProjectsService who may ask which agent."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import grpc
import pytest
from google.protobuf.field_mask_pb2 import FieldMask

from switchboard.engine.v1 import (
    engine_pb2,
    engine_service_pb2,
)
from switchboard.memory.v1 import (
    memory_pb2,
    memory_service_pb2,
    projects_pb2,
    projects_service_pb2,
    projects_service_pb2_grpc,
)
from switchboard.threads.v1 import threads_pb2, threads_service_pb2
from tests.conftest import DatabaseFactory
from tests.fakes.llm_server import FakeServer, openai_app, serve
from tests.service.harness import as_user, expect_error
from tests.service.system import System, collect, system

EDITOR, VIEWER = projects_pb2.PROJECT_ROLE_EDITOR, projects_pb2.PROJECT_ROLE_VIEWER
APOLLO_CONTEXT = "Apollo rule: every release train needs a QA sign-off."
APOLLO_NOTE = "The Apollo release train leaves on Fridays at 16:00."
QUESTION = "When does the Apollo release train leave?"


@pytest.fixture(scope="module")
def remote_server() -> Iterator[FakeServer]:
    with serve(openai_app) as server:
        yield server


@pytest.fixture
def remote(remote_server: FakeServer) -> FakeServer:
    remote_server.script.reset()
    return remote_server


@asynccontextmanager
async def project_system(
    make_database: DatabaseFactory, remote: FakeServer
) -> AsyncIterator[tuple[System, projects_service_pb2_grpc.ProjectsServiceStub]]:
    """tests.service.system's four services with the recording provider as
    the only model, and a stub of memory's ProjectsService."""
    providers = [{"name": "remote", "kind": "openai", "base_url": f"{remote.url}/v1"}]
    models = [{"id": "remote-model", "provider": "remote", "model": "model-x", "profile": "balanced"}]
    router_settings = {"models_json": json.dumps(models), "arbitration_enabled": False}
    async with system(
        make_database, router_settings=router_settings, providers_json=json.dumps(providers)
    ) as running_system:
        yield running_system, running_system.projects


@pytest.fixture
async def sb(make_database: DatabaseFactory, remote: FakeServer) -> AsyncIterator[System]:
    """alice's project "apollo" (bob an editor, carol a viewer; notes saved
    by agents go in at once), with its context, a note and live state, and
    its agent qa; alice and bob each have personal context of their own."""
    async with project_system(make_database, remote) as (running_system, projects):
        project = projects_pb2.Project(
            id="apollo", display_name="Apollo", note_policy=projects_pb2.NOTE_POLICY_AUTO
        )
        await projects.CreateProject(
            projects_service_pb2.CreateProjectRequest(project=project), **as_user("alice")
        )
        for user, role in (("bob", EDITOR), ("carol", VIEWER)):
            member = projects_pb2.ProjectMember(project_id="apollo", user_id=user, role=role)
            await projects.SetProjectMember(
                projects_service_pb2.SetProjectMemberRequest(member=member), **as_user("alice")
            )
        memory = running_system.memory
        for user, project_id, body in (
            ("alice", "apollo", APOLLO_CONTEXT),
            ("alice", "", "Alice's own rule: PERSONAL-ALICE."),
            ("bob", "", "Bob's own rule: PERSONAL-BOB."),
        ):
            context = memory_pb2.ProjectContext(project_id=project_id, body=body)
            await memory.UpdateProjectContext(
                memory_service_pb2.UpdateProjectContextRequest(context=context), **as_user(user)
            )
        note = memory_pb2.Note(
            project_id="apollo",
            kind=memory_pb2.NOTE_KIND_FACT,
            title="Apollo release train",
            body=APOLLO_NOTE,
        )
        await memory.CreateNote(memory_service_pb2.CreateNoteRequest(note=note), **as_user("alice"))
        personal = memory_pb2.Note(
            kind=memory_pb2.NOTE_KIND_FACT,
            title="Personal release train",
            body="My own release train leaves PERSONAL-NOTE on Mondays.",
        )
        await memory.CreateNote(memory_service_pb2.CreateNoteRequest(note=personal), **as_user("bob"))
        await memory.SetLiveState(
            memory_service_pb2.SetLiveStateRequest(
                project_id="apollo", agent_id="dev", activity="fixing the Apollo login bug"
            ),
            **as_user("alice"),
        )
        agent = threads_pb2.Agent(id="qa", persona="The QA agent.", model="remote-model", project_id="apollo")
        created = await running_system.threads.CreateAgent(
            threads_service_pb2.CreateAgentRequest(agent=agent), **as_user("alice")
        )
        assert created.agent.project_id == "apollo"
        yield running_system


def ask(sb: System, user: str, text: str = QUESTION) -> Any:
    request = engine_service_pb2.AskAgentRequest(requester="main", target_agent_id="qa", message=text)
    return sb.engine.AskAgent(request, metadata=as_user(user)["metadata"], timeout=60)


def notices(events: list[engine_pb2.RunEvent]) -> list[str]:
    return [e.notice.code for e in events if e.WhichOneof("kind") == "notice"]


async def test_an_ask_reads_the_notes_context_and_live_state_of_the_asked_agents_project(
    sb: System, remote: FakeServer
) -> None:
    """bob is an editor of apollo, not a member of the agent: he asks qa,
    and its model receives apollo's memory, none of bob's or alice's own."""
    remote.script.steps = ["say:On Fridays at 16:00."]
    events = await collect(ask(sb, "bob"))
    assert events[-1].WhichOneof("kind") == "final", events[-1]
    assert notices(events) == []
    system = remote.script.requests[-1]["messages"][0]["content"]
    assert APOLLO_CONTEXT in system and APOLLO_NOTE in system
    assert "# Live state (who is doing what now)\n- dev: fixing the Apollo login bug" in system
    for foreign in ("PERSONAL-ALICE", "PERSONAL-BOB", "PERSONAL-NOTE"):
        assert foreign not in system
    request = engine_service_pb2.GetRunRequest(run_id=events[0].run_id)
    run = (await sb.engine.GetRun(request, **as_user("bob"))).run
    assert {layer.key: layer.item_count for layer in run.layers}["live_state"] == 1
    assert any(source.kind == "memory" for source in run.sources)


async def test_a_viewer_of_the_agents_project_may_not_ask_it(sb: System, remote: FakeServer) -> None:
    error = await expect_error(
        collect(ask(sb, "carol")), grpc.StatusCode.PERMISSION_DENIED, "ERROR_REASON_PERMISSION_DENIED"
    )
    assert "viewer of project 'apollo'" in (error.details() or "")
    # dave is in no way a member: the agent reads like a missing one.
    await expect_error(collect(ask(sb, "dave")), grpc.StatusCode.NOT_FOUND, "ERROR_REASON_NOT_FOUND")
    assert remote.script.requests == []  # no model was called


async def test_an_agent_member_outside_the_project_asks_without_its_memory(
    sb: System, remote: FakeServer
) -> None:
    await sb.threads.AddAgentMember(
        threads_service_pb2.AddAgentMemberRequest(agent_id="qa", user_id="dave"), **as_user("alice")
    )
    remote.script.steps = ["say:I cannot tell."]
    events = await collect(ask(sb, "dave"))
    assert events[-1].WhichOneof("kind") == "final", events[-1]
    assert notices(events) == ["PROJECT_MEMORY_UNREADABLE"]
    system = remote.script.requests[-1]["messages"][0]["content"]
    assert APOLLO_CONTEXT not in system and APOLLO_NOTE not in system and "Apollo login bug" not in system


async def start(sb: System, user: str, project_id: str, text: str = QUESTION) -> list[engine_pb2.RunEvent]:
    # Named: no title model call comes after the run's own.
    created = await sb.threads.CreateConversation(
        threads_service_pb2.CreateConversationRequest(title="Release"), **as_user(user)
    )
    chat = created.conversation.id
    request = engine_service_pb2.StartRunRequest(
        conversation_id=chat,
        message=text,
        requested_model="remote-model",
        surface=engine_pb2.SURFACE_CHAT,
        project_id=project_id,
    )
    return await collect(sb.engine.StartRun(request, metadata=as_user(user)["metadata"], timeout=60))


async def test_a_chat_run_reads_the_project_its_request_names(sb: System, remote: FakeServer) -> None:
    remote.script.steps = ["say:Fridays.", "say:Mondays."]
    events = await start(sb, "carol", "apollo")  # a viewer reads
    assert events[-1].WhichOneof("kind") == "final", events[-1]
    system = remote.script.requests[-1]["messages"][0]["content"]
    assert APOLLO_CONTEXT in system and APOLLO_NOTE in system and "Apollo login bug" in system
    events = await start(sb, "bob", "")  # "": bob's personal project
    assert events[-1].WhichOneof("kind") == "final", events[-1]
    system = remote.script.requests[-1]["messages"][0]["content"]
    assert "PERSONAL-BOB" in system and APOLLO_CONTEXT not in system and APOLLO_NOTE not in system


async def test_a_chat_run_in_a_project_the_user_is_not_in_is_not_found(
    sb: System, remote: FakeServer
) -> None:
    for project_id in ("apollo", "nowhere"):
        await expect_error(start(sb, "dave", project_id), grpc.StatusCode.NOT_FOUND, "ERROR_REASON_NOT_FOUND")
    assert remote.script.requests == []


async def test_save_note_writes_into_the_runs_project(sb: System, remote: FakeServer) -> None:
    fields = {"kind": "decision", "title": "Apollo freeze", "body": "the Apollo freeze starts Monday"}
    note = json.dumps(fields)
    remote.script.steps = [f"tool:save_note:{note}", "say:Saved."]
    events = await start(sb, "bob", "apollo", "Save a note: the Apollo freeze starts Monday")
    assert events[-1].WhichOneof("kind") == "final", events[-1]
    listed = await sb.memory.ListNotes(
        memory_service_pb2.ListNotesRequest(project_id="apollo"), **as_user("alice")
    )
    assert [n.project_id for n in listed.notes if n.title == "Apollo freeze"] == ["apollo"]
    request = memory_service_pb2.ListNotesRequest(project_id="personal")
    personal = await sb.memory.ListNotes(request, **as_user("bob"))
    assert "Apollo freeze" not in [n.title for n in personal.notes]


@pytest.mark.parametrize(
    ("decision", "title", "body", "question", "noticed"),
    [
        (
            "We decided to run production on PostgreSQL 16 from now on.",
            "Production",
            "run production on PostgreSQL 16",
            "Which database runs production?",
            "PostgreSQL 16",
        ),
        (
            "Nous avons décidé de faire tourner la production sur PostgreSQL 16 désormais.",
            "Production",
            "la production sur PostgreSQL 16",
            "Quelle base de données fait tourner la production ?",
            "PostgreSQL 16",
        ),
    ],
    ids=["en", "fr"],
)
async def test_an_agent_promotes_a_decision_a_member_accepts_and_the_next_run_recalls_it(
    sb: System, remote: FakeServer, decision: str, title: str, body: str, question: str, noticed: str
) -> None:
    """bob tells the project's agent a decision without asking to save it:
    the agent's save_note becomes a proposal (apollo reviews its agents'
    notes), alice accepts it, and carol's next ask gets the note on the wire."""
    await sb.projects.UpdateProject(
        projects_service_pb2.UpdateProjectRequest(
            project=projects_pb2.Project(id="apollo", note_policy=projects_pb2.NOTE_POLICY_REVIEW),
            update_mask=FieldMask(paths=["note_policy"]),
        ),
        **as_user("alice"),
    )
    fields = {"kind": "decision", "title": title, "body": body, "reason": "a lasting project decision"}
    remote.script.steps = [f"tool:save_note:{json.dumps(fields)}", "say:Noted for the team."]
    events = await collect(ask(sb, "bob", decision))
    assert events[-1].WhichOneof("kind") == "final", events[-1]
    assert notices(events) == ["NOTE_PROPOSED"]
    # The tool's answer told the model it is a proposal, and nothing was saved yet.
    tool_message = next(m for m in remote.script.requests[-1]["messages"] if m["role"] == "tool")
    assert "proposed for the project's memory" in tool_message["content"]
    listed = await sb.memory.ListNoteProposals(
        memory_service_pb2.ListNoteProposalsRequest(
            project_id="apollo", state=memory_pb2.NOTE_PROPOSAL_STATE_PENDING
        ),
        **as_user("alice"),
    )
    [proposal] = listed.proposals
    assert (proposal.note.body, proposal.note.author_agent_id, proposal.proposer_user_id) == (
        body,
        "qa",
        "bob",
    )
    assert proposal.run_id == events[0].run_id and proposal.reason == "a lasting project decision"
    notes = await sb.memory.ListNotes(
        memory_service_pb2.ListNotesRequest(project_id="apollo"), **as_user("alice")
    )
    assert body not in [n.body for n in notes.notes]
    await sb.memory.AcceptNoteProposal(
        memory_service_pb2.AcceptNoteProposalRequest(id=proposal.id), **as_user("alice")
    )
    # Another member's next run in the project receives it.
    await sb.projects.SetProjectMember(
        projects_service_pb2.SetProjectMemberRequest(
            member=projects_pb2.ProjectMember(project_id="apollo", user_id="carol", role=EDITOR)
        ),
        **as_user("alice"),
    )
    remote.script.steps = ["say:PostgreSQL 16."]
    events = await collect(ask(sb, "carol", question))
    assert events[-1].WhichOneof("kind") == "final", events[-1]
    system = remote.script.requests[-1]["messages"][0]["content"]
    assert body in system and noticed in system


async def test_a_planted_direction_never_becomes_a_proposal(sb: System, remote: FakeServer) -> None:
    """The words of a promoted note must be the request's: text the run only
    read (here, the model's own invention) is refused, not proposed."""
    fields = {"kind": "fact", "title": "Secret", "body": "the admin password is hunter2"}
    remote.script.steps = [f"tool:save_note:{json.dumps(fields)}", "say:Done."]
    events = await collect(ask(sb, "bob", "Summarise the Apollo release plan."))
    assert events[-1].WhichOneof("kind") == "final", events[-1]
    assert notices(events) == ["WRITE_REFUSED"]
    listed = await sb.memory.ListNoteProposals(
        memory_service_pb2.ListNoteProposalsRequest(project_id="apollo"), **as_user("alice")
    )
    assert list(listed.proposals) == []


# Live state: what the asked agent's model receives, and the tools that read and set it


def until(entry: memory_pb2.LiveStateEntry) -> str:
    """An entry's expiry as the live state layer writes it."""
    return str(entry.expire_time.ToDatetime().strftime("%H:%M UTC"))


async def set_live(sb: System, agent_id: str, activity: str, detail: str = "") -> memory_pb2.LiveStateEntry:
    request = memory_service_pb2.SetLiveStateRequest(
        project_id="apollo", agent_id=agent_id, activity=activity, detail=detail
    )
    response: memory_service_pb2.SetLiveStateResponse = await sb.memory.SetLiveState(
        request, **as_user("alice")
    )
    return response.entry


async def live_state(sb: System, user: str = "carol") -> dict[str, memory_pb2.LiveStateEntry]:
    listed = await sb.memory.ListLiveState(
        memory_service_pb2.ListLiveStateRequest(project_id="apollo"), **as_user(user)
    )
    return {entry.agent_id: entry for entry in listed.entries}


def live_layer(system: str) -> str:
    """The live state layer of a system message: from its heading to the next layer."""
    start = system.index("# Live state (who is doing what now)\n")
    end = system.find("\n\n", start)
    return system[start : end if end >= 0 else len(system)]


async def test_an_ask_gets_the_projects_live_state_as_it_is_at_each_ask(
    sb: System, remote: FakeServer
) -> None:
    """French and English entries reach the asked agent's model intact, and
    a change between two asks is in the second: nothing is kept between asks."""
    architect = await set_live(
        sb, "architect", "Je relis l'export des factures", "avant la livraison de mardi — étape 2/3"
    )
    dev = await set_live(sb, "dev", "Fixing the Apollo login bug", "after the SSO change")
    remote.script.steps = ["say:Vendredi.", "say:Friday."]
    first = await collect(ask(sb, "bob"))
    assert first[-1].WhichOneof("kind") == "final", first[-1]
    assert live_layer(remote.script.requests[-1]["messages"][0]["content"]) == (
        "# Live state (who is doing what now)\n"
        "- architect: Je relis l'export des factures (avant la livraison de mardi — étape 2/3) "
        f"until {until(architect)}\n"
        f"- dev: Fixing the Apollo login bug (after the SSO change) until {until(dev)}"
    )

    architect = await set_live(sb, "architect", "Découpe la tâche « paiement » en étapes")
    await sb.memory.DeleteLiveState(
        memory_service_pb2.DeleteLiveStateRequest(project_id="apollo", agent_id="dev"), **as_user("alice")
    )
    second = await collect(ask(sb, "bob", "Who is on the payment task?"))
    assert second[-1].WhichOneof("kind") == "final", second[-1]
    system = remote.script.requests[-1]["messages"][0]["content"]
    assert live_layer(system) == (
        "# Live state (who is doing what now)\n"
        f"- architect: Découpe la tâche « paiement » en étapes until {until(architect)}"
    )
    # Its place: after the memory, before the agent's own working context.
    assert system.index("# Memory") < system.index("# Live state") < system.index("# You are the agent")
    run = (
        await sb.engine.GetRun(engine_service_pb2.GetRunRequest(run_id=second[0].run_id), **as_user("bob"))
    ).run
    layer = {layer.key: layer for layer in run.layers}["live_state"]
    assert layer.present and layer.item_count == 1


async def test_an_asked_agent_sets_its_live_state_and_the_next_runs_read_it(
    sb: System, remote: FakeServer
) -> None:
    """qa says in French what it is doing (its own entry, through memory as
    the asking user); bob's chat says it in English (his entry). Memory
    returns both, and the next runs' models receive them."""
    french = {"activity": "Je vérifie l'export des factures", "detail": "demandé par main — étape 1/2"}
    remote.script.steps = [
        f"tool:set_live_state:{json.dumps(french, ensure_ascii=False)}",
        "say:C'est en cours.",
    ]
    events = await collect(ask(sb, "bob", "Peux-tu vérifier l'export des factures ?"))
    assert events[-1].WhichOneof("kind") == "final", events[-1]
    assert notices(events) == []
    offered = {tool["function"]["name"] for tool in remote.script.requests[0]["tools"]}
    assert {"live_state", "set_live_state"} <= offered
    qa = (await live_state(sb))["qa"]
    assert (qa.activity, qa.detail) == (french["activity"], french["detail"])
    tool_message = next(m for m in remote.script.requests[-1]["messages"] if m["role"] == "tool")
    stamp = qa.expire_time.ToDatetime().strftime("%Y-%m-%dT%H:%M:%SZ")
    assert (
        f"Your live state is now:\n- qa (you): {french['activity']} ({french['detail']}) until {stamp}"
        in tool_message["content"]
    )
    actions = [
        (e.action.tool, e.action.family, e.action.status) for e in events if e.WhichOneof("kind") == "action"
    ]
    assert actions == [("set_live_state", "live_state", "ok")]
    # The run's log holds the live state it read, then the entry it set,
    # exactly as memory stored it.
    changes = [(e.sequence, e.live_state) for e in events if e.WhichOneof("kind") == "live_state"]
    [(read_at, read), (set_at, changed)] = changes
    assert read.type == memory_pb2.LIVE_STATE_EVENT_TYPE_SNAPSHOT and "qa" not in {
        entry.agent_id for entry in read.entries
    }
    assert changed.type == memory_pb2.LIVE_STATE_EVENT_TYPE_SET and list(changed.entries) == [qa]
    action_at = next(e.sequence for e in events if e.WhichOneof("kind") == "action")
    assert read_at < action_at < set_at

    english = {"activity": "Writing the Apollo release notes", "ttl_seconds": 600}
    remote.script.steps = [f"tool:set_live_state:{json.dumps(english)}", "say:Done."]
    events = await start(sb, "bob", "apollo", "Tell the team I am writing the release notes.")
    assert events[-1].WhichOneof("kind") == "final", events[-1]
    chat_system = remote.script.requests[-2]["messages"][0]["content"]
    assert f"- qa: {french['activity']} ({french['detail']}) until {until(qa)}" in live_layer(chat_system)
    entries = await live_state(sb)
    bob = entries["bob"]  # a chat's entry is its user's
    assert bob.activity == english["activity"]
    assert 590 <= bob.expire_time.seconds - bob.update_time.seconds <= 600

    remote.script.steps = ["say:Both."]
    await collect(ask(sb, "bob", "Who is doing what?"))
    assert live_layer(remote.script.requests[-1]["messages"][0]["content"]) == (
        "# Live state (who is doing what now)\n"
        f"- bob: Writing the Apollo release notes until {until(bob)}\n"
        f"- dev: fixing the Apollo login bug until {until(entries['dev'])}\n"
        f"- qa: Je vérifie l'export des factures (demandé par main — étape 1/2) until {until(qa)}"
    )


@pytest.mark.parametrize(
    "message",
    ["Dis à l'équipe que je relis la doc.", "Tell the team I am reading the docs."],
    ids=["fr", "en"],
)
async def test_a_viewer_cannot_set_live_state_and_the_model_reads_why(
    sb: System, remote: FakeServer, message: str
) -> None:
    """carol only views apollo: memory refuses her run's write, the model
    reads a refusal it can act on, she gets a notice, and the run ends well."""
    remote.script.steps = ['tool:set_live_state:{"activity": "relit la doc"}', "say:Je ne peux pas."]
    events = await start(sb, "carol", "apollo", message)
    assert events[-1].WhichOneof("kind") == "final", events[-1]
    refused = [e.notice for e in events if e.WhichOneof("kind") == "notice"]
    assert [(n.code, n.message) for n in refused] == [
        (
            "WRITE_REFUSED",
            "set_live_state was refused: carol is a viewer of project 'apollo'; this needs the editor role.",
        )
    ]
    tool_message = next(m for m in remote.script.requests[-1]["messages"] if m["role"] == "tool")
    assert 'status="error"' in tool_message["content"]
    assert (
        "refused: carol is a viewer of project 'apollo'; this needs the editor role. "
        "The live state was not changed; do not retry." in tool_message["content"]
    )
    assert list(await live_state(sb)) == ["dev"]
    # Nothing was set: the run's log has the live state it read, no change.
    changes = [e.live_state for e in events if e.WhichOneof("kind") == "live_state"]
    assert [(c.type, [entry.agent_id for entry in c.entries]) for c in changes] == [
        (memory_pb2.LIVE_STATE_EVENT_TYPE_SNAPSHOT, ["dev"])
    ]
