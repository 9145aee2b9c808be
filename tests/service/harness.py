"""Runs one service in-process on port 0 and hands out a real stub to it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import grpc

from services.shared.bootstrap import RunningService
from services.shared.errors import error_info
from services.shared.identity import user_metadata
from services.shared.settings import ServiceSettings
from switchboard.memory.v1 import projects_pb2, projects_service_pb2, projects_service_pb2_grpc

S = TypeVar("S", bound=ServiceSettings)


@asynccontextmanager
async def running(
    build: Callable[[S], Awaitable[RunningService]], settings: S
) -> AsyncIterator[tuple[RunningService, grpc.aio.Channel]]:
    service = await build(settings)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{service.port}")
    try:
        yield service, channel
    finally:
        await channel.close()
        await service.stop(None)


class AsUser(Mapping[str, Any]):
    """A call's keyword arguments for ``user`` (``stub.M(request, **as_user("alice"))``):
    its identity token is minted when the call is made, not when the module
    was imported, since a token lives a minute and a run of the suite longer."""

    def __init__(self, user: str, role: str, timeout: float) -> None:
        self._user, self._role, self._timeout = user, role, timeout

    def __getitem__(self, key: str) -> Any:
        if key == "metadata":
            return user_metadata(self._user, self._role)
        if key == "timeout":
            return self._timeout
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(("metadata", "timeout"))

    def __len__(self) -> int:
        return 2


def as_user(user: str, role: str = "user", timeout: float = 10) -> AsUser:
    return AsUser(user, role, timeout)


def as_admin(user: str) -> AsUser:
    return as_user(user, "admin")


async def expect_error(call: Awaitable[Any], code: grpc.StatusCode, reason: str) -> grpc.aio.AioRpcError:
    """Awaits a call that must fail with ``code`` and ErrorInfo ``reason``."""
    try:
        await call
    except grpc.aio.AioRpcError as error:
        assert error.code() == code, (error.code(), error.details())
        info = error_info(error)
        assert info is not None and info.reason == reason and info.domain == "switchboard.dev", info
        return error
    raise AssertionError(f"expected {code.name}/{reason}, the call succeeded")


async def sequences_both_ways(
    list_entries: Callable[..., Awaitable[Any]], request: Any, user: str
) -> tuple[list[int], list[int]]:
    """The entry sequences of a two-way listing (ListEntries), read page by
    page forward with ``next_page_token`` from ``request`` as given, then
    backward from the last page with ``previous_page_token``, each in the
    listing's order: both must equal the listing read whole."""
    pages = [await list_entries(request, **as_user(user))]
    while pages[-1].next_page_token:
        request.page_token = pages[-1].next_page_token
        pages.append(await list_entries(request, **as_user(user)))
    back = [pages[-1]]
    while back[-1].previous_page_token:
        request.page_token = back[-1].previous_page_token
        back.append(await list_entries(request, **as_user(user)))
    forward = [e.sequence for page in pages for e in page.entries]
    backward = [e.sequence for page in reversed(back) for e in page.entries]
    return forward, backward


async def create_projects(channel: grpc.aio.Channel, owner: str, *project_ids: str, **members: str) -> None:
    """Projects owned by ``owner``, each with ``members`` (user -> "viewer",
    "editor" or "owner"), through the memory service's ProjectsService."""
    projects = projects_service_pb2_grpc.ProjectsServiceStub(channel)
    for project_id in project_ids:
        await projects.CreateProject(
            projects_service_pb2.CreateProjectRequest(
                project=projects_pb2.Project(id=project_id, display_name=project_id.title())
            ),
            **as_user(owner),
        )
        for user, role in members.items():
            member = projects_pb2.ProjectMember(
                project_id=project_id,
                user_id=user,
                role=projects_pb2.ProjectRole.Value(f"PROJECT_ROLE_{role.upper()}"),
            )
            await projects.SetProjectMember(
                projects_service_pb2.SetProjectMemberRequest(member=member), **as_user(owner)
            )
