"""Projects as the unit of sharing, through the memory service's real stubs
on SQLite and PostgreSQL: every member reads the same notes, context and
live state; roles gate writes; a non-member's answer is a missing project's;
membership changes take effect at the next call and go to the audit log; and
the upgrade from per-user names keeps everything and gives nobody more."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest
from alembic import command
from google.protobuf.duration_pb2 import Duration
from google.protobuf.field_mask_pb2 import FieldMask
from sqlalchemy import Connection, text

from services.memory.server import MIGRATIONS, build_server
from services.memory.settings import MemorySettings
from services.shared.db import create_engine
from services.shared.migrations import alembic_config, upgrade_to_head
from services.shared.projects import personal_project_id
from switchboard.memory.v1 import memory_pb2, memory_service_pb2_grpc, projects_pb2, projects_service_pb2_grpc
from switchboard.memory.v1 import memory_service_pb2 as pb
from switchboard.memory.v1 import projects_service_pb2 as jpb
from tests.service.harness import as_admin, as_user, create_projects, expect_error, running

Stub = memory_service_pb2_grpc.MemoryServiceStub
Projects = projects_service_pb2_grpc.ProjectsServiceStub
NOT_FOUND = (grpc.StatusCode.NOT_FOUND, "ERROR_REASON_NOT_FOUND")
DENIED = (grpc.StatusCode.PERMISSION_DENIED, "ERROR_REASON_PERMISSION_DENIED")
PRECONDITION = (grpc.StatusCode.FAILED_PRECONDITION, "ERROR_REASON_FAILED_PRECONDITION")
INVALID = (grpc.StatusCode.INVALID_ARGUMENT, "ERROR_REASON_INVALID_ARGUMENT")
VIEWER, EDITOR, OWNER = (
    projects_pb2.PROJECT_ROLE_VIEWER,
    projects_pb2.PROJECT_ROLE_EDITOR,
    projects_pb2.PROJECT_ROLE_OWNER,
)


@pytest.fixture
def memory_options() -> dict[str, Any]:
    return {"max_project_note_chars": 400}


@pytest.fixture
def stubs(memory_channel: grpc.aio.Channel) -> tuple[Stub, Projects]:
    return Stub(memory_channel), Projects(memory_channel)


def decision(title: str, body: str, project_id: str = "apollo") -> memory_pb2.Note:
    return memory_pb2.Note(project_id=project_id, kind=memory_pb2.NOTE_KIND_DECISION, title=title, body=body)


async def set_member(projects: Projects, by: str, user: str, role: int, project: str = "apollo") -> None:
    member = projects_pb2.ProjectMember(project_id=project, user_id=user, role=role)  # type: ignore[arg-type]
    await projects.SetProjectMember(jpb.SetProjectMemberRequest(member=member), **as_user(by))


async def recalled(stub: Stub, user: str, query: str, project_id: str = "apollo") -> list[str]:
    response = await stub.RecallNotes(
        pb.RecallNotesRequest(project_id=project_id, query=query), **as_user(user)
    )
    return [r.note.title for r in response.notes]


@pytest.mark.parametrize(
    ("title", "body", "query"),
    [
        ("Production database", "Production runs on PostgreSQL 16.", "which database in production?"),
        (
            "Base de production",
            "La base de données de production est PostgreSQL 16.",
            "quelle base de données en production ?",
        ),
    ],
    ids=["en", "fr"],
)
async def test_every_member_reads_the_projects_memory(
    stubs: tuple[Stub, Projects], memory_channel: grpc.aio.Channel, title: str, body: str, query: str
) -> None:
    stub, projects = stubs
    await create_projects(memory_channel, "alice", "apollo")
    saved = (await stub.CreateNote(pb.CreateNoteRequest(note=decision(title, body)), **as_user("alice"))).note
    # Bob is no member yet: apollo reads exactly like a project nobody made.
    for project in ("apollo", "nobody-made-this"):
        await expect_error(recalled(stub, "bob", query, project), *NOT_FOUND)
        await expect_error(
            stub.ListNotes(pb.ListNotesRequest(project_id=project), **as_user("bob")), *NOT_FOUND
        )
    await expect_error(stub.GetNote(pb.GetNoteRequest(id=saved.id), **as_user("bob")), *NOT_FOUND)
    await set_member(projects, "alice", "bob", VIEWER)
    # Now bob recalls alice's note, sees it in his list of every project, and reads it.
    assert await recalled(stub, "bob", query) == [title]
    everything = await stub.ListNotes(pb.ListNotesRequest(), **as_user("bob"))
    assert [n.id for n in everything.notes] == [saved.id]
    assert (await stub.GetNote(pb.GetNoteRequest(id=saved.id), **as_user("bob"))).note.body == body
    # Recall in his personal project does not cross into apollo.
    assert await recalled(stub, "bob", query, "") == []
    # Leaving takes effect at the next call.
    await projects.RemoveProjectMember(
        jpb.RemoveProjectMemberRequest(project_id="apollo", user_id="bob"), **as_user("bob")
    )
    await expect_error(recalled(stub, "bob", query), *NOT_FOUND)


async def test_roles_gate_every_write_with_a_reason(
    stubs: tuple[Stub, Projects], memory_channel: grpc.aio.Channel
) -> None:
    stub, projects = stubs
    await create_projects(memory_channel, "alice", "apollo", bob="viewer", carol="editor")
    note = (
        await stub.CreateNote(
            pb.CreateNoteRequest(note=decision("Deploys", "Deploys go out on Tuesday.")), **as_user("carol")
        )
    ).note
    assert note.project_id == "apollo"
    viewer_writes = [
        stub.CreateNote(pb.CreateNoteRequest(note=decision("Mine", "Bob writes.")), **as_user("bob")),
        stub.UpdateNote(
            pb.UpdateNoteRequest(
                note=memory_pb2.Note(id=note.id, title="Bob's"), update_mask=FieldMask(paths=["title"])
            ),
            **as_user("bob"),
        ),
        stub.DeleteNote(pb.DeleteNoteRequest(id=note.id), **as_user("bob")),
        stub.UpdateProjectContext(
            pb.UpdateProjectContextRequest(
                context=memory_pb2.ProjectContext(project_id="apollo", body="Rules.")
            ),
            **as_user("bob"),
        ),
        stub.SetLiveState(
            pb.SetLiveStateRequest(project_id="apollo", agent_id="qa", activity="testing"), **as_user("bob")
        ),
        stub.ClearLiveState(pb.ClearLiveStateRequest(project_id="apollo"), **as_user("bob")),
    ]
    for call in viewer_writes:
        error = await expect_error(call, *DENIED)
        assert "bob is a viewer of project 'apollo'" in (error.details() or "")
        assert "editor" in (error.details() or "")
    # An editor writes memory but does not manage members.
    await stub.UpdateProjectContext(
        pb.UpdateProjectContextRequest(context=memory_pb2.ProjectContext(project_id="apollo", body="Rules.")),
        **as_user("carol"),
    )
    error = await expect_error(set_member(projects, "carol", "dave", VIEWER), *DENIED)
    assert "owner" in (error.details() or "")
    # Every member reads the same context and live state.
    await stub.SetLiveState(
        pb.SetLiveStateRequest(
            project_id="apollo", agent_id="qa", activity="testing", ttl=Duration(seconds=60)
        ),
        **as_user("carol"),
    )
    for user in ("alice", "bob", "carol"):
        context = await stub.GetProjectContext(
            pb.GetProjectContextRequest(project_id="apollo"), **as_user(user)
        )
        assert context.context.body == "Rules."
        live = await stub.ListLiveState(pb.ListLiveStateRequest(project_id="apollo"), **as_user(user))
        assert [(e.agent_id, e.activity) for e in live.entries] == [("qa", "testing")]
    # A promotion takes effect at the next call.
    await set_member(projects, "alice", "bob", EDITOR)
    await stub.DeleteNote(pb.DeleteNoteRequest(id=note.id), **as_user("bob"))


async def test_live_state_of_a_shared_project_reaches_every_watcher(
    stubs: tuple[Stub, Projects], memory_channel: grpc.aio.Channel
) -> None:
    stub, _ = stubs
    await create_projects(memory_channel, "alice", "apollo", bob="editor")
    stream = stub.WatchLiveState(
        pb.WatchLiveStateRequest(project_id="apollo"), metadata=as_user("alice")["metadata"]
    )
    try:
        snapshot = await asyncio.wait_for(anext(aiter(stream)), 10)
        assert list(snapshot.entries) == []
        await stub.SetLiveState(
            pb.SetLiveStateRequest(project_id="apollo", agent_id="qa", activity="reviewing the login page"),
            **as_user("bob"),
        )
        event = await asyncio.wait_for(anext(aiter(stream)), 10)
        assert event.type == memory_pb2.LIVE_STATE_EVENT_TYPE_SET
        assert event.entries[0].activity == "reviewing the login page"
    finally:
        stream.cancel()


async def test_projects_and_members_have_their_rules(stubs: tuple[Stub, Projects]) -> None:
    _, projects = stubs
    created = await projects.CreateProject(
        jpb.CreateProjectRequest(project=projects_pb2.Project(id="apollo", display_name=" Apollo ")),
        **as_user("alice"),
    )
    assert (created.project.display_name, created.project.owner_user_id) == ("Apollo", "alice")
    assert created.project.caller_role == OWNER
    assert created.project.note_policy == projects_pb2.NOTE_POLICY_REVIEW
    await expect_error(
        projects.CreateProject(
            jpb.CreateProjectRequest(project=projects_pb2.Project(id="apollo", display_name="Mine")),
            **as_user("bob"),
        ),
        grpc.StatusCode.ALREADY_EXISTS,
        "ERROR_REASON_ALREADY_EXISTS",
    )
    for bad in ("bad id!", "", "x" * 129, personal_project_id("bob"), "personal-mine"):
        await expect_error(
            projects.CreateProject(
                jpb.CreateProjectRequest(project=projects_pb2.Project(id=bad, display_name="B")),
                **as_user("bob"),
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            error_reason_of(bad),
        )
    # The caller's projects: the personal one first, each with the caller's role.
    await set_member(projects, "alice", "bob", EDITOR)
    listed = await projects.ListProjects(jpb.ListProjectsRequest(), **as_user("bob"))
    assert [(p.id, p.personal, p.caller_role) for p in listed.projects] == [
        (personal_project_id("bob"), True, OWNER),
        ("apollo", False, EDITOR),
    ]
    paged = await projects.ListProjects(jpb.ListProjectsRequest(page_size=1), **as_user("bob"))
    rest = await projects.ListProjects(
        jpb.ListProjectsRequest(page_size=1, page_token=paged.next_page_token), **as_user("bob")
    )
    assert [p.id for p in [*paged.projects, *rest.projects]] == [p.id for p in listed.projects]
    assert rest.next_page_token == ""
    # "", "default", "personal" and its id all name bob's personal project.
    for name in ("", "default", "personal", personal_project_id("bob")):
        access = await projects.CheckProjectAccess(
            jpb.CheckProjectAccessRequest(project_id=name), **as_user("bob")
        )
        assert (access.project_id, access.role) == (personal_project_id("bob"), OWNER)
    # A personal project has no other member; the last owner stays owner.
    await expect_error(
        set_member(projects, "bob", "alice", VIEWER, personal_project_id("bob")), *PRECONDITION
    )
    await expect_error(set_member(projects, "alice", "alice", EDITOR), *PRECONDITION)
    await expect_error(
        projects.RemoveProjectMember(
            jpb.RemoveProjectMemberRequest(project_id="apollo", user_id="alice"), **as_user("alice")
        ),
        *PRECONDITION,
    )
    # With a second owner, the first may step down.
    await set_member(projects, "alice", "bob", OWNER)
    await set_member(projects, "bob", "alice", VIEWER)
    members = await projects.ListProjectMembers(
        jpb.ListProjectMembersRequest(project_id="apollo"), **as_user("alice")
    )
    assert [(m.user_id, m.role) for m in members.members] == [("alice", VIEWER), ("bob", OWNER)]
    # Settings are the owners'.
    update = jpb.UpdateProjectRequest(
        project=projects_pb2.Project(id="apollo", note_policy=projects_pb2.NOTE_POLICY_AUTO),
        update_mask=FieldMask(paths=["note_policy"]),
    )
    await expect_error(projects.UpdateProject(update, **as_user("alice")), *DENIED)
    updated = await projects.UpdateProject(update, **as_user("bob"))
    assert (
        updated.project.note_policy == projects_pb2.NOTE_POLICY_AUTO
        and updated.project.display_name == "Apollo"
    )
    await expect_error(
        projects.GetProject(jpb.GetProjectRequest(id="apollo"), **as_user("carol")), *NOT_FOUND
    )


def error_reason_of(bad: str) -> str:
    return "ERROR_REASON_TOO_LARGE" if len(bad) > 128 else "ERROR_REASON_INVALID_ARGUMENT"


async def test_membership_changes_are_audited_for_admins(stubs: tuple[Stub, Projects]) -> None:
    _, projects = stubs
    await projects.CreateProject(
        jpb.CreateProjectRequest(project=projects_pb2.Project(id="apollo", display_name="Apollo")),
        **as_user("alice"),
    )
    await set_member(projects, "alice", "bob", VIEWER)
    await set_member(projects, "alice", "bob", EDITOR)
    await projects.RemoveProjectMember(
        jpb.RemoveProjectMemberRequest(project_id="apollo", user_id="bob"), **as_user("alice")
    )
    await expect_error(projects.ListAuditEvents(jpb.ListAuditEventsRequest(), **as_user("alice")), *DENIED)
    events = (await projects.ListAuditEvents(jpb.ListAuditEventsRequest(), **as_admin("root"))).events
    assert [(e.actor, e.action, e.target, e.detail) for e in reversed(events)] == [
        ("alice", "project.create", "apollo", "'Apollo': created"),
        ("alice", "project.member_add", "apollo", "bob as viewer"),
        ("alice", "project.member_role", "apollo", "bob as editor"),
        ("alice", "project.member_remove", "apollo", "bob"),
    ]


async def test_a_projects_notes_have_a_size_quota_whoever_writes_them(
    stubs: tuple[Stub, Projects], memory_channel: grpc.aio.Channel
) -> None:
    stub, _ = stubs
    await create_projects(memory_channel, "alice", "apollo", bob="editor")
    words = (
        "amber birch cedar dune ember fjord grove heath islet jade karst lagoon marsh nectar "
        "orchid pebble quartz ravine summit tundra umber valley willow xenon yarrow zephyr "
        "anchor bridge canyon delta estuary forest glacier harbor inlet jungle kelp ledge "
        "meadow north oasis prairie quarry reef savanna tide upland volcano wetland yucca"
    ).split()

    def text(n: int) -> str:  # 150 characters of words no other note has
        return " ".join(words[n * 10 : n * 10 + 10] * 3)[:150]

    def note(title: str, n: int, project_id: str = "apollo") -> pb.CreateNoteRequest:
        return pb.CreateNoteRequest(note=decision(title, text(n), project_id))

    first = (await stub.CreateNote(note("One", 0), **as_user("alice"))).note
    await stub.CreateNote(note("Two", 1), **as_user("bob"))
    quota = (grpc.StatusCode.RESOURCE_EXHAUSTED, "ERROR_REASON_QUOTA_EXCEEDED")
    error = await expect_error(stub.CreateNote(note("Three", 2), **as_user("bob")), *quota)
    assert "apollo" in (error.details() or "") and "400" in (error.details() or "")
    grown = pb.UpdateNoteRequest(
        note=memory_pb2.Note(id=first.id, body=text(0) + " " + text(3)), update_mask=FieldMask(paths=["body"])
    )
    await expect_error(stub.UpdateNote(grown, **as_user("alice")), *quota)
    # A shorter text fits, and another project has its own room.
    shorter = pb.UpdateNoteRequest(
        note=memory_pb2.Note(id=first.id, body="amber birch"), update_mask=FieldMask(paths=["body"])
    )
    await stub.UpdateNote(shorter, **as_user("alice"))
    await stub.CreateNote(note("Three", 2), **as_user("bob"))
    await stub.CreateNote(note("Mine", 3, project_id=""), **as_user("bob"))


async def _to_revision(url: str, revision: str) -> None:
    engine = create_engine(url)
    config = alembic_config(MIGRATIONS, "memory")

    def run(connection: Connection) -> None:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)

    try:
        async with engine.begin() as connection:
            await connection.run_sync(run)
    finally:
        await engine.dispose()


async def test_the_upgrade_turns_each_users_names_into_their_own_projects(db_url: str) -> None:
    """Data written by the previous schema: alice's and bob's "apollo", each
    one's "default", a name only carol used. After the upgrade each is a
    project of its one user, reached by the old name; nothing is lost."""
    await _to_revision(db_url, "memory_0006")
    now = datetime(2026, 11, 30, 9, tzinfo=UTC)
    rows = [
        ("n1", "alice", "apollo", "Alice's apollo decision", "Apollo ships on Friday."),
        ("n2", "bob", "apollo", "Bob's apollo decision", "Apollo is a moon mission."),
        ("n3", "alice", "default", "Alice's tabs", "Alice indents with tabs."),
        ("n4", "bob", "default", "Bob's spaces", "Bob indents with spaces."),
        ("n5", "carol", "gemini", "Carol's gemini", "Gemini flies twice."),
    ]
    engine = create_engine(db_url)
    try:
        async with engine.begin() as connection:
            for note_id, owner, project, title, body in rows:
                await connection.execute(
                    text(
                        "INSERT INTO notes (id, owner_user_id, project_id, kind, title, body, tags_json,"
                        " author_agent_id, content_hash, embedder, embedding_dimension, source_hash,"
                        " create_time, update_time) VALUES (:id, :owner, :project, 1, :title, :body,"
                        " '[]', '', :hash, '', 0, '', :now, :now)"
                    ),
                    {
                        "id": note_id,
                        "owner": owner,
                        "project": project,
                        "title": title,
                        "body": body,
                        "hash": note_id,
                        "now": now,
                    },  # fmt: skip
                )
            await connection.execute(
                text(
                    "INSERT INTO project_contexts (owner_user_id, project_id, body, update_time) VALUES"
                    " ('alice', 'apollo', 'Alice''s rules.', :now), ('bob', 'apollo', 'Bob''s rules.', :now),"
                    " ('carol', 'default', 'Carol''s rules.', :now)"
                ),
                {"now": now},
            )
            await connection.execute(
                text(
                    "INSERT INTO live_state (owner_user_id, project_id, agent_id, activity, detail,"
                    " update_time, expire_time) VALUES ('bob', 'apollo', 'qa', 'testing', '', :now, :later)"
                ),
                {"now": now, "later": datetime(2099, 1, 1, tzinfo=UTC)},
            )
            await connection.execute(
                text(
                    "INSERT INTO memory_revisions (owner_user_id, project_id, scope, revision) VALUES"
                    " ('alice', 'apollo', 'notes', 7), ('bob', 'apollo', 'notes', 3)"
                )
            )
        await upgrade_to_head(engine, MIGRATIONS, "memory")
        async with engine.connect() as connection:
            projects = (
                await connection.execute(text("SELECT id, owner_user_id, personal FROM projects ORDER BY id"))
            ).all()
            members = (
                await connection.execute(
                    text("SELECT project_id, user_id, role FROM project_members ORDER BY project_id")
                )
            ).all()
    finally:
        await engine.dispose()
    # Exactly one member per project, its owner: nobody gained access.
    assert sorted((p, u) for p, u, _ in members) == sorted((p, o) for p, o, _ in projects)
    assert {role for _, _, role in members} == {OWNER}
    ids = {(owner, bool(personal)): project for project, owner, personal in projects}
    assert ids[("carol", False)] == "gemini"  # a name only carol used keeps its id
    assert ids[("alice", True)] == personal_project_id("alice")
    assert ids[("alice", False)] != ids[("bob", False)] and "apollo" not in (
        ids[("alice", False)],
        ids[("bob", False)],
    )

    settings = MemorySettings(port=0, database_url=db_url, embedder="hashing", reembed_at_startup=False)
    async with running(build_server, settings) as (_, channel):
        stub = Stub(channel)

        async def titles(user: str, project: str) -> list[str]:
            listed = await stub.ListNotes(pb.ListNotesRequest(project_id=project), **as_user(user))
            return [n.title for n in listed.notes]

        # Each reaches their own apollo by its old name; recall and context follow.
        assert await titles("alice", "apollo") == ["Alice's apollo decision"]
        assert await titles("bob", "apollo") == ["Bob's apollo decision"]
        assert await recalled(stub, "alice", "apollo friday") == ["Alice's apollo decision"]
        context = await stub.GetProjectContext(
            pb.GetProjectContextRequest(project_id="apollo"), **as_user("bob")
        )
        assert context.context.body == "Bob's rules."
        live = await stub.ListLiveState(pb.ListLiveStateRequest(project_id="apollo"), **as_user("bob"))
        assert [e.agent_id for e in live.entries] == ["qa"]
        assert (
            await stub.ListLiveState(pb.ListLiveStateRequest(project_id="apollo"), **as_user("alice"))
        ).entries == []
        # "default" became each one's personal project.
        assert await titles("alice", "personal") == ["Alice's tabs"]
        assert await titles("bob", "default") == ["Bob's spaces"]
        carol = await stub.GetProjectContext(pb.GetProjectContextRequest(project_id=""), **as_user("carol"))
        assert carol.context.body == "Carol's rules."
        # Nobody reaches another's project, by its old name or its new id.
        assert await titles("carol", "gemini") == ["Carol's gemini"]
        await expect_error(titles("alice", "gemini"), *NOT_FOUND)
        await expect_error(titles("alice", ids[("bob", False)]), *NOT_FOUND)
        everything = await stub.ListNotes(pb.ListNotesRequest(), **as_user("alice"))
        assert sorted(n.title for n in everything.notes) == ["Alice's apollo decision", "Alice's tabs"]
