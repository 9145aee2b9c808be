"""ScheduleService: proto <-> Schedules, nothing else."""

from __future__ import annotations

from typing import TypeAlias

import grpc

from services.engine.schedules.models import Schedule
from services.engine.schedules.service import NewSchedule, Schedules
from services.shared.identity import caller_user
from services.shared.time import to_timestamp
from switchboard.engine.v1 import schedules_pb2, schedules_service_pb2, schedules_service_pb2_grpc

Context: TypeAlias = grpc.aio.ServicerContext


def schedule_to_proto(row: Schedule) -> schedules_pb2.Schedule:
    proto = schedules_pb2.Schedule(
        id=row.id,
        user_id=row.user_id,
        cron=row.cron,
        time_zone=row.time_zone,
        message=row.message,
        paused=row.paused,
        last_run_id=row.last_run_id or "",
        last_error=row.last_error,
        run_count=row.run_count,
        missed_count=row.missed_count,
        next_run_time=to_timestamp(row.next_run_at),
        last_run_time=to_timestamp(row.last_run_at),
        last_missed_time=to_timestamp(row.last_missed_at),
        create_time=to_timestamp(row.create_time),
    )
    if row.conversation_id:
        proto.conversation_id = row.conversation_id
    elif row.agent_id:
        proto.agent_id = row.agent_id
    return proto


class ScheduleServicer(schedules_service_pb2_grpc.ScheduleServiceServicer):
    def __init__(self, schedules: Schedules) -> None:
        self._schedules = schedules

    async def CreateSchedule(
        self, request: schedules_service_pb2.CreateScheduleRequest, context: Context
    ) -> schedules_service_pb2.CreateScheduleResponse:
        given = request.schedule
        row = await self._schedules.create(
            caller_user(context),
            NewSchedule(
                request_id=request.request_id,
                cron=given.cron,
                time_zone=given.time_zone,
                message=given.message,
                conversation_id=given.conversation_id,
                agent_id=given.agent_id,
            ),
        )
        return schedules_service_pb2.CreateScheduleResponse(schedule=schedule_to_proto(row))

    async def GetSchedule(
        self, request: schedules_service_pb2.GetScheduleRequest, context: Context
    ) -> schedules_service_pb2.GetScheduleResponse:
        row = await self._schedules.get(caller_user(context), request.schedule_id)
        return schedules_service_pb2.GetScheduleResponse(schedule=schedule_to_proto(row))

    async def ListSchedules(
        self, request: schedules_service_pb2.ListSchedulesRequest, context: Context
    ) -> schedules_service_pb2.ListSchedulesResponse:
        rows, token = await self._schedules.list(
            caller_user(context), request.page_size, request.page_token, request.agent_id
        )
        return schedules_service_pb2.ListSchedulesResponse(
            schedules=[schedule_to_proto(row) for row in rows], next_page_token=token
        )

    async def PauseSchedule(
        self, request: schedules_service_pb2.PauseScheduleRequest, context: Context
    ) -> schedules_service_pb2.PauseScheduleResponse:
        row = await self._schedules.pause(caller_user(context), request.schedule_id)
        return schedules_service_pb2.PauseScheduleResponse(schedule=schedule_to_proto(row))

    async def ResumeSchedule(
        self, request: schedules_service_pb2.ResumeScheduleRequest, context: Context
    ) -> schedules_service_pb2.ResumeScheduleResponse:
        row = await self._schedules.resume(caller_user(context), request.schedule_id)
        return schedules_service_pb2.ResumeScheduleResponse(schedule=schedule_to_proto(row))

    async def DeleteSchedule(
        self, request: schedules_service_pb2.DeleteScheduleRequest, context: Context
    ) -> schedules_service_pb2.DeleteScheduleResponse:
        await self._schedules.delete(caller_user(context), request.schedule_id)
        return schedules_service_pb2.DeleteScheduleResponse()
