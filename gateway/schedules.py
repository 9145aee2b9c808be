"""The caller's scheduled runs: create, list, read, pause, resume, delete
(the engine's ScheduleService). Each tick starts an ordinary run, listed
with the conversation's runs, with surface `schedule`."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field, model_validator

from gateway import deps, responses
from gateway.deps import User, rpc
from gateway.params import ID_MAX, Id, PageSize, PageToken
from switchboard.engine.v1 import schedules_pb2, schedules_service_pb2

router = responses.ApiRouter(prefix="/api/schedules")
# An agent whose schedules to list ("" = all of the caller's own).
AgentFilter = Annotated[str, Query(max_length=ID_MAX, pattern=r"^[A-Za-z0-9._:-]*$")]


class ScheduleBody(BaseModel):
    """A new schedule: when (cron, time_zone), what (message), where (exactly
    one of conversation_id and agent_id)."""

    model_config = ConfigDict(extra="forbid")

    cron: str = Field(min_length=1, max_length=200)
    time_zone: str = Field(default="", max_length=64)
    # Length is checked by the engine (413 beyond its limit).
    message: str = Field(min_length=1)
    conversation_id: str = Field(default="", max_length=36)
    agent_id: str = Field(default="", max_length=128)
    # Idempotency key: a retried POST returns the schedule it created.
    request_id: str = Field(default="", max_length=128)

    @model_validator(mode="after")
    def _one_target(self) -> ScheduleBody:
        if bool(self.conversation_id) == bool(self.agent_id):
            raise ValueError("give exactly one target: conversation_id or agent_id")
        return self


_COUNT = "how many; a number"


class Schedule(responses.ProtoView, proto=schedules_pb2.Schedule):
    run_count: int = responses.number(_COUNT)
    missed_count: int = responses.number(_COUNT)


class ScheduleList(responses.Body):
    """A page of the caller's schedules, oldest first."""

    schedules: list[Schedule] = Field(description="the schedules of this page")
    next_page_token: str = Field(description=responses.NEXT_PAGE)


@router.get("", tags=["schedules"])
async def list_schedules(
    request: Request,
    user: User,
    page_size: PageSize = 50,
    page_token: PageToken = "",
    agent_id: AgentFilter = "",
) -> ScheduleList:
    """The caller's schedules; with `agent_id`, that agent's: every member's
    when it belongs to a shared project the caller is a member of (404 for
    an agent the caller may not see)."""
    response = await rpc(
        request,
        deps.schedules(request).ListSchedules,
        schedules_service_pb2.ListSchedulesRequest(
            page_size=page_size, page_token=page_token, agent_id=agent_id
        ),
        user,
    )
    return ScheduleList(
        schedules=[Schedule.from_proto(s) for s in response.schedules],
        next_page_token=response.next_page_token,
    )


@router.post("", status_code=201, tags=["schedules"])
async def create_schedule(body: ScheduleBody, request: Request, user: User) -> Schedule:
    """A cron expression that does not parse or an unknown time zone is a
    400; a conversation that is not the caller's, or an unknown agent, 404."""
    schedule = schedules_pb2.Schedule(cron=body.cron, time_zone=body.time_zone, message=body.message)
    if body.conversation_id:
        schedule.conversation_id = body.conversation_id
    else:
        schedule.agent_id = body.agent_id
    response = await rpc(
        request,
        deps.schedules(request).CreateSchedule,
        schedules_service_pb2.CreateScheduleRequest(
            request_id=body.request_id or str(uuid.uuid4()), schedule=schedule
        ),
        user,
    )
    return Schedule.from_proto(response.schedule)


@router.get("/{schedule_id}", tags=["schedules"])
async def get_schedule(schedule_id: Id, request: Request, user: User) -> Schedule:
    """With its counts: runs started, ticks missed (and the last one)."""
    response = await rpc(
        request,
        deps.schedules(request).GetSchedule,
        schedules_service_pb2.GetScheduleRequest(schedule_id=schedule_id),
        user,
    )
    return Schedule.from_proto(response.schedule)


@router.post("/{schedule_id}/pause", tags=["schedules"])
async def pause_schedule(schedule_id: Id, request: Request, user: User) -> Schedule:
    """No run starts until it is resumed; pausing twice changes nothing."""
    response = await rpc(
        request,
        deps.schedules(request).PauseSchedule,
        schedules_service_pb2.PauseScheduleRequest(schedule_id=schedule_id),
        user,
    )
    return Schedule.from_proto(response.schedule)


@router.post("/{schedule_id}/resume", tags=["schedules"])
async def resume_schedule(schedule_id: Id, request: Request, user: User) -> Schedule:
    """From the first tick after now; ticks that passed while paused are not run."""
    response = await rpc(
        request,
        deps.schedules(request).ResumeSchedule,
        schedules_service_pb2.ResumeScheduleRequest(schedule_id=schedule_id),
        user,
    )
    return Schedule.from_proto(response.schedule)


@router.delete("/{schedule_id}", status_code=204, tags=["schedules"])
async def delete_schedule(schedule_id: Id, request: Request, user: User) -> Response:
    """The runs it started stay."""
    await rpc(
        request,
        deps.schedules(request).DeleteSchedule,
        schedules_service_pb2.DeleteScheduleRequest(schedule_id=schedule_id),
        user,
        idempotent=False,
    )
    return Response(status_code=204)
