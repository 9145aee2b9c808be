"""What every route needs: the caller, the service stubs, deadlines, and a
unary call with the caller's identity in its metadata."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Annotated, Protocol, TypeVar

from fastapi import Depends, Request

from gateway.auth import caller_role, current_user
from gateway.settings import GatewaySettings
from services.shared.clients import call
from services.shared.identity import user_metadata
from switchboard.engine.v1 import engine_service_pb2_grpc, schedules_service_pb2_grpc
from switchboard.memory.v1 import memory_service_pb2_grpc, pages_service_pb2_grpc, projects_service_pb2_grpc
from switchboard.router.v1 import router_service_pb2_grpc
from switchboard.threads.v1 import threads_service_pb2, threads_service_pb2_grpc

User = Annotated[str, Depends(current_user)]
Response = TypeVar("Response")


class Paged(Protocol):
    @property
    def next_page_token(self) -> str: ...


Page = TypeVar("Page", bound=Paged)
Item = TypeVar("Item")


def settings(request: Request) -> GatewaySettings:
    return request.app.state.settings  # type: ignore[no-any-return]


def engine(request: Request) -> engine_service_pb2_grpc.EngineServiceAsyncStub:
    return request.app.state.engine  # type: ignore[no-any-return]


def schedules(request: Request) -> schedules_service_pb2_grpc.ScheduleServiceAsyncStub:
    return request.app.state.schedules  # type: ignore[no-any-return]


def threads(request: Request) -> threads_service_pb2_grpc.ThreadsServiceAsyncStub:
    return request.app.state.threads  # type: ignore[no-any-return]


def memory(request: Request) -> memory_service_pb2_grpc.MemoryServiceAsyncStub:
    return request.app.state.memory  # type: ignore[no-any-return]


def pages(request: Request) -> pages_service_pb2_grpc.PagesServiceAsyncStub:
    return request.app.state.pages  # type: ignore[no-any-return]


def projects(request: Request) -> projects_service_pb2_grpc.ProjectsServiceAsyncStub:
    """Projects and their members, served by the memory service on its port."""
    return request.app.state.projects  # type: ignore[no-any-return]


def router_stub(request: Request) -> router_service_pb2_grpc.RouterServiceAsyncStub:
    return request.app.state.router  # type: ignore[no-any-return]


def identity(request: Request, user: str) -> tuple[tuple[str, str], ...]:
    """The metadata that names the caller to a service, for every call the
    gateway makes: a token signed now (tokens are short-lived, so one per
    call) for ``user`` with the role the request's token carries."""
    return user_metadata(user, caller_role(request))


async def rpc(
    request: Request,
    method: Callable[..., Awaitable[Response]],
    message: object,
    user: str,
    *,
    idempotent: bool = True,
    timeout: float | None = None,
) -> Response:
    """A unary call as ``user`` (see identity) with the gateway's deadline
    (or ``timeout``, for a call that waits on something outside);
    retried on
    UNAVAILABLE only when ``idempotent`` (reads, and writes carrying a key
    or setting a value)."""
    return await call(
        method,
        message,
        timeout=timeout or settings(request).call_timeout,
        metadata=identity(request, user),
        idempotent=idempotent,
    )


async def every_item(
    request: Request,
    method: Callable[..., Awaitable[Page]],
    page: Callable[[str], object],
    items: Callable[[Page], Iterable[Item]],
    user: str,
) -> list[Item]:
    """Every item of a List RPC, in order, page after page: ``page(token)``
    builds the request of the page a token names ("" for the first),
    ``items`` takes a page's items out of its response."""
    found: list[Item] = []
    token = ""
    while True:
        response = await rpc(request, method, page(token), user)
        found += items(response)
        token = response.next_page_token
        if not token:
            return found


async def conversation_entries(
    request: Request,
    user: str,
    conversation_id: str,
    *,
    descending: bool,
    page_size: int,
    page_token: str = "",
    start_entry_id: str = "",
) -> threads_service_pb2.ListEntriesResponse:
    """A page of the conversation's entries (ListEntries' ForConversation
    view), for every route that shows a conversation's messages."""
    response: threads_service_pb2.ListEntriesResponse = await rpc(
        request,
        threads(request).ListEntries,
        threads_service_pb2.ListEntriesRequest(
            for_conversation=threads_service_pb2.ListEntriesRequest.ForConversation(
                conversation_id=conversation_id
            ),
            descending=descending,
            page_size=page_size,
            page_token=page_token,
            start_entry_id=start_entry_id,
        ),
        user,
    )
    return response
