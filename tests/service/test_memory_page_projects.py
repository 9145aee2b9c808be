"""A page shared with a project, through PagesService's real stub (SQLite
and PostgreSQL): the project's members read it, its editors edit it when the
page is shared for writing, anyone else gets NOT_FOUND, a member removed from
the project loses the page at the next call, and the owner shares only with
a project they are a member of. Then whole runs (the four services, a
recording model on the wire): a run's read_page and search_workspace reach
only the pages the run's user may read, and its sources say so."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

import grpc
import pytest
from google.protobuf.field_mask_pb2 import FieldMask

from switchboard.engine.v1 import engine_pb2, engine_service_pb2
from switchboard.memory.v1 import (
    pages_pb2,
    pages_service_pb2_grpc,
    projects_pb2,
    projects_service_pb2,
    projects_service_pb2_grpc,
)
from switchboard.memory.v1 import pages_service_pb2 as pb
from switchboard.threads.v1 import threads_pb2, threads_service_pb2
from tests.conftest import DatabaseFactory
from tests.fakes.llm_server import FakeServer, openai_app, serve
from tests.service.harness import as_user, expect_error
from tests.service.system import System, collect, system

Pages = pages_service_pb2_grpc.PagesServiceStub
Projects = projects_service_pb2_grpc.ProjectsServiceStub
EDITOR, VIEWER = projects_pb2.PROJECT_ROLE_EDITOR, projects_pb2.PROJECT_ROLE_VIEWER
NOT_FOUND = (grpc.StatusCode.NOT_FOUND, "ERROR_REASON_NOT_FOUND")
PRECONDITION = (grpc.StatusCode.FAILED_PRECONDITION, "ERROR_REASON_FAILED_PRECONDITION")
INVALID = (grpc.StatusCode.INVALID_ARGUMENT, "ERROR_REASON_INVALID_ARGUMENT")

FRENCH_BODY = "Le train de livraison Apollo part le vendredi à 16 h ; la recette QA est obligatoire."
ENGLISH_BODY = "The Apollo release train leaves on Fridays at 16:00; QA sign-off is required."


async def make_project(
    projects: Projects, project_id: str, owner: str, members: dict[str, projects_pb2.ProjectRole.ValueType]
) -> None:
    project = projects_pb2.Project(id=project_id, display_name=project_id.title())
    await projects.CreateProject(projects_service_pb2.CreateProjectRequest(project=project), **as_user(owner))
    for user, role in members.items():
        await set_member(projects, owner, project_id, user, role)


async def set_member(
    projects: Projects, owner: str, project_id: str, user: str, role: projects_pb2.ProjectRole.ValueType
) -> None:
    member = projects_pb2.ProjectMember(project_id=project_id, user_id=user, role=role)
    await projects.SetProjectMember(
        projects_service_pb2.SetProjectMemberRequest(member=member), **as_user(owner)
    )


async def remove_member(projects: Projects, owner: str, project_id: str, user: str) -> None:
    await projects.RemoveProjectMember(
        projects_service_pb2.RemoveProjectMemberRequest(project_id=project_id, user_id=user), **as_user(owner)
    )


async def create(pages: Pages, user: str, title: str, body: str) -> pages_pb2.Page:
    page = pages_pb2.Page(title=title, body=body)
    return cast(
        pages_pb2.Page, (await pages.CreatePage(pb.CreatePageRequest(page=page), **as_user(user))).page
    )


async def share(
    pages: Pages, user: str, page_id: str, readers: list[str] | None = None, editors: list[str] | None = None
) -> pages_pb2.Page:
    request = pb.SetPageAclRequest(
        page_id=page_id, reader_project_ids=readers or [], editor_project_ids=editors or []
    )
    return cast(pages_pb2.Page, (await pages.SetPageAcl(request, **as_user(user))).page)


def get(pages: Pages, user: str, page_id: str) -> Any:
    return pages.GetPage(pb.GetPageRequest(page_id=page_id), **as_user(user))


def edit(pages: Pages, user: str, page_id: str, body: str) -> Any:
    request = pb.UpdatePageRequest(
        page=pages_pb2.Page(id=page_id, body=body), update_mask=FieldMask(paths=["body"])
    )
    return pages.UpdatePage(request, **as_user(user))


async def listed(pages: Pages, user: str) -> list[str]:
    return [page.id for page in (await pages.ListPages(pb.ListPagesRequest(), **as_user(user))).pages]


@pytest.fixture
async def stubs(memory_channel: grpc.aio.Channel) -> tuple[Pages, Projects]:
    """alice's project "apollo": bob an editor, carol a viewer; dave is in no way a member."""
    pages, projects = Pages(memory_channel), Projects(memory_channel)
    await make_project(projects, "apollo", "alice", {"bob": EDITOR, "carol": VIEWER})
    return pages, projects


async def test_a_page_shared_for_reading_is_read_by_every_member_and_edited_by_none(
    stubs: tuple[Pages, Projects],
) -> None:
    pages, _ = stubs
    page = await create(pages, "alice", "Train de livraison", FRENCH_BODY)
    shared = await share(pages, "alice", page.id, readers=["apollo"])
    assert list(shared.reader_project_ids) == ["apollo"] and list(shared.editor_project_ids) == []
    for member in ("carol", "bob"):
        got = (await get(pages, member, page.id)).page
        assert (got.body, list(got.reader_project_ids)) == (FRENCH_BODY, ["apollo"])
        assert page.id in await listed(pages, member)
        versions = await pages.ListPageVersions(
            pb.ListPageVersionsRequest(page_id=page.id), **as_user(member)
        )
        assert [v.version for v in versions.versions] == [1]
        # Read access, even for an editor of the project: the page is shared for reading.
        error = await expect_error(edit(pages, member, page.id, "Le train part le lundi."), *PRECONDITION)
        assert "only its owner and editors" in (error.details() or "")
    # dave: NOT_FOUND everywhere, like a missing page, and not in his list.
    await expect_error(get(pages, "dave", page.id), *NOT_FOUND)
    await expect_error(edit(pages, "dave", page.id, "x"), *NOT_FOUND)
    await expect_error(
        pages.ListPageVersions(pb.ListPageVersionsRequest(page_id=page.id), **as_user("dave")), *NOT_FOUND
    )
    await expect_error(
        pages.GetPageVersion(pb.GetPageVersionRequest(page_id=page.id, version=1), **as_user("dave")),
        *NOT_FOUND,
    )
    assert page.id not in await listed(pages, "dave")


async def test_a_page_shared_for_writing_is_edited_by_the_projects_editors_only(
    stubs: tuple[Pages, Projects],
) -> None:
    pages, _ = stubs
    page = await create(pages, "alice", "Release train", ENGLISH_BODY)
    await share(pages, "alice", page.id, readers=["apollo"], editors=["apollo"])  # both: editor
    got = (await get(pages, "bob", page.id)).page
    assert (list(got.reader_project_ids), list(got.editor_project_ids)) == ([], ["apollo"])
    edited = (await edit(pages, "bob", page.id, "The Apollo release train leaves on Mondays.")).page
    assert edited.version == 2
    # carol is a viewer of apollo: she reads the new version, she cannot edit it.
    assert (await get(pages, "carol", page.id)).page.version == 2
    await expect_error(edit(pages, "carol", page.id, "Sundays."), *PRECONDITION)
    # The ACL and the page itself stay the owner's.
    await expect_error(share(pages, "bob", page.id, readers=["apollo"]), *PRECONDITION)
    await expect_error(
        pages.DeletePage(pb.DeletePageRequest(page_id=page.id), **as_user("bob")), *PRECONDITION
    )
    await expect_error(edit(pages, "dave", page.id, "x"), *NOT_FOUND)


async def test_membership_is_read_at_each_call(stubs: tuple[Pages, Projects]) -> None:
    """Removed from the project, carol loses the page, its versions, her
    proposal on it and her instruction page at her next call; bob, made a
    viewer, reads but no longer edits."""
    pages, projects = stubs
    page = await create(pages, "alice", "Train de livraison", FRENCH_BODY)
    await share(pages, "alice", page.id, editors=["apollo"])
    proposal = (
        await pages.CreateProposal(
            pb.CreateProposalRequest(
                page_id=page.id, proposed_body=FRENCH_BODY + "\nDépart à 17 h.", reason="nouvel horaire"
            ),
            **as_user("carol"),
        )
    ).proposal
    await pages.AddInstructionPage(pb.AddInstructionPageRequest(page_id=page.id), **as_user("carol"))
    active = await pages.GetActiveInstructions(pb.GetActiveInstructionsRequest(), **as_user("carol"))
    assert active.state == pages_pb2.INSTRUCTION_PAGE_STATE_READABLE and active.body == FRENCH_BODY
    await pages.GetProposal(pb.GetProposalRequest(proposal_id=proposal.id), **as_user("carol"))

    await remove_member(projects, "alice", "apollo", "carol")
    await expect_error(get(pages, "carol", page.id), *NOT_FOUND)
    assert page.id not in await listed(pages, "carol")
    await expect_error(
        pages.ListPageVersions(pb.ListPageVersionsRequest(page_id=page.id), **as_user("carol")), *NOT_FOUND
    )
    await expect_error(
        pages.GetProposal(pb.GetProposalRequest(proposal_id=proposal.id), **as_user("carol")), *NOT_FOUND
    )
    mine = await pages.ListProposals(pb.ListProposalsRequest(), **as_user("carol"))
    assert list(mine.proposals) == []
    active = await pages.GetActiveInstructions(pb.GetActiveInstructionsRequest(), **as_user("carol"))
    assert active.state == pages_pb2.INSTRUCTION_PAGE_STATE_UNREADABLE and active.body == ""
    instruction = await pages.ListInstructionPages(pb.ListInstructionPagesRequest(), **as_user("carol"))
    assert [p.state for p in instruction.pages] == [pages_pb2.INSTRUCTION_PAGE_STATE_UNREADABLE]
    # The owner still sees the proposal on her page.
    await pages.GetProposal(pb.GetProposalRequest(proposal_id=proposal.id), **as_user("alice"))

    assert (await edit(pages, "bob", page.id, "Lundi.")).page.version == 2
    await set_member(projects, "alice", "apollo", "bob", VIEWER)
    await expect_error(edit(pages, "bob", page.id, "Mardi."), *PRECONDITION)
    assert (await get(pages, "bob", page.id)).page.body == "Lundi."
    # Back in the project, carol reads it again: nothing was copied or kept.
    await set_member(projects, "alice", "apollo", "carol", VIEWER)
    assert (await get(pages, "carol", page.id)).page.version == 2


async def test_the_owner_shares_only_with_a_project_they_are_in(stubs: tuple[Pages, Projects]) -> None:
    pages, projects = stubs
    await make_project(projects, "hermes", "bob", {})
    page = await create(pages, "alice", "Release train", ENGLISH_BODY)
    for project_id in ("hermes", "nowhere"):
        error = await expect_error(share(pages, "alice", page.id, readers=[project_id]), *NOT_FOUND)
        assert f"project {project_id!r} not found" in (error.details() or "")
        await expect_error(share(pages, "alice", page.id, editors=["apollo", project_id]), *NOT_FOUND)
        request = pb.CreatePageRequest(
            page=pages_pb2.Page(title="Shared", body="x", editor_project_ids=[project_id])
        )
        await expect_error(pages.CreatePage(request, **as_user("alice")), *NOT_FOUND)
    await expect_error(share(pages, "alice", page.id, readers=["not a project!"]), *INVALID)
    # Nothing was written: bob, hermes's owner, still cannot read alice's page.
    await expect_error(get(pages, "bob", page.id), *NOT_FOUND)
    assert list((await get(pages, "alice", page.id)).page.reader_project_ids) == []
    # Any member may share their own page with the project: carol is a viewer.
    created = await pages.CreatePage(
        pb.CreatePageRequest(
            page=pages_pb2.Page(title="Notes de carol", body=FRENCH_BODY, editor_project_ids=["apollo"])
        ),
        **as_user("carol"),
    )
    assert list(created.page.editor_project_ids) == ["apollo"]
    assert (await edit(pages, "bob", created.page.id, "Relu par bob.")).page.version == 2
    # Sharing with no project again takes everyone's access away.
    await share(pages, "carol", created.page.id)
    await expect_error(get(pages, "bob", created.page.id), *NOT_FOUND)


# Whole runs: the engine's page tools read through GetPage and ListPages.


@pytest.fixture(scope="module")
def remote_server() -> Iterator[FakeServer]:
    with serve(openai_app) as server:
        yield server


@pytest.fixture
def remote(remote_server: FakeServer) -> FakeServer:
    remote_server.script.reset()
    return remote_server


@pytest.fixture
async def sb(make_database: DatabaseFactory, remote: FakeServer) -> AsyncIterator[System]:
    providers = [{"name": "remote", "kind": "openai", "base_url": f"{remote.url}/v1"}]
    models = [{"id": "remote-model", "provider": "remote", "model": "model-x", "profile": "balanced"}]
    router_settings = {"models_json": json.dumps(models), "arbitration_enabled": False}
    async with system(
        make_database, router_settings=router_settings, providers_json=json.dumps(providers)
    ) as running_system:
        await make_project(running_system.projects, "apollo", "alice", {"carol": VIEWER})
        yield running_system


async def chat(sb: System, user: str, text: str) -> engine_pb2.Run:
    # Named: no title model call comes after the run's own.
    created = await sb.threads.CreateConversation(
        threads_service_pb2.CreateConversationRequest(
            title="Release", allowed_sources=threads_pb2.AllowedSources(workspace=True)
        ),
        **as_user(user),
    )
    request = engine_service_pb2.StartRunRequest(
        conversation_id=created.conversation.id,
        message=text,
        requested_model="remote-model",
        surface=engine_pb2.SURFACE_CHAT,
    )
    events = await collect(sb.engine.StartRun(request, metadata=as_user(user)["metadata"], timeout=60))
    assert events[-1].WhichOneof("kind") == "final", events[-1]
    run = await sb.engine.GetRun(engine_service_pb2.GetRunRequest(run_id=events[0].run_id), **as_user(user))
    return cast(engine_pb2.Run, run.run)


def tool_results(remote: FakeServer) -> list[str]:
    """What the tools answered, as the model received it on the wire."""
    return [m["content"] for m in remote.script.requests[-1]["messages"] if m["role"] == "tool"]


def page_sources(run: engine_pb2.Run) -> set[tuple[str, str]]:
    return {(s.id, s.title) for s in run.sources if s.kind == "page"}


@pytest.mark.parametrize(
    ("title", "body", "query"),
    [
        ("Release train", ENGLISH_BODY, "release train"),
        ("Train de livraison", FRENCH_BODY, "train livraison"),
    ],
    ids=["en", "fr"],
)
async def test_a_runs_page_tools_read_only_the_pages_its_user_may_read(
    sb: System, remote: FakeServer, title: str, body: str, query: str
) -> None:
    page = (
        await sb.pages.CreatePage(
            pb.CreatePageRequest(page=pages_pb2.Page(title=title, body=body)), **as_user("alice")
        )
    ).page
    await sb.pages.SetPageAcl(
        pb.SetPageAclRequest(page_id=page.id, reader_project_ids=["apollo"]), **as_user("alice")
    )
    read = f"tool:read_page:{json.dumps({'page_id': page.id})}"
    search = f"tool:search_workspace:{json.dumps({'query': query})}"

    # carol, a viewer of apollo: the tool reads the page and the run says so.
    remote.script.steps = [read, "say:Fridays."]
    run = await chat(sb, "carol", "When does the train leave?")
    [answer] = tool_results(remote)
    assert body in answer
    assert page_sources(run) == {(page.id, title)}
    remote.script.steps = [search, "say:Found it."]
    run = await chat(sb, "carol", "Search the workspace.")
    [answer] = tool_results(remote)
    assert page.id in answer and page_sources(run) == {(page.id, title)}

    # dave is no member: the same calls find nothing, and the run read no page.
    remote.script.steps = [read, "say:I cannot read it."]
    run = await chat(sb, "dave", "When does the train leave?")
    [answer] = tool_results(remote)
    assert "not found" in answer and body not in answer
    assert page_sources(run) == set()
    remote.script.steps = [search, "say:Nothing."]
    run = await chat(sb, "dave", "Search the workspace.")
    [answer] = tool_results(remote)
    assert "No page matches" in answer and page.id not in answer and page_sources(run) == set()

    # Removed from apollo, carol's next run no longer reads it.
    await remove_member(sb.projects, "alice", "apollo", "carol")
    remote.script.steps = [read, "say:Gone."]
    run = await chat(sb, "carol", "When does the train leave?")
    [answer] = tool_results(remote)
    assert "not found" in answer and body not in answer
    assert page_sources(run) == set()
