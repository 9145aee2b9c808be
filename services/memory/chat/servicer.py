"""MemoryService's GetChatContext: proto <-> ChatContextDomain, nothing else.
Each part is converted by its own concept's converter."""

from __future__ import annotations

import grpc

from services.memory.chat.domain import ChatContextDomain, ChatContextQuery, parts_of
from services.memory.context.servicer import context_to_proto, live_to_proto
from services.memory.handoff.servicer import summary_to_proto
from services.memory.notes.servicer import recalled_to_proto
from services.memory.pages.servicer import active_instructions_to_proto
from services.memory.personal.servicer import settings_to_proto
from services.memory.projects.servicer import actor_of
from switchboard.memory.v1 import memory_service_pb2

pb = memory_service_pb2


class ChatContextRpcs:
    """GetChatContext."""

    _chat: ChatContextDomain

    async def GetChatContext(
        self, request: pb.GetChatContextRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetChatContextResponse:
        read = await self._chat.read(
            actor_of(context),
            ChatContextQuery(
                parts=parts_of(list(request.read_mask.paths)),
                thread_id=request.thread_id,
                project_id=request.project_id,
                recall_query=request.recall_query,
                recall_limit=request.recall_limit,
                live_state_page_size=request.live_state_page_size,
            ),
        )
        response = pb.GetChatContextResponse(
            recalled_notes=[recalled_to_proto(r) for r in read.recalled],
            live_state=[live_to_proto(row) for row in read.live_state],
        )
        if read.settings is not None:
            response.settings.CopyFrom(settings_to_proto(read.settings))
        if read.instructions is not None:
            response.active_instructions.CopyFrom(active_instructions_to_proto(read.instructions))
        if read.project_context is not None:
            response.project_context.CopyFrom(context_to_proto(read.project_context))
        if read.summary is not None:
            response.handoff_summary.CopyFrom(summary_to_proto(read.summary))
        if read.recall_query_embedding is not None:
            response.recall_query_embedding.CopyFrom(read.recall_query_embedding.to_proto())
        return response
