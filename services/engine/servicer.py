"""EngineService: proto <-> RunService, nothing else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TypeAlias

import grpc

from services.engine.runs import RunBudget, RunRequest, RunService, run_to_proto
from services.shared.identity import caller_user
from switchboard.engine.v1 import engine_service_pb2, engine_service_pb2_grpc

Context: TypeAlias = grpc.aio.ServicerContext


class EngineServicer(engine_service_pb2_grpc.EngineServiceServicer):
    def __init__(self, runs: RunService) -> None:
        self._runs = runs

    async def StartRun(
        self, request: engine_service_pb2.StartRunRequest, context: Context
    ) -> AsyncIterator[engine_service_pb2.StartRunResponse]:
        user = caller_user(context)
        run_id = await self._runs.start(
            RunRequest(
                user=user,
                request_id=request.request_id,
                conversation_id=request.conversation_id,
                message=request.message,
                requested_model=request.requested_model,
                surface=request.surface,
                forced_skills=list(request.forced_skills),
                budget=RunBudget(
                    request.budget.max_tokens, request.budget.max_steps, request.budget.max_seconds
                ),
            )
        )
        async for event in self._runs.follow(user, run_id, 0):
            yield engine_service_pb2.StartRunResponse(event=event)

    async def GetRun(
        self, request: engine_service_pb2.GetRunRequest, context: Context
    ) -> engine_service_pb2.GetRunResponse:
        run = await self._runs.get(caller_user(context), request.run_id)
        return engine_service_pb2.GetRunResponse(run=run_to_proto(run))

    async def WatchRun(
        self, request: engine_service_pb2.WatchRunRequest, context: Context
    ) -> AsyncIterator[engine_service_pb2.WatchRunResponse]:
        async for event in self._runs.follow(caller_user(context), request.run_id, request.after_sequence):
            yield engine_service_pb2.WatchRunResponse(event=event)

    async def CancelRun(
        self, request: engine_service_pb2.CancelRunRequest, context: Context
    ) -> engine_service_pb2.CancelRunResponse:
        run = await self._runs.cancel(caller_user(context), request.run_id)
        return engine_service_pb2.CancelRunResponse(run=run_to_proto(run))

    async def ListRuns(
        self, request: engine_service_pb2.ListRunsRequest, context: Context
    ) -> engine_service_pb2.ListRunsResponse:
        runs, token = await self._runs.list_runs(
            caller_user(context), request.conversation_id, request.page_size, request.page_token
        )
        return engine_service_pb2.ListRunsResponse(
            runs=[run_to_proto(r) for r in runs], next_page_token=token
        )
