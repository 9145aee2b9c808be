"""ThreadsService: proto <-> domain, nothing else."""

from __future__ import annotations

import json
from typing import TypeAlias

import grpc
from google.protobuf import json_format

from services.shared.audit import Actor
from services.shared.enums import EnumNames
from services.shared.errors import InvalidArgument
from services.shared.identity import caller_role, caller_user
from services.shared.time import to_timestamp
from services.threads.domain import ThreadsDomain, View
from services.threads.export import ThreadArchive, ThreadFile
from services.threads.models import Agent, Entry, ProviderSession, Segment, Thread
from services.threads.rotation import Rotation
from services.threads.sessions import ProviderSessions
from services.threads.tables.entries import EntryRow, NewEntry
from switchboard.threads.v1 import threads_pb2, threads_service_pb2, threads_service_pb2_grpc

Context: TypeAlias = grpc.aio.ServicerContext


def actor(context: Context) -> Actor:
    return Actor(caller_user(context), caller_role(context))


def known_strategy(value: int) -> int:
    """An injection strategy the engine knows: proto3 enums take any number
    on the wire, and an unknown one would be stored and then ignored."""
    if value not in threads_pb2.InjectionStrategy.values():
        names = ", ".join(threads_pb2.InjectionStrategy.keys())
        raise InvalidArgument(
            f"agent.injection_strategy {value} is not one of {names}", field="agent.injection_strategy"
        )
    return value


def agent_to_proto(agent: Agent) -> threads_pb2.Agent:
    return threads_pb2.Agent(
        id=agent.id,
        display_name=agent.display_name,
        persona=agent.persona,
        provider_id=agent.provider_id,
        model=agent.model,
        injection_strategy=agent.injection_strategy,  # type: ignore[arg-type]
        create_time=to_timestamp(agent.create_time),
        update_time=to_timestamp(agent.update_time),
        owner=agent.owner_id,
        project_id=agent.project_id,
        remote=threads_pb2.RemoteAgent(
            card_url=agent.remote_card_url,
            card_name=agent.remote_card_name,
            description=agent.remote_description,
            streaming=agent.remote_streaming,
        )
        if agent.remote_card_url
        else None,
    )


def conversation_to_proto(thread: Thread) -> threads_pb2.Conversation:
    sources = threads_pb2.AllowedSources()
    json_format.ParseDict(json.loads(thread.sources_json or "{}"), sources, ignore_unknown_fields=True)
    return threads_pb2.Conversation(
        id=thread.id,
        user_id=thread.user_id or "",
        title=thread.title,
        title_auto=thread.title_auto,
        pinned=thread.pinned,
        allowed_sources=sources,
        create_time=to_timestamp(thread.create_time),
        update_time=to_timestamp(thread.update_time),
        archived=thread.archive_time is not None,
        metadata=json.loads(thread.metadata_json or "{}"),
    )


def agent_thread_to_proto(thread: Thread) -> threads_pb2.AgentThread:
    return threads_pb2.AgentThread(
        id=thread.id,
        agent_id=thread.agent_id or "",
        last_sequence=thread.last_sequence,
        create_time=to_timestamp(thread.create_time),
        update_time=to_timestamp(thread.update_time),
    )


def session_to_proto(row: ProviderSession) -> threads_pb2.ProviderSession:
    return threads_pb2.ProviderSession(
        id=row.id,
        agent_thread_id=row.agent_thread_id,
        provider_id=row.provider_id,
        native_session_id=row.native_session_id,
        create_time=to_timestamp(row.create_time),
        release_time=to_timestamp(row.release_time),
    )


_SEGMENT_STATES = EnumNames(threads_pb2.SegmentState)
# A segment's handoff_status "none": open, its handoff is not due yet.
_HANDOFF_STATES = EnumNames(threads_pb2.HandoffState, aliases={"none": "not_due"})


def segment_to_proto(segment: Segment) -> threads_pb2.Segment:
    return threads_pb2.Segment(
        thread_id=segment.thread_id,
        number=segment.number,
        first_sequence=segment.first_sequence,
        last_sequence=segment.last_sequence,
        entry_count=segment.entry_count,
        char_count=segment.char_count,
        state=_SEGMENT_STATES.number(segment.status),
        handoff_state=_HANDOFF_STATES.number(segment.handoff_status),
        handoff_summary=segment.handoff_summary or "",
        open_time=to_timestamp(segment.open_time),
        close_time=to_timestamp(segment.close_time),
        handoff_time=to_timestamp(segment.handoff_time),
    )


def view_from_proto(request: threads_service_pb2.ListEntriesRequest) -> View:
    which = request.WhichOneof("view")
    if which == "for_agent":
        return View("agent", agent_id=request.for_agent.agent_id)
    if which == "for_pair":
        return View("pair", requester=request.for_pair.requester, target=request.for_pair.target)
    if which == "for_correlation":
        c = request.for_correlation
        return View("correlation", thread_id=c.thread_id, correlation_id=c.correlation_id)
    if which == "for_conversation":
        return View("conversation", thread_id=request.for_conversation.conversation_id)
    return View("thread", thread_id=request.thread_id, correlation_id=request.correlation_id)


def entry_to_proto(entry: Entry | EntryRow) -> threads_pb2.Entry:
    return threads_pb2.Entry(
        id=entry.id,
        thread_id=entry.thread_id,
        sequence=entry.sequence,
        requester=entry.requester,
        target=entry.target,
        correlation_id=entry.correlation_id,
        role=entry.role,  # type: ignore[arg-type]
        source=entry.source,
        run_id=entry.run_id,
        content=entry.content,
        create_time=to_timestamp(entry.create_time),
        tool_calls=[threads_pb2.ToolCall(**call) for call in json.loads(entry.tool_calls_json or "[]")],
        tool_call_id=entry.tool_call_id,
    )


class ThreadsServicer(threads_service_pb2_grpc.ThreadsServiceServicer):
    def __init__(
        self, domain: ThreadsDomain, sessions: ProviderSessions, rotation: Rotation, archive: ThreadArchive
    ) -> None:
        self._domain = domain
        self._sessions = sessions
        self._rotation = rotation
        self._archive = archive

    async def CreateAgent(
        self, request: threads_service_pb2.CreateAgentRequest, context: Context
    ) -> threads_service_pb2.CreateAgentResponse:
        a = request.agent
        agent = await self._domain.create_agent(
            actor(context),
            Agent(
                id=a.id,
                display_name=a.display_name,
                persona=a.persona,
                provider_id=a.provider_id,
                model=a.model,
                injection_strategy=known_strategy(a.injection_strategy),
                project_id=a.project_id,
            ),
        )
        return threads_service_pb2.CreateAgentResponse(agent=agent_to_proto(agent))

    async def RegisterRemoteAgent(
        self, request: threads_service_pb2.RegisterRemoteAgentRequest, context: Context
    ) -> threads_service_pb2.RegisterRemoteAgentResponse:
        agent = await self._domain.register_remote_agent(
            actor(context), request.agent_id, request.card_url, request.display_name, request.project_id
        )
        return threads_service_pb2.RegisterRemoteAgentResponse(agent=agent_to_proto(agent))

    async def GetAgent(
        self, request: threads_service_pb2.GetAgentRequest, context: Context
    ) -> threads_service_pb2.GetAgentResponse:
        agent = await self._domain.get_agent(actor(context), request.agent_id)
        return threads_service_pb2.GetAgentResponse(agent=agent_to_proto(agent))

    async def ListAgents(
        self, request: threads_service_pb2.ListAgentsRequest, context: Context
    ) -> threads_service_pb2.ListAgentsResponse:
        agents, token = await self._domain.list_agents(
            actor(context), request.page_size, request.page_token, request.project_id
        )
        return threads_service_pb2.ListAgentsResponse(
            agents=[agent_to_proto(a) for a in agents], next_page_token=token
        )

    async def UpdateAgent(
        self, request: threads_service_pb2.UpdateAgentRequest, context: Context
    ) -> threads_service_pb2.UpdateAgentResponse:
        a = request.agent
        changes = Agent(
            id=a.id,
            display_name=a.display_name,
            persona=a.persona,
            provider_id=a.provider_id,
            model=a.model,
            injection_strategy=known_strategy(a.injection_strategy),
        )
        agent = await self._domain.update_agent(
            actor(context), a.id, changes, list(request.update_mask.paths)
        )
        return threads_service_pb2.UpdateAgentResponse(agent=agent_to_proto(agent))

    async def ListAgentMembers(
        self, request: threads_service_pb2.ListAgentMembersRequest, context: Context
    ) -> threads_service_pb2.ListAgentMembersResponse:
        owner, members = await self._domain.members(actor(context), request.agent_id)
        return threads_service_pb2.ListAgentMembersResponse(owner=owner, members=members)

    async def AddAgentMember(
        self, request: threads_service_pb2.AddAgentMemberRequest, context: Context
    ) -> threads_service_pb2.AddAgentMemberResponse:
        members = await self._domain.add_member(actor(context), request.agent_id, request.user_id)
        return threads_service_pb2.AddAgentMemberResponse(members=members)

    async def RemoveAgentMember(
        self, request: threads_service_pb2.RemoveAgentMemberRequest, context: Context
    ) -> threads_service_pb2.RemoveAgentMemberResponse:
        members = await self._domain.remove_member(actor(context), request.agent_id, request.user_id)
        return threads_service_pb2.RemoveAgentMemberResponse(members=members)

    async def ListAuditEvents(
        self, request: threads_service_pb2.ListAuditEventsRequest, context: Context
    ) -> threads_service_pb2.ListAuditEventsResponse:
        events, token = await self._domain.list_audit(
            actor(context),
            request.page_size,
            request.page_token,
            request.before if request.HasField("before") else None,
        )
        return threads_service_pb2.ListAuditEventsResponse(events=events, next_page_token=token)

    async def EnsureAgentThread(
        self, request: threads_service_pb2.EnsureAgentThreadRequest, context: Context
    ) -> threads_service_pb2.EnsureAgentThreadResponse:
        thread, created = await self._domain.ensure_agent_thread(actor(context), request.target_agent_id)
        return threads_service_pb2.EnsureAgentThreadResponse(
            thread=agent_thread_to_proto(thread), created=created
        )

    async def CreateConversation(
        self, request: threads_service_pb2.CreateConversationRequest, context: Context
    ) -> threads_service_pb2.CreateConversationResponse:
        sources = (
            json_format.MessageToDict(request.allowed_sources, preserving_proto_field_name=True)
            if request.HasField("allowed_sources")
            else {"workspace": True}
        )
        thread = await self._domain.create_conversation(
            caller_user(context), request.request_id, request.title, sources, dict(request.metadata)
        )
        return threads_service_pb2.CreateConversationResponse(conversation=conversation_to_proto(thread))

    async def GetConversation(
        self, request: threads_service_pb2.GetConversationRequest, context: Context
    ) -> threads_service_pb2.GetConversationResponse:
        thread = await self._domain.get_conversation(caller_user(context), request.conversation_id)
        return threads_service_pb2.GetConversationResponse(conversation=conversation_to_proto(thread))

    async def ListConversations(
        self, request: threads_service_pb2.ListConversationsRequest, context: Context
    ) -> threads_service_pb2.ListConversationsResponse:
        threads, token = await self._domain.list_conversations(
            caller_user(context),
            request.page_size,
            request.page_token,
            request.title_query,
            request.include_archived,
        )
        return threads_service_pb2.ListConversationsResponse(
            conversations=[conversation_to_proto(t) for t in threads], next_page_token=token
        )

    async def UpdateConversation(
        self, request: threads_service_pb2.UpdateConversationRequest, context: Context
    ) -> threads_service_pb2.UpdateConversationResponse:
        c = request.conversation
        thread = await self._domain.update_conversation(
            caller_user(context),
            c.id,
            c.title,
            c.pinned,
            list(request.update_mask.paths),
            json_format.MessageToDict(
                c.allowed_sources,
                preserving_proto_field_name=True,
                always_print_fields_with_no_presence=True,
            ),
            dict(c.metadata),
        )
        return threads_service_pb2.UpdateConversationResponse(conversation=conversation_to_proto(thread))

    async def SetAutoTitle(
        self, request: threads_service_pb2.SetAutoTitleRequest, context: Context
    ) -> threads_service_pb2.SetAutoTitleResponse:
        thread, applied = await self._domain.set_auto_title(
            caller_user(context), request.conversation_id, request.request_text, request.title
        )
        return threads_service_pb2.SetAutoTitleResponse(
            conversation=conversation_to_proto(thread), applied=applied
        )

    async def ArchiveConversation(
        self, request: threads_service_pb2.ArchiveConversationRequest, context: Context
    ) -> threads_service_pb2.ArchiveConversationResponse:
        thread = await self._domain.archive_conversation(caller_user(context), request.conversation_id)
        return threads_service_pb2.ArchiveConversationResponse(conversation=conversation_to_proto(thread))

    async def AppendEntries(
        self, request: threads_service_pb2.AppendEntriesRequest, context: Context
    ) -> threads_service_pb2.AppendEntriesResponse:
        entries = [
            NewEntry(
                requester=e.requester,
                target=e.target,
                correlation_id=e.correlation_id,
                role=e.role,
                source=e.source,
                run_id=e.run_id,
                content=e.content,
                tool_calls_json=json.dumps(
                    [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in e.tool_calls]
                ),
                tool_call_id=e.tool_call_id,
            )
            for e in request.entries
        ]
        rows = await self._domain.append_entries(
            actor(context), request.thread_id, request.request_id, entries
        )
        return threads_service_pb2.AppendEntriesResponse(entries=[entry_to_proto(r) for r in rows])

    async def ListEntries(
        self, request: threads_service_pb2.ListEntriesRequest, context: Context
    ) -> threads_service_pb2.ListEntriesResponse:
        page = await self._domain.list_entries(
            actor(context),
            view_from_proto(request),
            request.descending,
            request.page_size,
            request.page_token,
            request.start_entry_id,
        )
        return threads_service_pb2.ListEntriesResponse(
            entries=[entry_to_proto(r) for r in page.entries],
            next_page_token=page.next_token,
            previous_page_token=page.previous_token,
            partial_view=page.partial,
            thread_id=page.thread_id,
        )

    async def BindProviderSession(
        self, request: threads_service_pb2.BindProviderSessionRequest, context: Context
    ) -> threads_service_pb2.BindProviderSessionResponse:
        row, created = await self._sessions.bind(
            actor(context),
            request.agent_thread_id,
            request.provider_id,
            request.native_session_id,
            request.replace,
        )
        return threads_service_pb2.BindProviderSessionResponse(session=session_to_proto(row), created=created)

    async def GetProviderSession(
        self, request: threads_service_pb2.GetProviderSessionRequest, context: Context
    ) -> threads_service_pb2.GetProviderSessionResponse:
        row = await self._sessions.get(actor(context), request.agent_thread_id, request.provider_id)
        return threads_service_pb2.GetProviderSessionResponse(session=session_to_proto(row))

    async def ListProviderSessions(
        self, request: threads_service_pb2.ListProviderSessionsRequest, context: Context
    ) -> threads_service_pb2.ListProviderSessionsResponse:
        rows, token = await self._sessions.list(
            actor(context),
            request.agent_thread_id,
            request.include_released,
            request.page_size,
            request.page_token,
        )
        return threads_service_pb2.ListProviderSessionsResponse(
            sessions=[session_to_proto(r) for r in rows], next_page_token=token
        )

    async def ReleaseProviderSession(
        self, request: threads_service_pb2.ReleaseProviderSessionRequest, context: Context
    ) -> threads_service_pb2.ReleaseProviderSessionResponse:
        row = await self._sessions.release(actor(context), request.agent_thread_id, request.provider_id)
        return threads_service_pb2.ReleaseProviderSessionResponse(session=session_to_proto(row))

    async def ListSegments(
        self, request: threads_service_pb2.ListSegmentsRequest, context: Context
    ) -> threads_service_pb2.ListSegmentsResponse:
        rows, token = await self._rotation.list_segments(
            actor(context), request.thread_id, request.page_size, request.page_token, request.descending
        )
        return threads_service_pb2.ListSegmentsResponse(
            segments=[segment_to_proto(r) for r in rows], next_page_token=token
        )

    async def SetSegmentHandoff(
        self, request: threads_service_pb2.SetSegmentHandoffRequest, context: Context
    ) -> threads_service_pb2.SetSegmentHandoffResponse:
        row = await self._rotation.set_handoff(
            actor(context), request.thread_id, request.number, request.summary
        )
        return threads_service_pb2.SetSegmentHandoffResponse(segment=segment_to_proto(row))

    async def ExportAgentThread(
        self, request: threads_service_pb2.ExportAgentThreadRequest, context: Context
    ) -> threads_service_pb2.ExportAgentThreadResponse:
        thread, files = await self._archive.export(actor(context), request.agent_id)
        return threads_service_pb2.ExportAgentThreadResponse(
            files=[threads_pb2.ThreadFile(path=f.path, content=f.content) for f in files],
            thread=agent_thread_to_proto(thread),
        )

    async def ImportAgentThread(
        self, request: threads_service_pb2.ImportAgentThreadRequest, context: Context
    ) -> threads_service_pb2.ImportAgentThreadResponse:
        thread = await self._archive.import_(
            actor(context), [ThreadFile(f.path, f.content) for f in request.files]
        )
        return threads_service_pb2.ImportAgentThreadResponse(thread=agent_thread_to_proto(thread))
