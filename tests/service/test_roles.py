"""Roles and agent membership inside the services, on SQLite and PostgreSQL:
the role matrix of every admin-only write (as a user: PERMISSION_DENIED with
its reason, nothing written; as an admin: done and recorded in the audit
log), agent owners and members, the claim of an agent registered before
owners existed, and the audit log's keyset paging."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest
from google.protobuf.field_mask_pb2 import FieldMask
from sqlalchemy import text

from services.shared.db import create_engine
from services.shared.errors import error_info
from services.threads.settings import ThreadsSettings
from switchboard.common.v1 import common_pb2
from switchboard.router.v1 import router_pb2, router_service_pb2_grpc
from switchboard.router.v1 import router_service_pb2 as rpb
from switchboard.threads.v1 import threads_pb2, threads_service_pb2_grpc
from switchboard.threads.v1 import threads_service_pb2 as tpb
from tests.service.harness import as_admin, as_user, expect_error

Router = router_service_pb2_grpc.RouterServiceStub
Threads = threads_service_pb2_grpc.ThreadsServiceStub
DENIED = (grpc.StatusCode.PERMISSION_DENIED, "ERROR_REASON_PERMISSION_DENIED")
ADMIN, ALICE, BOB, CAROL = as_admin("root"), as_user("alice"), as_user("bob"), as_user("carol")


@pytest.fixture
def router(router_channel: grpc.aio.Channel) -> Router:
    return Router(router_channel)


@pytest.fixture
def threads(threads_channel: grpc.aio.Channel) -> Threads:
    return Threads(threads_channel)


async def audit_of(list_events: Callable[..., Awaitable[Any]]) -> list[tuple[str, str, str, str]]:
    page = await list_events(rpb.ListAuditEventsRequest(page_size=500), **ADMIN)
    return [(e.actor, e.actor_role, e.action, e.target) for e in page.events]


async def test_catalog_writes_are_for_admins_and_recorded(router: Router) -> None:
    skill = router_pb2.Skill(name="changelog-digest", description="Write release notes", body="List changes.")
    # As a user: refused before anything is read or written, with the reason.
    error = await expect_error(
        router.CreateSkill(rpb.CreateSkillRequest(request_id="r1", skill=skill), **ALICE), *DENIED
    )
    assert "for admins" in (error.details() or "")
    created = (await router.CreateSkill(rpb.CreateSkillRequest(request_id="r1", skill=skill), **ADMIN)).skill
    # A user's retry of the admin's request id gets no skill either.
    await expect_error(
        router.CreateSkill(rpb.CreateSkillRequest(request_id="r1", skill=skill), **ALICE), *DENIED
    )
    change = rpb.UpdateSkillRequest(
        skill=router_pb2.Skill(id=created.id, body="Group by feature."), update_mask=FieldMask(paths=["body"])
    )
    await expect_error(router.UpdateSkill(change, **ALICE), *DENIED)
    await expect_error(router.DeleteSkill(rpb.DeleteSkillRequest(skill_id=created.id), **BOB), *DENIED)
    # A user cannot even learn whether a skill exists through a write.
    await expect_error(router.DeleteSkill(rpb.DeleteSkillRequest(skill_id="missing"), **BOB), *DENIED)
    unchanged = (await router.GetSkill(rpb.GetSkillRequest(skill=created.id), **ALICE)).skill
    assert unchanged.body == "List changes."
    assert (await router.UpdateSkill(change, **ADMIN)).skill.body == "Group by feature."
    await router.DeleteSkill(rpb.DeleteSkillRequest(skill_id=created.id), **ADMIN)
    # Per-user enablement stays every user's own business.
    preset = (await router.ListSkills(rpb.ListSkillsRequest(page_size=1), **ALICE)).skills[0]
    await router.SetSkillEnablement(rpb.SetSkillEnablementRequest(skill_id=preset.id, enabled=False), **ALICE)

    assert await audit_of(router.ListAuditEvents) == [
        ("root", "admin", "skill.delete", created.id),
        ("root", "admin", "skill.update", created.id),
        ("root", "admin", "skill.create", created.id),
    ]
    await expect_error(router.ListAuditEvents(rpb.ListAuditEventsRequest(), **ALICE), *DENIED)


async def test_a_role_other_than_admin_is_a_user(router: Router) -> None:
    skill = router_pb2.Skill(name="x-skill", body="b")
    for role in ("Admin", "root", "", "admin "):
        await expect_error(
            router.CreateSkill(rpb.CreateSkillRequest(skill=skill), **as_user("mallory", role)), *DENIED
        )


async def test_the_audit_log_pages_newest_first_by_keyset(router: Router) -> None:
    ids = []
    for n in range(5):
        skill = router_pb2.Skill(name=f"paged-{n}", body="b")
        ids.append((await router.CreateSkill(rpb.CreateSkillRequest(skill=skill), **ADMIN)).skill.id)
    seen: list[str] = []
    token = ""
    while True:
        page = await router.ListAuditEvents(
            rpb.ListAuditEventsRequest(page_size=2, page_token=token), **ADMIN
        )
        seen += [e.target for e in page.events]
        token = page.next_page_token
        if not token:
            break
    assert seen == ids[::-1]
    newest = (await router.ListAuditEvents(rpb.ListAuditEventsRequest(page_size=1), **ADMIN)).events[0]
    before = common_pb2.AuditPosition(time=newest.create_time, id=newest.id)
    older = await router.ListAuditEvents(rpb.ListAuditEventsRequest(page_size=500, before=before), **ADMIN)
    assert [e.target for e in older.events] == ids[-2::-1]
    await expect_error(
        router.ListAuditEvents(rpb.ListAuditEventsRequest(page_token="%%%"), **ADMIN),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )


def entry(agent: str, content: str) -> threads_pb2.Entry:
    return threads_pb2.Entry(
        requester="user", target=agent, role=threads_pb2.ROLE_USER, source="user", content=content
    )


async def test_only_members_ask_an_agent_or_read_its_thread(threads: Threads) -> None:
    agent = (
        await threads.CreateAgent(tpb.CreateAgentRequest(agent=threads_pb2.Agent(id="qa")), **ALICE)
    ).agent
    assert agent.owner == "alice"
    thread = (
        await threads.EnsureAgentThread(tpb.EnsureAgentThreadRequest(target_agent_id="qa"), **ALICE)
    ).thread
    await threads.AppendEntries(
        tpb.AppendEntriesRequest(request_id="a1", thread_id=thread.id, entries=[entry("qa", "secret plan")]),
        **ALICE,
    )
    # The registry stays visible to everyone: bob sees the agent and its owner.
    assert (await threads.GetAgent(tpb.GetAgentRequest(agent_id="qa"), **BOB)).agent.owner == "alice"
    views = [
        tpb.ListEntriesRequest(for_agent=tpb.ListEntriesRequest.ForAgent(agent_id="qa")),
        tpb.ListEntriesRequest(for_pair=tpb.ListEntriesRequest.ForPair(requester="user", target="qa")),
        tpb.ListEntriesRequest(thread_id=thread.id),
    ]
    calls: list[Callable[[dict[str, Any]], Awaitable[Any]]] = [
        lambda who: threads.EnsureAgentThread(tpb.EnsureAgentThreadRequest(target_agent_id="qa"), **who),
        lambda who: threads.AppendEntries(
            tpb.AppendEntriesRequest(request_id="b1", thread_id=thread.id, entries=[entry("qa", "hi")]), **who
        ),
        *[(lambda who, v=v: threads.ListEntries(v, **who)) for v in views],
        lambda who: threads.ListSegments(tpb.ListSegmentsRequest(thread_id=thread.id), **who),
        lambda who: threads.ExportAgentThread(tpb.ExportAgentThreadRequest(agent_id="qa"), **who),
        lambda who: threads.ListProviderSessions(
            tpb.ListProviderSessionsRequest(agent_thread_id=thread.id), **who
        ),
        lambda who: threads.ListAgentMembers(tpb.ListAgentMembersRequest(agent_id="qa"), **who),
    ]
    for call in calls:
        error = await expect_error(call(BOB), *DENIED)
        assert "not a member" in (error.details() or "") and "secret" not in (error.details() or "")
    # An admin is no member either: an admin manages, members read.
    await expect_error(calls[2](ADMIN), *DENIED)
    # The owner lets bob in; then bob reads what alice wrote.
    added = await threads.AddAgentMember(tpb.AddAgentMemberRequest(agent_id="qa", user_id="bob"), **ALICE)
    assert list(added.members) == ["alice", "bob"]
    for call in calls:
        await call(BOB)
    page = await threads.ListEntries(views[0], **BOB)
    assert "secret plan" in [e.content for e in page.entries]
    # Removed again, bob is out again.
    await threads.RemoveAgentMember(tpb.RemoveAgentMemberRequest(agent_id="qa", user_id="bob"), **ALICE)
    await expect_error(threads.ListEntries(views[0], **BOB), *DENIED)


async def test_changing_an_agent_or_its_members_is_for_its_owner_or_an_admin(threads: Threads) -> None:
    await threads.CreateAgent(tpb.CreateAgentRequest(agent=threads_pb2.Agent(id="main")), **ALICE)
    await threads.AddAgentMember(tpb.AddAgentMemberRequest(agent_id="main", user_id="bob"), **ALICE)
    rename = tpb.UpdateAgentRequest(
        agent=threads_pb2.Agent(id="main", display_name="Main", provider_id="claude"),
        update_mask=FieldMask(paths=["display_name", "provider_id"]),
    )
    # A member who is not the owner may ask, not change.
    for who in (BOB, CAROL):
        await expect_error(threads.UpdateAgent(rename, **who), *DENIED)
        await expect_error(
            threads.AddAgentMember(tpb.AddAgentMemberRequest(agent_id="main", user_id="carol"), **who),
            *DENIED,
        )
        await expect_error(
            threads.RemoveAgentMember(tpb.RemoveAgentMemberRequest(agent_id="main", user_id="bob"), **who),
            *DENIED,
        )
    assert (await threads.GetAgent(tpb.GetAgentRequest(agent_id="main"), **BOB)).agent.display_name == "main"
    assert (await threads.UpdateAgent(rename, **ALICE)).agent.display_name == "Main"
    # An admin changes any agent and its members, and may list them.
    change = tpb.UpdateAgentRequest(
        agent=threads_pb2.Agent(id="main", model="m2"), update_mask=FieldMask(paths=["model"])
    )
    assert (await threads.UpdateAgent(change, **ADMIN)).agent.model == "m2"
    await threads.AddAgentMember(tpb.AddAgentMemberRequest(agent_id="main", user_id="carol"), **ADMIN)
    await threads.RemoveAgentMember(tpb.RemoveAgentMemberRequest(agent_id="main", user_id="bob"), **ADMIN)
    listed = await threads.ListAgentMembers(tpb.ListAgentMembersRequest(agent_id="main"), **ADMIN)
    assert (listed.owner, list(listed.members)) == ("alice", ["alice", "carol"])
    # The owner stays a member; an unknown agent is NOT_FOUND, a blank user INVALID_ARGUMENT.
    await expect_error(
        threads.RemoveAgentMember(tpb.RemoveAgentMemberRequest(agent_id="main", user_id="alice"), **ADMIN),
        grpc.StatusCode.FAILED_PRECONDITION,
        "ERROR_REASON_FAILED_PRECONDITION",
    )
    await expect_error(
        threads.AddAgentMember(tpb.AddAgentMemberRequest(agent_id="nobody", user_id="x"), **ADMIN),
        grpc.StatusCode.NOT_FOUND,
        "ERROR_REASON_NOT_FOUND",
    )
    await expect_error(
        threads.AddAgentMember(tpb.AddAgentMemberRequest(agent_id="main", user_id="  "), **ALICE),
        grpc.StatusCode.INVALID_ARGUMENT,
        "ERROR_REASON_INVALID_ARGUMENT",
    )
    assert await audit_of(threads.ListAuditEvents) == [
        ("root", "admin", "agent.member_remove", "main"),
        ("root", "admin", "agent.member_add", "main"),
        ("root", "admin", "agent.update", "main"),
        ("alice", "user", "agent.update", "main"),
        ("alice", "user", "agent.member_add", "main"),
        ("alice", "user", "agent.create", "main"),
    ]
    details = (
        (await threads.ListAuditEvents(tpb.ListAuditEventsRequest(page_size=1), **ADMIN)).events[0].detail
    )
    assert details == "member=bob"
    await expect_error(threads.ListAuditEvents(tpb.ListAuditEventsRequest(), **ALICE), *DENIED)


async def test_an_agent_registered_before_owners_is_claimed_by_its_next_user(
    threads: Threads, threads_settings: ThreadsSettings
) -> None:
    await threads.CreateAgent(tpb.CreateAgentRequest(agent=threads_pb2.Agent(id="legacy")), **ALICE)
    # What the migration leaves for an agent registered before owners: no owner, no member.
    engine = create_engine(threads_settings.database_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(text("UPDATE agents SET owner_id = '' WHERE id = 'legacy'"))
            await connection.execute(text("DELETE FROM agent_members WHERE agent_id = 'legacy'"))
    finally:
        await engine.dispose()
    assert (await threads.GetAgent(tpb.GetAgentRequest(agent_id="legacy"), **BOB)).agent.owner == ""
    # An admin managing it does not claim it.
    await threads.UpdateAgent(
        tpb.UpdateAgentRequest(
            agent=threads_pb2.Agent(id="legacy", persona="kept"), update_mask=FieldMask(paths=["persona"])
        ),
        **ADMIN,
    )
    assert (await threads.GetAgent(tpb.GetAgentRequest(agent_id="legacy"), **BOB)).agent.owner == ""
    await threads.EnsureAgentThread(tpb.EnsureAgentThreadRequest(target_agent_id="legacy"), **BOB)
    assert (await threads.GetAgent(tpb.GetAgentRequest(agent_id="legacy"), **ALICE)).agent.owner == "bob"
    await expect_error(
        threads.EnsureAgentThread(tpb.EnsureAgentThreadRequest(target_agent_id="legacy"), **ALICE), *DENIED
    )
    events = await audit_of(threads.ListAuditEvents)
    assert events[0] == ("bob", "user", "agent.claim", "legacy")


async def test_an_import_registers_the_agent_for_the_importer_and_needs_membership_after(
    threads: Threads,
) -> None:
    await threads.CreateAgent(tpb.CreateAgentRequest(agent=threads_pb2.Agent(id="arch")), **ALICE)
    thread = (
        await threads.EnsureAgentThread(tpb.EnsureAgentThreadRequest(target_agent_id="arch"), **ALICE)
    ).thread
    await threads.AppendEntries(
        tpb.AppendEntriesRequest(request_id="x", thread_id=thread.id, entries=[entry("arch", "design")]),
        **ALICE,
    )
    files = (await threads.ExportAgentThread(tpb.ExportAgentThreadRequest(agent_id="arch"), **ALICE)).files
    # Into alice's agent, bob is refused before anything is compared.
    await expect_error(threads.ImportAgentThread(tpb.ImportAgentThreadRequest(files=files), **BOB), *DENIED)
    # Renamed to a new agent, bob's import registers it as his.
    moved = [
        threads_pb2.ThreadFile(path=f.path.replace("agents/arch/", "agents/arch2/"), content=f.content)
        for f in files
        if "providers" not in f.path
    ]
    for f in moved:
        f.content = f.content.replace('"arch"', '"arch2"').replace(thread.id, str(uuid.uuid4()))
    try:
        await threads.ImportAgentThread(tpb.ImportAgentThreadRequest(files=moved), **BOB)
    except grpc.aio.AioRpcError as error:  # the layout check may refuse a rename; say which
        info = error_info(error)
        pytest.fail(f"import refused: {error.code()} {error.details()} {info}")
    assert (await threads.GetAgent(tpb.GetAgentRequest(agent_id="arch2"), **ALICE)).agent.owner == "bob"
    await expect_error(
        threads.ListEntries(
            tpb.ListEntriesRequest(for_agent=tpb.ListEntriesRequest.ForAgent(agent_id="arch2")), **ALICE
        ),
        *DENIED,
    )
