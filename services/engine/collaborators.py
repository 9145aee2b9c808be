"""What a run needs from the other services: one set of calls, over a
transport — gRPC in production; the run benchmark's floor brings its own,
on the servicers of its process (tests/bench/in_process.py), which also
shows that the run logic does not depend on the transport. Each call names
its stub's method (mypy-protobuf's *AsyncStub classes), so mypy checks its
request and response types. Failures of other services become the engine's
own errors."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Protocol, TypeVar

import grpc
from google.protobuf import field_mask_pb2
from google.protobuf.message import Message

from services.shared.clients import call, open_channel
from services.shared.errors import (
    DependencyUnavailable,
    DomainError,
    Exhausted,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    TooLarge,
    rebuilt,
)
from switchboard.common.v1 import common_pb2
from switchboard.memory.v1 import (
    handoff_pb2,
    handoff_service_pb2,
    handoff_service_pb2_grpc,
    memory_pb2,
    memory_service_pb2,
    memory_service_pb2_grpc,
    pages_pb2,
    pages_service_pb2,
    pages_service_pb2_grpc,
    projects_service_pb2,
    projects_service_pb2_grpc,
)
from switchboard.router.v1 import router_service_pb2, router_service_pb2_grpc
from switchboard.threads.v1 import threads_pb2, threads_service_pb2, threads_service_pb2_grpc

# What a downstream refusal may stay when the engine raises it again: the
# caller's own mistakes and quotas, which the user can act on (an oversize
# field stays TooLarge: 413 at the gateway). Anything else is the engine's
# dependency failing, whatever the service said.
_KEPT = (NotFound, PermissionDenied, InvalidArgument, TooLarge, FailedPrecondition, Exhausted)
# The same kinds by status code alone, for a refusal without ErrorInfo.
_BY_CODE: dict[grpc.StatusCode, type[DomainError]] = {
    kind.code: kind for kind in (NotFound, PermissionDenied, InvalidArgument, FailedPrecondition)
}


def _translate(service: str, error: grpc.aio.AioRpcError) -> DomainError:
    """A downstream failure as the engine's own error: client mistakes keep
    their kind (rebuilt from the ErrorInfo), anything else says which
    service failed."""
    code = error.code()
    domain = rebuilt(error, _BY_CODE)
    if isinstance(domain, FailedPrecondition):
        return FailedPrecondition(f"{service}: {domain.message}", **domain.metadata)
    if isinstance(domain, _KEPT):
        return domain
    # Without one of the quotas' ErrorInfo, RESOURCE_EXHAUSTED is gRPC's own
    # (a message over the size limit): the service failed.
    return DependencyUnavailable(f"{service} service failed: {code.name} {error.details() or ''}".strip())


Request = TypeVar("Request", bound=Message)
Response = TypeVar("Response", bound=Message)


@dataclass(frozen=True)
class Stubs:
    """The services the engine calls: memory serves four of them."""

    threads: threads_service_pb2_grpc.ThreadsServiceAsyncStub
    memory: memory_service_pb2_grpc.MemoryServiceAsyncStub
    pages: pages_service_pb2_grpc.PagesServiceAsyncStub
    handoff: handoff_service_pb2_grpc.HandoffServiceAsyncStub
    projects: projects_service_pb2_grpc.ProjectsServiceAsyncStub
    router: router_service_pb2_grpc.RouterServiceAsyncStub


class Transport(Protocol):
    """Calls ``method``, one of ``stubs``' methods, with ``request``, as ``user``."""

    @property
    def stubs(self) -> Stubs: ...

    async def __call__(
        self, method: grpc.aio.UnaryUnaryMultiCallable[Request, Response], request: Request, user: str
    ) -> Response: ...


class GrpcTransport:
    """One channel per service process, opened at start-up; every call has a
    deadline; idempotent calls retry UNAVAILABLE (appends and creates are
    idempotent on their request ids). Memory serves four services on one port."""

    def __init__(
        self,
        threads_address: str,
        memory_address: str,
        router_address: str,
        timeout: float,
        timeouts: Mapping[str, float] | None = None,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        self._channels = [
            open_channel(a, credentials) for a in (threads_address, memory_address, router_address)
        ]
        threads, memory, router = self._channels
        self._stubs = Stubs(
            threads=threads_service_pb2_grpc.ThreadsServiceStub(threads),
            memory=memory_service_pb2_grpc.MemoryServiceStub(memory),
            pages=pages_service_pb2_grpc.PagesServiceStub(memory),
            handoff=handoff_service_pb2_grpc.HandoffServiceStub(memory),
            projects=projects_service_pb2_grpc.ProjectsServiceStub(memory),
            router=router_service_pb2_grpc.RouterServiceStub(router),
        )
        # The service of each stub method (a generated stub keeps them as its
        # attributes): its deadline, and the name its failures are told by.
        self._service_of: dict[object, str] = {
            method: field.name
            for field in fields(Stubs)
            for method in vars(getattr(self._stubs, field.name)).values()
        }
        self._timeout = timeout
        # Per service, where one should cost a run less than the default.
        self._timeouts = dict(timeouts or {})

    @property
    def stubs(self) -> Stubs:
        return self._stubs

    async def __call__(
        self, method: grpc.aio.UnaryUnaryMultiCallable[Request, Response], request: Request, user: str
    ) -> Response:
        service = self._service_of[method]
        try:
            return await call(method, request, timeout=self._timeouts.get(service, self._timeout), user=user)
        except grpc.aio.AioRpcError as error:
            raise _translate(service, error) from error

    async def close(self) -> None:
        for channel in self._channels:
            await channel.close()


class Collaborators:
    """The calls a run makes, each as the acting user."""

    def __init__(self, transport: Transport) -> None:
        self._call = transport
        self._stubs = transport.stubs

    # Threads

    async def get_conversation(self, user: str, conversation_id: str) -> threads_pb2.Conversation:
        request = threads_service_pb2.GetConversationRequest(conversation_id=conversation_id)
        return (await self._call(self._stubs.threads.GetConversation, request, user)).conversation

    async def append_entries(
        self, user: str, thread_id: str, request_id: str, entries: Sequence[threads_pb2.Entry]
    ) -> Sequence[threads_pb2.Entry]:
        """Appends (idempotent on request_id); returns the entries with their sequences."""
        request = threads_service_pb2.AppendEntriesRequest(
            request_id=request_id, thread_id=thread_id, entries=entries
        )
        return (await self._call(self._stubs.threads.AppendEntries, request, user)).entries

    async def set_auto_title(
        self, user: str, conversation_id: str, request_text: str, title: str = ""
    ) -> None:
        request = threads_service_pb2.SetAutoTitleRequest(
            conversation_id=conversation_id, request_text=request_text, title=title
        )
        await self._call(self._stubs.threads.SetAutoTitle, request, user)

    async def get_agent(self, user: str, agent_id: str) -> threads_pb2.Agent:
        request = threads_service_pb2.GetAgentRequest(agent_id=agent_id)
        return (await self._call(self._stubs.threads.GetAgent, request, user)).agent

    async def ensure_agent_thread(self, user: str, agent_id: str) -> threads_pb2.AgentThread:
        request = threads_service_pb2.EnsureAgentThreadRequest(target_agent_id=agent_id)
        return (await self._call(self._stubs.threads.EnsureAgentThread, request, user)).thread

    async def transcript_tail(
        self, user: str, thread_id: str, limit: int
    ) -> tuple[list[threads_pb2.Entry], int]:
        """The newest ``limit`` entries of the thread's open segment, oldest
        first, and the segment's first sequence: a closed segment reaches a
        model only as its handoff summary."""
        request = threads_service_pb2.ListEntriesRequest(
            thread_id=thread_id, page_size=limit, descending=True
        )
        response, first = await asyncio.gather(
            self._call(self._stubs.threads.ListEntries, request, user),
            self.open_segment_start(user, thread_id),
        )
        return [e for e in reversed(response.entries) if e.sequence >= first], first

    async def open_segment_start(self, user: str, thread_id: str) -> int:
        """The first sequence of the agent thread's open segment (1 before any
        rotation). The newest segment is the open one: one read, however
        many rotations came before; all of them only when it is not (or a
        threads service that does not list newest first answered)."""
        newest = await self._call(
            self._stubs.threads.ListSegments,
            threads_service_pb2.ListSegmentsRequest(thread_id=thread_id, page_size=1, descending=True),
            user,
        )
        if newest.segments and newest.segments[0].state == threads_pb2.SEGMENT_STATE_OPEN:
            return int(newest.segments[0].first_sequence)
        first, token = 1, ""
        while True:
            request = threads_service_pb2.ListSegmentsRequest(
                thread_id=thread_id, page_size=100, page_token=token
            )
            response = await self._call(self._stubs.threads.ListSegments, request, user)
            for segment in response.segments:
                if segment.state == threads_pb2.SEGMENT_STATE_OPEN:
                    first = segment.first_sequence
            token = response.next_page_token
            if not token:
                return first

    async def entries_after(
        self, user: str, thread_id: str, after_sequence: int, page_size: int = 200
    ) -> list[threads_pb2.Entry]:
        """The thread's entries with a sequence above ``after_sequence``, oldest
        first, read newest first page by page (a long conversation's earlier
        turns are already in its summary: they are never read again)."""
        entries: list[threads_pb2.Entry] = []
        token = ""
        while True:
            request = threads_service_pb2.ListEntriesRequest(
                thread_id=thread_id, page_size=page_size, page_token=token, descending=True
            )
            response = await self._call(self._stubs.threads.ListEntries, request, user)
            for entry in response.entries:
                if entry.sequence <= after_sequence:
                    return list(reversed(entries))
                entries.append(entry)
            token = response.next_page_token
            if not token:
                return list(reversed(entries))

    async def live_provider_sessions(self, user: str, thread_id: str) -> list[threads_pb2.ProviderSession]:
        request = threads_service_pb2.ListProviderSessionsRequest(agent_thread_id=thread_id, page_size=50)
        return list((await self._call(self._stubs.threads.ListProviderSessions, request, user)).sessions)

    async def bind_provider_session(
        self, user: str, thread_id: str, provider_id: str, native_session_id: str, replace: bool = False
    ) -> threads_pb2.ProviderSession:
        request = threads_service_pb2.BindProviderSessionRequest(
            agent_thread_id=thread_id,
            provider_id=provider_id,
            native_session_id=native_session_id,
            replace=replace,
        )
        return (await self._call(self._stubs.threads.BindProviderSession, request, user)).session

    async def provider_session(self, user: str, thread_id: str, provider_id: str) -> str | None:
        """The native session id of the provider's live session on the thread."""
        request = threads_service_pb2.GetProviderSessionRequest(
            agent_thread_id=thread_id, provider_id=provider_id
        )
        try:
            response = await self._call(self._stubs.threads.GetProviderSession, request, user)
        except NotFound:
            return None
        return str(response.session.native_session_id)

    async def release_provider_session(self, user: str, thread_id: str, provider_id: str) -> None:
        request = threads_service_pb2.ReleaseProviderSessionRequest(
            agent_thread_id=thread_id, provider_id=provider_id
        )
        await self._call(self._stubs.threads.ReleaseProviderSession, request, user)

    # Memory

    async def check_project(self, user: str, project_id: str) -> str:
        """The id of the project ``project_id`` names, when ``user`` is a
        member of it (any role); NotFound otherwise, as for a missing one."""
        request = projects_service_pb2.CheckProjectAccessRequest(project_id=project_id)
        return str((await self._call(self._stubs.projects.CheckProjectAccess, request, user)).project_id)

    async def project_role(self, user: str, project_id: str) -> int:
        """``user``'s role in the project (switchboard.memory.v1.ProjectRole's
        number: 1 viewer, 2 editor, 3 owner); 0 when they are not a member or
        it does not exist (the two are never told apart)."""
        request = projects_service_pb2.CheckProjectAccessRequest(project_id=project_id)
        try:
            return int((await self._call(self._stubs.projects.CheckProjectAccess, request, user)).role)
        except NotFound:
            return 0

    async def recall(
        self, user: str, query: str, persona: str, project_id: str = ""
    ) -> Sequence[memory_pb2.RecalledNote]:
        """The project's notes for ``query`` ("" = the user's personal project)."""
        request = memory_service_pb2.RecallNotesRequest(project_id=project_id, query=query, persona=persona)
        return (await self._call(self._stubs.memory.RecallNotes, request, user)).notes

    async def live_state(self, user: str, project_id: str, limit: int) -> list[memory_pb2.LiveStateEntry]:
        """The first ``limit`` entries of the project's live state, by agent id."""
        request = memory_service_pb2.ListLiveStateRequest(project_id=project_id, page_size=limit)
        return list((await self._call(self._stubs.memory.ListLiveState, request, user)).entries)

    async def set_live_state(
        self, user: str, project_id: str, agent_id: str, activity: str, detail: str, ttl_seconds: int | None
    ) -> memory_pb2.LiveStateEntry:
        """Creates or replaces ``agent_id``'s entry in the project, as ``user``
        (an editor or owner of it); ``ttl_seconds`` None: memory's default."""
        request = memory_service_pb2.SetLiveStateRequest(
            project_id=project_id, agent_id=agent_id, activity=activity, detail=detail
        )
        if ttl_seconds:
            request.ttl.FromSeconds(ttl_seconds)
        response = await self._call(self._stubs.memory.SetLiveState, request, user)
        return response.entry

    async def active_instructions(self, user: str) -> pages_service_pb2.GetActiveInstructionsResponse:
        request = pages_service_pb2.GetActiveInstructionsRequest()
        return await self._call(self._stubs.pages.GetActiveInstructions, request, user)

    async def chat_context(
        self,
        user: str,
        thread_id: str,
        project_id: str,
        recall_query: str | None,
        settings: bool,
        live_state_entries: int,
    ) -> memory_service_pb2.GetChatContextResponse:
        """What a chat run reads from memory, in one call: recall for
        ``recall_query`` (None: no recall), the personal settings when
        ``settings``, the active instruction page, the project context, the
        first ``live_state_entries`` of the live state and the thread's
        handoff summary."""
        parts = ["active_instructions", "project_context", "live_state", "handoff_summary"]
        if recall_query is not None:
            parts.append("recalled_notes")
        if settings:
            parts.append("settings")
        request = memory_service_pb2.GetChatContextRequest(
            thread_id=thread_id,
            project_id=project_id,
            read_mask=field_mask_pb2.FieldMask(paths=parts),
            recall_query=recall_query or "",
            live_state_page_size=live_state_entries,
        )
        return await self._call(self._stubs.memory.GetChatContext, request, user)

    async def create_instruction_page(self, user: str, request_id: str, language: str = "") -> pages_pb2.Page:
        """From the default template of ``language`` (English when memory has none in it)."""
        request = pages_service_pb2.CreateInstructionPageRequest(request_id=request_id, language=language)
        return (await self._call(self._stubs.pages.CreateInstructionPage, request, user)).page

    async def create_proposal(
        self, user: str, request_id: str, page_id: str, body: str, reason: str, run_id: str = ""
    ) -> pages_pb2.Proposal:
        request = pages_service_pb2.CreateProposalRequest(
            request_id=request_id,
            page_id=page_id,
            proposed_body=body,
            reason=reason,
            proposer_agent_id="personal",
            run_id=run_id,
        )
        return (await self._call(self._stubs.pages.CreateProposal, request, user)).proposal

    async def readable_pages(self, user: str, limit: int) -> list[pages_pb2.Page]:
        """Pages the user can read (theirs and those shared with them)."""
        request = pages_service_pb2.ListPagesRequest(page_size=limit)
        return list((await self._call(self._stubs.pages.ListPages, request, user)).pages)

    async def get_page(self, user: str, page_id: str) -> pages_pb2.Page:
        request = pages_service_pb2.GetPageRequest(page_id=page_id)
        return (await self._call(self._stubs.pages.GetPage, request, user)).page

    async def create_note(
        self, user: str, request_id: str, note: memory_pb2.Note
    ) -> memory_service_pb2.CreateNoteResponse:
        """Saves a durable note; a near-duplicate is merged into the existing one."""
        request = memory_service_pb2.CreateNoteRequest(
            request_id=request_id, note=note, duplicate_policy=memory_pb2.DUPLICATE_POLICY_MERGE
        )
        return await self._call(self._stubs.memory.CreateNote, request, user)

    async def propose_note(
        self, user: str, request_id: str, note: memory_pb2.Note, reason: str, run_id: str
    ) -> memory_service_pb2.ProposeNoteResponse:
        """A note an agent promotes on its own, for the project's review."""
        request = memory_service_pb2.ProposeNoteRequest(
            request_id=request_id, note=note, reason=reason, run_id=run_id
        )
        return await self._call(self._stubs.memory.ProposeNote, request, user)

    async def project_context(self, user: str, project_id: str) -> str:
        """The project's shared context (CONTEXT.md), "" when none was written."""
        request = memory_service_pb2.GetProjectContextRequest(project_id=project_id)
        try:
            return str((await self._call(self._stubs.memory.GetProjectContext, request, user)).context.body)
        except NotFound:
            return ""

    async def record_handoff(
        self, user: str, thread_id: str, entries: Sequence[handoff_pb2.HandoffEntry], private: bool = False
    ) -> None:
        """Records entries for the thread's summary; ``private``: the thread is
        the caller's own (a conversation), no other user may read its summary."""
        request = handoff_service_pb2.RecordHandoffEntriesRequest(
            thread_id=thread_id, entries=entries, private=private
        )
        await self._call(self._stubs.handoff.RecordHandoffEntries, request, user)

    async def fold_into_summary(
        self, user: str, thread_id: str, entries: Sequence[handoff_pb2.HandoffEntry]
    ) -> handoff_pb2.HandoffSummary:
        """Folds a conversation's oldest turns into its persisted summary now."""
        if entries:
            await self.record_handoff(user, thread_id, entries, private=True)
        return await self.handoff_summary(user, thread_id, checkpoint=True)

    async def handoff_summary(
        self, user: str, thread_id: str, checkpoint: bool
    ) -> handoff_pb2.HandoffSummary:
        """The thread's handoff summary (empty before anything was recorded);
        ``checkpoint`` folds pending entries first (a provider swap must see
        everything recorded so far)."""
        try:
            if checkpoint:
                checkpointed = await self._call(
                    self._stubs.handoff.CheckpointHandoff,
                    handoff_service_pb2.CheckpointHandoffRequest(
                        thread_id=thread_id, reason=handoff_pb2.HANDOFF_CHECKPOINT_REASON_REQUEST
                    ),
                    user,
                )
                return checkpointed.summary
            request = handoff_service_pb2.GetHandoffSummaryRequest(thread_id=thread_id)
            return (await self._call(self._stubs.handoff.GetHandoffSummary, request, user)).summary
        except NotFound:
            return handoff_pb2.HandoffSummary(thread_id=thread_id)

    # Router

    async def route_model(
        self, user: str, text: str, requested: str, default: str, offline: bool, provider: str = ""
    ) -> router_service_pb2.RouteModelResponse:
        """``provider``: only that provider's models (an agent pinned to it)."""
        request = router_service_pb2.RouteModelRequest(
            text=text, requested_model=requested, default_model=default, offline=offline, provider_id=provider
        )
        return await self._call(self._stubs.router.RouteModel, request, user)

    async def route_message(
        self,
        user: str,
        text: str,
        forced: Sequence[str],
        requested: str,
        default: str,
        offline: bool,
        text_embedding: common_pb2.TextEmbedding | None = None,
    ) -> router_service_pb2.RouteMessageResponse:
        """A chat message's skills and model in one call; ``text_embedding``:
        the message's vector from memory's recall, which the router reuses
        when it fits (None: the router embeds it)."""
        request = router_service_pb2.RouteMessageRequest(
            text=text,
            forced_skills=forced,
            requested_model=requested,
            default_model=default,
            offline=offline,
            text_embedding=text_embedding,
        )
        return await self._call(self._stubs.router.RouteMessage, request, user)
