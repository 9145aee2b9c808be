"""What the engine attaches to an agent of a shared project belongs to the
project, on both databases: alice's project apollo (bob an editor, carol a
viewer, dave no member) with its agent qa. qa's default webhook is one for
the project: bob sets it, carol reads it but may not set it (PERMISSION_DENIED
with the reason), dave finds nothing (NOT_FOUND), and every member's ask of
qa that names no webhook is delivered to it. A schedule alice made for qa is
listed to bob and carol, paused and resumed by bob, not by carol, and NOT_FOUND
to dave. Conversation defaults and schedules, and defaults of agents of
personal projects, stay their user's alone."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
from standardwebhooks import Webhook

from switchboard.engine.v1 import engine_service_pb2, schedules_pb2, schedules_service_pb2
from switchboard.memory.v1 import projects_pb2, projects_service_pb2
from switchboard.threads.v1 import threads_pb2, threads_service_pb2
from tests.conftest import DatabaseFactory
from tests.fakes.webhook_receiver import WebhookReceiver, webhook_receiver
from tests.service.harness import as_user, expect_error
from tests.service.system import System, collect, conversation, system

# A Standard Webhooks secret (whsec_ + base64 of 32 bytes), for tests only;
# loopback allowed so the local receiver passes the engine's URL policy.
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8GKYo="
WEBHOOKS = {
    "webhook_secret": SECRET,
    "webhook_allow_loopback": True,
    "webhook_backoff_initial": 0.05,
    "webhook_backoff_max": 0.2,
}
pb = schedules_service_pb2
NOT_FOUND = (grpc.StatusCode.NOT_FOUND, "ERROR_REASON_NOT_FOUND")
DENIED = (grpc.StatusCode.PERMISSION_DENIED, "ERROR_REASON_PERMISSION_DENIED")


@pytest.fixture
async def receiver() -> AsyncIterator[WebhookReceiver]:
    with webhook_receiver() as running_receiver:
        yield running_receiver


@pytest.fixture
async def sb(make_database: DatabaseFactory) -> AsyncIterator[System]:
    """alice's project apollo (bob an editor, carol a viewer) and its agent qa."""
    async with system(make_database, **WEBHOOKS) as running_system:
        project = projects_pb2.Project(id="apollo", display_name="Apollo")
        await running_system.projects.CreateProject(
            projects_service_pb2.CreateProjectRequest(project=project), **as_user("alice")
        )
        for user, role in (
            ("bob", projects_pb2.PROJECT_ROLE_EDITOR),
            ("carol", projects_pb2.PROJECT_ROLE_VIEWER),
        ):
            member = projects_pb2.ProjectMember(project_id="apollo", user_id=user, role=role)
            await running_system.projects.SetProjectMember(
                projects_service_pb2.SetProjectMemberRequest(member=member), **as_user("alice")
            )
        agent = threads_pb2.Agent(id="qa", display_name="QA", persona="Checks releases.", project_id="apollo")
        await running_system.threads.CreateAgent(
            threads_service_pb2.CreateAgentRequest(agent=agent), **as_user("alice")
        )
        yield running_system


def agent_target(agent_id: str = "qa") -> engine_service_pb2.WebhookDefaultTarget:
    return engine_service_pb2.WebhookDefaultTarget(agent_id=agent_id)


async def set_default(
    sb: System, user: str, url: str, where: engine_service_pb2.WebhookDefaultTarget | None = None
) -> str:
    request = engine_service_pb2.SetWebhookDefaultRequest(target=where or agent_target(), webhook_url=url)
    return (await sb.engine.SetWebhookDefault(request, **as_user(user))).webhook_url


async def get_default(
    sb: System, user: str, where: engine_service_pb2.WebhookDefaultTarget | None = None
) -> str:
    request = engine_service_pb2.GetWebhookDefaultRequest(target=where or agent_target())
    return (await sb.engine.GetWebhookDefault(request, **as_user(user))).webhook_url


async def ask(sb: System, user: str, agent_id: str = "qa") -> str:
    request = engine_service_pb2.AskAgentRequest(requester=user, target_agent_id=agent_id, message="Status?")
    events = await collect(sb.engine.AskAgent(request, metadata=as_user(user)["metadata"], timeout=30))
    return str(events[-1].run_id)


async def test_an_agents_default_webhook_is_its_projects(sb: System, receiver: WebhookReceiver) -> None:
    assert await get_default(sb, "alice") == ""
    assert await set_default(sb, "bob", receiver.url) == receiver.url
    # One default for the project: every member reads the same.
    for user in ("alice", "bob", "carol"):
        assert await get_default(sb, user) == receiver.url
    error = await expect_error(set_default(sb, "carol", "https://example.com/hook"), *DENIED)
    assert error.details() == (
        "carol is a viewer of project 'apollo'; setting the agent's default webhook needs the editor role"
    )
    await expect_error(set_default(sb, "carol", ""), *DENIED)
    for call in (get_default(sb, "dave"), set_default(sb, "dave", receiver.url)):
        await expect_error(call, *NOT_FOUND)
    # It serves every member's asks that name no webhook: alice's, bob set it.
    run_id = await ask(sb, "alice")
    (request,) = await receiver.arrived(1)
    run = Webhook(SECRET).verify(request.body, request.headers)["data"]["run"]
    assert run["id"] == run_id and run["agent_id"] == "qa" and run["user_id"] == "alice"
    # The owner clears it for everyone.
    assert await set_default(sb, "alice", "") == ""
    assert await get_default(sb, "bob") == ""
    assert await get_default(sb, "alice") == ""


async def test_conversation_and_personal_agent_defaults_stay_per_user(
    sb: System, receiver: WebhookReceiver
) -> None:
    conversation_id = await conversation(sb, "bob")
    where = engine_service_pb2.WebhookDefaultTarget(conversation_id=conversation_id)
    await set_default(sb, "bob", receiver.url, where)
    await expect_error(get_default(sb, "alice", where), *NOT_FOUND)
    # An agent of alice's personal project: the registry every user sees,
    # where each user's default is their own.
    helper = threads_pb2.Agent(id="helper", display_name="Helper", persona="Helps.")
    await sb.threads.CreateAgent(threads_service_pb2.CreateAgentRequest(agent=helper), **as_user("alice"))
    await set_default(sb, "alice", receiver.url, agent_target("helper"))
    assert await get_default(sb, "bob", agent_target("helper")) == ""
    assert await get_default(sb, "alice", agent_target("helper")) == receiver.url


async def create_schedule(sb: System, user: str, agent_id: str = "qa") -> schedules_pb2.Schedule:
    schedule = schedules_pb2.Schedule(cron="0 9 * * MON", message="Weekly release check", agent_id=agent_id)
    response = await sb.schedules.CreateSchedule(pb.CreateScheduleRequest(schedule=schedule), **as_user(user))
    return response.schedule


async def listed(sb: System, user: str, agent_id: str = "") -> list[str]:
    request = pb.ListSchedulesRequest(agent_id=agent_id)
    return [s.id for s in (await sb.schedules.ListSchedules(request, **as_user(user))).schedules]


async def test_an_agents_schedules_are_its_projects(sb: System) -> None:
    schedule = await create_schedule(sb, "alice")
    # Listed to the project's members when they name the agent; their own
    # listing stays their own schedules.
    for user in ("alice", "bob", "carol"):
        assert await listed(sb, user, "qa") == [schedule.id]
    assert await listed(sb, "bob") == []
    for user in ("bob", "carol"):
        got = await sb.schedules.GetSchedule(pb.GetScheduleRequest(schedule_id=schedule.id), **as_user(user))
        assert got.schedule.user_id == "alice"  # it still runs as its creator
    # An editor pauses and resumes it; a viewer may not.
    paused = await sb.schedules.PauseSchedule(
        pb.PauseScheduleRequest(schedule_id=schedule.id), **as_user("bob")
    )
    assert paused.schedule.paused
    error = await expect_error(
        sb.schedules.ResumeSchedule(pb.ResumeScheduleRequest(schedule_id=schedule.id), **as_user("carol")),
        *DENIED,
    )
    assert error.details() == (
        "carol is a viewer of project 'apollo'; resuming the agent's schedules needs the editor role"
    )
    for call in (
        sb.schedules.PauseSchedule(pb.PauseScheduleRequest(schedule_id=schedule.id), **as_user("carol")),
        sb.schedules.DeleteSchedule(pb.DeleteScheduleRequest(schedule_id=schedule.id), **as_user("carol")),
    ):
        await expect_error(call, *DENIED)
    resumed = await sb.schedules.ResumeSchedule(
        pb.ResumeScheduleRequest(schedule_id=schedule.id), **as_user("bob")
    )
    assert not resumed.schedule.paused and resumed.schedule.HasField("next_run_time")
    # dave, no member: the schedule and the agent do not exist for him.
    for call in (
        sb.schedules.GetSchedule(pb.GetScheduleRequest(schedule_id=schedule.id), **as_user("dave")),
        sb.schedules.PauseSchedule(pb.PauseScheduleRequest(schedule_id=schedule.id), **as_user("dave")),
        sb.schedules.DeleteSchedule(pb.DeleteScheduleRequest(schedule_id=schedule.id), **as_user("dave")),
        sb.schedules.ListSchedules(pb.ListSchedulesRequest(agent_id="qa"), **as_user("dave")),
        create_schedule(sb, "dave"),
    ):
        await expect_error(call, *NOT_FOUND)
    # Creating one needs the editor role; bob's is listed to alice.
    error = await expect_error(create_schedule(sb, "carol"), *DENIED)
    assert "needs the editor role" in error.details()
    bobs = await create_schedule(sb, "bob")
    assert await listed(sb, "alice", "qa") == [schedule.id, bobs.id]
    assert await listed(sb, "alice") == [schedule.id]
    # An editor deletes another member's schedule.
    await sb.schedules.DeleteSchedule(pb.DeleteScheduleRequest(schedule_id=schedule.id), **as_user("bob"))
    assert await listed(sb, "carol", "qa") == [bobs.id]


async def test_conversation_schedules_stay_their_users(sb: System) -> None:
    conversation_id = await conversation(sb, "alice")
    schedule = schedules_pb2.Schedule(cron="@daily", message="Digest", conversation_id=conversation_id)
    created = (
        await sb.schedules.CreateSchedule(pb.CreateScheduleRequest(schedule=schedule), **as_user("alice"))
    ).schedule
    for user in ("bob", "carol"):
        await expect_error(
            sb.schedules.GetSchedule(pb.GetScheduleRequest(schedule_id=created.id), **as_user(user)),
            *NOT_FOUND,
        )
        await expect_error(
            sb.schedules.PauseSchedule(pb.PauseScheduleRequest(schedule_id=created.id), **as_user(user)),
            *NOT_FOUND,
        )
        assert await listed(sb, user) == []
