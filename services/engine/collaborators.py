"""What a run needs from the other services, as one port with two adapters:
over gRPC (production) and in-process (the benchmark's floor, tests)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

import grpc

from services.shared.clients import call, open_channel
from services.shared.errors import (
    DependencyUnavailable,
    DomainError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
)
from services.shared.identity import user_metadata
from switchboard.memory.v1 import (
    memory_pb2,
    memory_service_pb2,
    memory_service_pb2_grpc,
    pages_pb2,
    pages_service_pb2,
    pages_service_pb2_grpc,
)
from switchboard.router.v1 import router_service_pb2, router_service_pb2_grpc
from switchboard.threads.v1 import threads_pb2, threads_service_pb2, threads_service_pb2_grpc

if TYPE_CHECKING:  # the in-process adapter calls the other services' code; only it
    from services.memory.pages_servicer import PagesServicer
    from services.memory.servicer import MemoryServicer
    from services.router.servicer import RouterServicer
    from services.threads.servicer import ThreadsServicer


R = TypeVar("R")


class Collaborators(Protocol):
    async def get_conversation(self, user: str, conversation_id: str) -> threads_pb2.Conversation: ...

    async def recall(self, user: str, query: str, persona: str) -> Sequence[memory_pb2.RecalledNote]: ...

    async def personal_settings(self, user: str) -> memory_pb2.PersonalSettings: ...

    async def active_instructions(self, user: str) -> pages_service_pb2.GetActiveInstructionsResponse: ...

    async def create_instruction_page(self, user: str, request_id: str) -> pages_pb2.Page: ...

    async def create_proposal(
        self, user: str, request_id: str, page_id: str, body: str, reason: str
    ) -> pages_pb2.Proposal: ...

    async def route_skills(
        self, user: str, text: str, forced: Sequence[str], offline: bool
    ) -> router_service_pb2.RouteSkillsResponse: ...

    async def route_model(
        self, user: str, text: str, requested: str, default: str, offline: bool
    ) -> router_service_pb2.RouteModelResponse: ...

    async def append_entries(
        self, user: str, thread_id: str, request_id: str, entries: Sequence[threads_pb2.Entry]
    ) -> None: ...

    async def set_auto_title(self, user: str, conversation_id: str, request_text: str) -> None: ...


def _translate(service: str, error: grpc.aio.AioRpcError) -> DomainError:
    """A downstream failure as the engine's own error: client mistakes keep
    their code, anything else says which service failed."""
    code = error.code()
    if code == grpc.StatusCode.NOT_FOUND:
        return NotFound(error.details() or "not found")
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return InvalidArgument(error.details() or "invalid argument")
    if code == grpc.StatusCode.FAILED_PRECONDITION:
        return FailedPrecondition(f"{service}: {error.details() or 'failed precondition'}")
    return DependencyUnavailable(f"{service} service failed: {code.name} {error.details() or ''}".strip())


class GrpcCollaborators:
    """One channel per service, opened at start-up; every call has a deadline;
    idempotent calls retry UNAVAILABLE (appends are idempotent on request_id)."""

    def __init__(
        self, threads_address: str, memory_address: str, router_address: str, timeout: float
    ) -> None:
        self._channels = [open_channel(a) for a in (threads_address, memory_address, router_address)]
        self._threads = threads_service_pb2_grpc.ThreadsServiceStub(self._channels[0])
        self._memory = memory_service_pb2_grpc.MemoryServiceStub(self._channels[1])
        self._router = router_service_pb2_grpc.RouterServiceStub(self._channels[2])
        self._pages = pages_service_pb2_grpc.PagesServiceStub(self._channels[1])  # memory serves pages
        self._timeout = timeout

    async def close(self) -> None:
        for channel in self._channels:
            await channel.close()

    async def _call(self, service: str, method: Callable[..., Awaitable[R]], request: object, user: str) -> R:
        """One call as ``user``, with the deadline and retries of
        services.shared.clients.call; failures become the engine's errors."""
        try:
            return await call(method, request, timeout=self._timeout, metadata=user_metadata(user))
        except grpc.aio.AioRpcError as error:
            raise _translate(service, error) from error

    async def get_conversation(self, user: str, conversation_id: str) -> threads_pb2.Conversation:
        request = threads_service_pb2.GetConversationRequest(conversation_id=conversation_id)
        response = await self._call("threads", self._threads.GetConversation, request, user)
        return cast(threads_pb2.Conversation, response.conversation)

    async def recall(self, user: str, query: str, persona: str) -> Sequence[memory_pb2.RecalledNote]:
        request = memory_service_pb2.RecallNotesRequest(query=query, persona=persona)
        response = await self._call("memory", self._memory.RecallNotes, request, user)
        return cast(Sequence[memory_pb2.RecalledNote], response.notes)

    async def personal_settings(self, user: str) -> memory_pb2.PersonalSettings:
        request = memory_service_pb2.GetPersonalSettingsRequest()
        response = await self._call("memory", self._memory.GetPersonalSettings, request, user)
        return cast(memory_pb2.PersonalSettings, response.settings)

    async def active_instructions(self, user: str) -> pages_service_pb2.GetActiveInstructionsResponse:
        request = pages_service_pb2.GetActiveInstructionsRequest()
        return cast(
            pages_service_pb2.GetActiveInstructionsResponse,
            await self._call("memory", self._pages.GetActiveInstructions, request, user),
        )

    async def create_instruction_page(self, user: str, request_id: str) -> pages_pb2.Page:
        request = pages_service_pb2.CreateInstructionPageRequest(request_id=request_id)
        response = await self._call("memory", self._pages.CreateInstructionPage, request, user)
        return cast(pages_pb2.Page, response.page)

    async def create_proposal(
        self, user: str, request_id: str, page_id: str, body: str, reason: str
    ) -> pages_pb2.Proposal:
        request = pages_service_pb2.CreateProposalRequest(
            request_id=request_id,
            page_id=page_id,
            proposed_body=body,
            reason=reason,
            proposer_agent_id="personal",
        )
        response = await self._call("memory", self._pages.CreateProposal, request, user)
        return cast(pages_pb2.Proposal, response.proposal)

    async def route_skills(
        self, user: str, text: str, forced: Sequence[str], offline: bool
    ) -> router_service_pb2.RouteSkillsResponse:
        request = router_service_pb2.RouteSkillsRequest(text=text, forced_skills=forced, offline=offline)
        return cast(
            router_service_pb2.RouteSkillsResponse,
            await self._call("router", self._router.RouteSkills, request, user),
        )

    async def route_model(
        self, user: str, text: str, requested: str, default: str, offline: bool
    ) -> router_service_pb2.RouteModelResponse:
        request = router_service_pb2.RouteModelRequest(
            text=text, requested_model=requested, default_model=default, offline=offline
        )
        return cast(
            router_service_pb2.RouteModelResponse,
            await self._call("router", self._router.RouteModel, request, user),
        )

    async def append_entries(
        self, user: str, thread_id: str, request_id: str, entries: Sequence[threads_pb2.Entry]
    ) -> None:
        request = threads_service_pb2.AppendEntriesRequest(
            request_id=request_id, thread_id=thread_id, entries=entries
        )
        await self._call("threads", self._threads.AppendEntries, request, user)

    async def set_auto_title(self, user: str, conversation_id: str, request_text: str) -> None:
        request = threads_service_pb2.SetAutoTitleRequest(
            conversation_id=conversation_id, request_text=request_text
        )
        await self._call("threads", self._threads.SetAutoTitle, request, user)


class _LocalContext:
    """The little of a ServicerContext that servicers use: who calls."""

    def __init__(self, user: str) -> None:
        self._metadata = user_metadata(user)

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def time_remaining(self) -> float | None:
        return None


def _local(user: str) -> Any:
    return cast(Any, _LocalContext(user))


class InProcessCollaborators:
    """The same calls made directly on the other services' servicers in this
    process: no network, no serialisation. The benchmark's floor, and the
    proof that the run logic does not depend on the transport."""

    def __init__(
        self, threads: ThreadsServicer, memory: MemoryServicer, pages: PagesServicer, router: RouterServicer
    ) -> None:
        self._threads, self._memory, self._pages, self._router = threads, memory, pages, router

    async def get_conversation(self, user: str, conversation_id: str) -> threads_pb2.Conversation:
        request = threads_service_pb2.GetConversationRequest(conversation_id=conversation_id)
        return (await self._threads.GetConversation(request, _local(user))).conversation

    async def recall(self, user: str, query: str, persona: str) -> Sequence[memory_pb2.RecalledNote]:
        request = memory_service_pb2.RecallNotesRequest(query=query, persona=persona)
        return (await self._memory.RecallNotes(request, _local(user))).notes

    async def personal_settings(self, user: str) -> memory_pb2.PersonalSettings:
        request = memory_service_pb2.GetPersonalSettingsRequest()
        return (await self._memory.GetPersonalSettings(request, _local(user))).settings

    async def active_instructions(self, user: str) -> pages_service_pb2.GetActiveInstructionsResponse:
        request = pages_service_pb2.GetActiveInstructionsRequest()
        return await self._pages.GetActiveInstructions(request, _local(user))

    async def create_instruction_page(self, user: str, request_id: str) -> pages_pb2.Page:
        request = pages_service_pb2.CreateInstructionPageRequest(request_id=request_id)
        return (await self._pages.CreateInstructionPage(request, _local(user))).page

    async def create_proposal(
        self, user: str, request_id: str, page_id: str, body: str, reason: str
    ) -> pages_pb2.Proposal:
        request = pages_service_pb2.CreateProposalRequest(
            request_id=request_id,
            page_id=page_id,
            proposed_body=body,
            reason=reason,
            proposer_agent_id="personal",
        )
        return (await self._pages.CreateProposal(request, _local(user))).proposal

    async def route_skills(
        self, user: str, text: str, forced: Sequence[str], offline: bool
    ) -> router_service_pb2.RouteSkillsResponse:
        request = router_service_pb2.RouteSkillsRequest(text=text, forced_skills=forced, offline=offline)
        return await self._router.RouteSkills(request, _local(user))

    async def route_model(
        self, user: str, text: str, requested: str, default: str, offline: bool
    ) -> router_service_pb2.RouteModelResponse:
        request = router_service_pb2.RouteModelRequest(
            text=text, requested_model=requested, default_model=default, offline=offline
        )
        return await self._router.RouteModel(request, _local(user))

    async def append_entries(
        self, user: str, thread_id: str, request_id: str, entries: Sequence[threads_pb2.Entry]
    ) -> None:
        request = threads_service_pb2.AppendEntriesRequest(
            request_id=request_id, thread_id=thread_id, entries=entries
        )
        await self._threads.AppendEntries(request, _local(user))

    async def set_auto_title(self, user: str, conversation_id: str, request_text: str) -> None:
        request = threads_service_pb2.SetAutoTitleRequest(
            conversation_id=conversation_id, request_text=request_text
        )
        await self._threads.SetAutoTitle(request, _local(user))
