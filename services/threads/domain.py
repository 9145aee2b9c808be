"""Rules of the threads service: validation, ownership, pagination. No gRPC here."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from services.shared.errors import InvalidArgument, NotFound, TooLarge
from services.shared.pagination import decode_token, encode_token, page_size
from services.shared.time import utcnow
from services.threads.models import Agent, Entry, Thread
from services.threads.repository import NewEntry, ThreadsRepository

_AGENT_ID = re.compile(r"^[a-z][a-z0-9-]{0,63}$")
MAX_TITLE_CHARS = 200
MAX_ENTRIES_PER_APPEND = 100


class ThreadsDomain:
    def __init__(self, repository: ThreadsRepository, max_entry_chars: int) -> None:
        self._repo = repository
        self._max_entry_chars = max_entry_chars

    # Agents

    async def create_agent(self, agent: Agent) -> Agent:
        if not _AGENT_ID.match(agent.id):
            raise InvalidArgument("agent id must be a slug: a-z, 0-9 and '-', at most 64", field="agent.id")
        if not agent.display_name.strip():
            agent.display_name = agent.id
        if not await self._repo.insert_agent(agent):
            existing = await self._repo.get_agent(agent.id)
            assert existing is not None
            return existing  # creating an existing agent is a no-op, like a retry
        return agent

    async def get_agent(self, agent_id: str) -> Agent:
        agent = await self._repo.get_agent(agent_id) if agent_id else None
        if agent is None:
            raise NotFound(f"agent {agent_id!r} not found", agent_id=agent_id)
        return agent

    async def list_agents(self, requested_size: int, token: str) -> tuple[Sequence[Agent], str]:
        size = page_size(requested_size)
        cursor = decode_token(token)
        rows = await self._repo.list_agents(str(cursor.get("after", "")), size + 1)
        next_token = encode_token({"after": rows[size - 1].id}) if len(rows) > size else ""
        return rows[:size], next_token

    # Conversations

    async def create_conversation(
        self, user_id: str, request_id: str, title: str, allowed_sources: dict[str, Any]
    ) -> Thread:
        title = title.strip()
        if len(title) > MAX_TITLE_CHARS:
            raise TooLarge(f"title is longer than {MAX_TITLE_CHARS} characters", field="title")
        now = utcnow()
        thread = Thread(
            id=str(uuid.uuid4()),
            create_time=now,
            update_time=now,
            kind="conversation",
            user_id=user_id,
            request_id=request_id or None,
            title=title,
            title_auto=False,
            sources_json=json.dumps(allowed_sources, sort_keys=True),
        )
        return await self._repo.insert_conversation(thread)

    async def get_conversation(self, user_id: str, conversation_id: str) -> Thread:
        """Another user's conversation is NOT_FOUND, exactly like a missing one."""
        thread = await self._repo.get_thread(conversation_id) if conversation_id else None
        if thread is None or thread.kind != "conversation" or thread.user_id != user_id:
            raise NotFound(f"conversation {conversation_id!r} not found", conversation_id=conversation_id)
        return thread

    async def list_conversations(
        self, user_id: str, requested_size: int, token: str
    ) -> tuple[Sequence[Thread], str]:
        size = page_size(requested_size)
        cursor = decode_token(token)
        key = None
        if cursor:
            try:
                key = (bool(cursor["pinned"]), datetime.fromisoformat(cursor["time"]), str(cursor["id"]))
            except (KeyError, ValueError) as exc:
                raise InvalidArgument(
                    "page_token is not a token this service issued", field="page_token"
                ) from exc
        rows = await self._repo.list_conversations(user_id, key, size + 1)  # type: ignore[arg-type]
        next_token = ""
        if len(rows) > size:
            last = rows[size - 1]
            next_token = encode_token(
                {"pinned": last.pinned, "time": last.update_time.isoformat(), "id": last.id}
            )
        return rows[:size], next_token

    # Entries

    async def _readable_thread(self, user_id: str, thread_id: str) -> Thread:
        thread = await self._repo.get_thread(thread_id) if thread_id else None
        # Conversations belong to one user; agent threads to the project's agents.
        if thread is None or (thread.kind == "conversation" and thread.user_id != user_id):
            raise NotFound(f"thread {thread_id!r} not found", thread_id=thread_id)
        return thread

    async def append_entries(
        self, user_id: str, thread_id: str, request_id: str, entries: Sequence[NewEntry]
    ) -> list[Entry]:
        if not entries:
            raise InvalidArgument("entries must not be empty", field="entries")
        if len(entries) > MAX_ENTRIES_PER_APPEND:
            raise InvalidArgument(f"at most {MAX_ENTRIES_PER_APPEND} entries per append", field="entries")
        for entry in entries:
            if entry.role == 0:
                raise InvalidArgument("every entry needs a role", field="entries.role")
            if len(entry.content) > self._max_entry_chars:
                raise TooLarge(
                    f"entry content exceeds {self._max_entry_chars} characters", field="entries.content"
                )
        written = (
            await self._repo.append_entries(thread_id, user_id, request_id, entries) if thread_id else None
        )
        if written is None:
            raise NotFound(f"thread {thread_id!r} not found", thread_id=thread_id)
        return written

    async def list_entries(
        self,
        user_id: str,
        thread_id: str,
        correlation_id: str,
        descending: bool,
        requested_size: int,
        token: str,
    ) -> tuple[Sequence[Entry], str]:
        await self._readable_thread(user_id, thread_id)
        size = page_size(requested_size)
        cursor = decode_token(token)
        position = cursor.get("seq")
        if position is not None and not isinstance(position, int):
            raise InvalidArgument("page_token is not a token this service issued", field="page_token")
        rows = await self._repo.list_entries(thread_id, correlation_id, position, descending, size + 1)
        next_token = encode_token({"seq": rows[size - 1].sequence}) if len(rows) > size else ""
        return rows[:size], next_token
