"""Provider sessions: a provider's native session id bound to an agent thread.

Keyed by (agent thread, provider), not by (requester, target) pair:
every requester of an agent reuses the one live session of its thread. At most
one live session per key, guaranteed by a partial unique index. No gRPC here.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from services.shared.audit import Actor
from services.shared.errors import FailedPrecondition, InvalidArgument, NotFound
from services.shared.pagination import as_text, page_of, page_request
from services.shared.time import utcnow
from services.threads.access import READ, AgentAccess, is_service
from services.threads.models import ProviderSession, Thread
from services.threads.repository import ThreadsRepository

MAX_PROVIDER_ID_CHARS = 64
MAX_NATIVE_ID_CHARS = 256


class ProviderSessions:
    """Binding and releasing need the right to ask the thread's agent
    (editors and up of its project); reading, the right to read it."""

    def __init__(self, repository: ThreadsRepository, access: AgentAccess) -> None:
        self._repo = repository
        self._access = access

    async def _agent_thread(self, thread_id: str, actor: Actor) -> Thread:
        """An agent thread, or a conversation of the caller's (a chat on a CLI
        provider keeps a native session too); the engine acts for its runs'
        users as a service. Anything else looks missing."""
        thread = await self._repo.threads.get_thread(thread_id) if thread_id else None
        mine = thread is not None and (thread.user_id == actor.user or is_service(actor))
        if thread is None or not (thread.kind == "agent" or (thread.kind == "conversation" and mine)):
            raise NotFound(f"agent thread {thread_id!r} not found", agent_thread_id=thread_id)
        return thread

    @staticmethod
    def _check_provider(provider_id: str) -> None:
        if not provider_id:
            raise InvalidArgument("provider_id must not be empty", field="provider_id")
        if len(provider_id) > MAX_PROVIDER_ID_CHARS:
            raise InvalidArgument(
                f"provider_id is longer than {MAX_PROVIDER_ID_CHARS} characters", field="provider_id"
            )

    async def bind(
        self, actor: Actor, thread_id: str, provider_id: str, native_session_id: str, replace: bool
    ) -> tuple[ProviderSession, bool]:
        """The live session of the key and whether this call bound it. Binding
        the native id that is bound already is a no-op (a retry); another
        native id needs ``replace``, which releases the old one atomically."""
        await self._access.require_thread_id_member(actor, thread_id)
        self._check_provider(provider_id)
        if not native_session_id or len(native_session_id) > MAX_NATIVE_ID_CHARS:
            raise InvalidArgument(
                f"native_session_id must have 1 to {MAX_NATIVE_ID_CHARS} characters",
                field="native_session_id",
            )
        await self._agent_thread(thread_id, actor)
        for _ in range(3):
            live = await self._repo.provider_sessions.live_provider_session(thread_id, provider_id)
            if live is not None and live.native_session_id == native_session_id:
                return live, False
            if live is not None and not replace:
                raise FailedPrecondition(
                    f"provider {provider_id!r} already has a live session on this thread; "
                    "release it or bind with replace",
                    agent_thread_id=thread_id,
                    provider_id=provider_id,
                )
            row = ProviderSession(
                id=str(uuid.uuid4()),
                agent_thread_id=thread_id,
                provider_id=provider_id,
                native_session_id=native_session_id,
                create_time=utcnow(),
            )
            if await self._repo.provider_sessions.bind_provider_session(row, replace):
                return row, True
            # A concurrent bind won the key: look again.
        raise FailedPrecondition(
            "concurrent binds keep replacing this session; retry",
            agent_thread_id=thread_id,
            provider_id=provider_id,
        )

    async def get(self, actor: Actor, thread_id: str, provider_id: str) -> ProviderSession:
        await self._access.require_thread_id_member(actor, thread_id, READ)
        self._check_provider(provider_id)
        await self._agent_thread(thread_id, actor)
        live = await self._repo.provider_sessions.live_provider_session(thread_id, provider_id)
        if live is None:
            raise NotFound(
                f"no live session of provider {provider_id!r} on this thread",
                agent_thread_id=thread_id,
                provider_id=provider_id,
            )
        return live

    async def release(self, actor: Actor, thread_id: str, provider_id: str) -> ProviderSession:
        await self._access.require_thread_id_member(actor, thread_id)
        self._check_provider(provider_id)
        await self._agent_thread(thread_id, actor)
        released = await self._repo.provider_sessions.release_provider_session(thread_id, provider_id)
        if released is None:
            raise NotFound(
                f"no live session of provider {provider_id!r} on this thread",
                agent_thread_id=thread_id,
                provider_id=provider_id,
            )
        return released

    async def list(
        self, actor: Actor, thread_id: str, include_released: bool, requested_size: int, token: str
    ) -> tuple[Sequence[ProviderSession], str]:
        await self._access.require_thread_id_member(actor, thread_id, READ)
        await self._agent_thread(thread_id, actor)
        size, after = page_request(
            requested_size, token, lambda cursor: (as_text(cursor["p"]), as_text(cursor["id"]))
        )
        rows = await self._repo.provider_sessions.list_provider_sessions(
            thread_id, include_released, after, size + 1
        )
        return page_of(rows, size, lambda last: {"p": last.provider_id, "id": last.id})
