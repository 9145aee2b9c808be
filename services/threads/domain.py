"""Rules of the threads service: validation, ownership, pagination. No gRPC here."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from services.shared.agent_cards import CardSummary
from services.shared.audit import Actor, new_event
from services.shared.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound, TooLarge
from services.shared.masks import masked_fields
from services.shared.pagination import as_instant, as_text, page_of, page_request, page_size
from services.shared.projects import MAX_PROJECT_ID_CHARS, PERSONAL_NAMES, ProjectRole, personal_project_id
from services.shared.time import utcnow
from services.threads.access import ASK, READ, AgentAccess
from services.threads.models import Agent, Thread, ThreadsAuditEvent
from services.threads.owners import ThreadOwner
from services.threads.paging import read_page, start_token, view_fingerprint
from services.threads.repository import ThreadsRepository
from services.threads.rotation import Rotation
from services.threads.tables.entries import EntryFilter, EntryRow, NewEntry
from switchboard.common.v1.common_pb2 import AuditEvent, AuditPosition

_AGENT_ID = re.compile(r"^[a-z][a-z0-9-]{0,63}$")
MAX_TITLE_CHARS = 200
MAX_AUTO_TITLE_CHARS = 60
MAX_ENTRIES_PER_APPEND = 100
MAX_USER_CHARS = 128
# A conversation's client labels, as OpenAI's API bounds them.
MAX_METADATA_PAIRS = 16
MAX_METADATA_KEY_CHARS = 64
MAX_METADATA_VALUE_CHARS = 512
AGENT_MUTABLE_FIELDS = ("display_name", "persona", "provider_id", "model", "injection_strategy")
# The allowed sources, each settable on its own (``allowed_sources.memory``)
# so that a save of one keeps the others.
SOURCE_FIELDS = ("workspace", "connectors", "mcp_servers", "memory")
CONVERSATION_MUTABLE_FIELDS = (
    "title",
    "pinned",
    "allowed_sources",
    "metadata",
    *(f"allowed_sources.{name}" for name in SOURCE_FIELDS),
)


@dataclass(frozen=True)
class View:
    """What ListEntries reads. kind "thread" is the pre-view request: a
    thread id and an optional correlation filter."""

    kind: str  # "thread" | "agent" | "pair" | "correlation" | "conversation"
    thread_id: str = ""
    agent_id: str = ""
    requester: str = ""
    target: str = ""
    correlation_id: str = ""


@dataclass(frozen=True)
class EntriesPage:
    entries: list[EntryRow]
    next_token: str
    previous_token: str
    thread_id: str
    # The view is a filter over the thread: other turns exist beside these.
    partial: bool


def auto_title(text: str, limit: int = MAX_AUTO_TITLE_CHARS) -> str:
    """The offline automatic title: the request on one line, cut at a word
    boundary to at most ``limit`` characters (an ellipsis included)."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    head = line[: limit - 1]
    cut = head.rfind(" ")
    if cut >= limit // 2:  # a word boundary not too far back; else a hard cut
        head = head[:cut]
    return head.rstrip(" ,;:.-") + "…"


class ThreadsDomain:
    def __init__(
        self,
        repository: ThreadsRepository,
        access: AgentAccess,
        max_entry_chars: int,
        rotation: Rotation | None = None,
        read_card: Callable[[str], Awaitable[CardSummary]] | None = None,
    ) -> None:
        """``read_card``: fetches and checks a remote A2A agent's card
        (None: remote agents cannot be registered here)."""
        self._repo = repository
        self._access = access
        self._max_entry_chars = max_entry_chars
        # None: agent threads never rotate (their open segment still counts).
        self._rotation = rotation
        self._read_card = read_card

    # Agents

    async def create_agent(self, actor: Actor, agent: Agent) -> Agent:
        """Registers the agent owned by the caller (its first member) in
        ``agent.project_id``: "" for the caller's personal project, else a
        project the caller is an editor or owner of."""
        _check_agent_id(agent.id, "agent.id")
        if not agent.display_name.strip():
            agent.display_name = agent.id
        agent.project_id = await self._access.project_for_new_agent(actor, agent.project_id)
        return await self._insert_owned(actor, agent)

    async def _insert_owned(self, actor: Actor, agent: Agent) -> Agent:
        """``agent`` owned by the caller in its project (one
        ``project_for_new_agent`` resolved and allowed), recorded; the agent
        already stored under its id when there is one."""
        agent.owner_id = actor.user
        audit = new_event(ThreadsAuditEvent, actor, "agent.create", agent.id, _agent_detail(agent))
        if not await self._repo.registry.insert_owned_agent(agent, audit):
            existing = await self._repo.agents.get_agent(agent.id)
            assert existing is not None
            return existing  # creating an existing agent is a no-op, like a retry
        return agent

    async def register_remote_agent(
        self, actor: Actor, agent_id: str, card_url: str, display_name: str, project_id: str
    ) -> Agent:
        """A remote A2A agent, registered like CreateAgent once its card is
        read and checked. The same id with the same card URL is a retry
        (the stored agent, unchanged); with anything else, ALREADY_EXISTS."""
        _check_agent_id(agent_id, "agent_id")
        card_url = card_url.strip()
        if not card_url:
            raise InvalidArgument("card_url is required", field="card_url")
        if self._read_card is None:
            raise FailedPrecondition("this threads service does not register remote agents")
        existing = await self._repo.agents.get_agent(agent_id)
        if existing is None:
            # The caller's right to add an agent to the project first: a
            # viewer or a stranger makes the service fetch nothing.
            project_id = await self._access.project_for_new_agent(actor, project_id)
            card = await self._read_card(card_url)
            agent = Agent(
                id=agent_id,
                display_name=display_name.strip() or card.name,
                project_id=project_id,
                remote_card_url=card_url,
                remote_card_name=card.name,
                remote_description=card.description,
                remote_streaming=card.streaming,
            )
            existing = await self._insert_owned(actor, agent)
        if existing.remote_card_url != card_url:
            raise AlreadyExists(f"agent {agent_id!r} exists already", agent_id=agent_id)
        return existing

    # Registry reads (GetAgent, ListAgents) show every agent of a personal
    # project, and an agent of a shared project only to the members of that
    # project or of the agent (AgentAccess.visible).

    async def get_agent(self, actor: Actor, agent_id: str) -> Agent:
        return await self._access.visible_agent(actor, agent_id)

    async def list_agents(
        self, actor: Actor, requested_size: int, token: str, project_id: str = ""
    ) -> tuple[Sequence[Agent], str]:
        """The registry by id; only ``project_id``'s agents when given
        ("default" or "personal": the caller's personal project)."""
        project_id = project_id.strip()
        if project_id in PERSONAL_NAMES - {""}:
            project_id = personal_project_id(actor.user)
        elif len(project_id) > MAX_PROJECT_ID_CHARS:
            raise TooLarge(f"project_id is longer than {MAX_PROJECT_ID_CHARS} characters", field="project_id")
        size, after = page_request(requested_size, token, lambda cursor: as_text(cursor["after"]))
        rows = await self._repo.agents.list_agents(after or "", size + 1, project_id)
        page, next_token = page_of(rows, size, lambda last: {"after": last.id})
        # One membership check per shared project of the page; a page may come
        # out shorter than asked, its token still moves past what it hid.
        roles: dict[str, ProjectRole] = {}
        return [agent for agent in page if await self._access.visible(actor, agent, roles)], next_token

    async def update_agent(self, actor: Actor, agent_id: str, changes: Agent, paths: Sequence[str]) -> Agent:
        await self._access.require_manager(actor, agent_id, "changing the settings")
        fields = masked_fields(paths, AGENT_MUTABLE_FIELDS)
        values = {name: getattr(changes, name) for name in fields}
        if "display_name" in values and not str(values["display_name"]).strip():
            values["display_name"] = agent_id
        audit = new_event(
            ThreadsAuditEvent, actor, "agent.update", agent_id, f"fields={','.join(sorted(values))}"
        )
        agent = await self._repo.registry.update_agent_recorded(agent_id, values, audit)
        if agent is None:
            raise NotFound(f"agent {agent_id!r} not found", agent_id=agent_id)
        return agent

    # Members

    async def members(self, actor: Actor, agent_id: str) -> tuple[str, list[str]]:
        """(owner, members with the owner first): for members (of the agent
        or its project) and admins."""
        agent = await self._access.agent(actor, agent_id)
        if not actor.is_admin:
            await self._access.require_member(actor, agent_id, READ)
        return agent.owner_id, _owner_first(agent.owner_id, await self._repo.registry.members(agent_id))

    async def add_member(self, actor: Actor, agent_id: str, user_id: str) -> list[str]:
        agent = await self._access.require_manager(actor, agent_id, "adding members")
        user_id = _member_id(user_id)
        audit = new_event(ThreadsAuditEvent, actor, "agent.member_add", agent_id, f"member={user_id}")
        await self._repo.registry.add_member(agent_id, user_id, audit)
        return _owner_first(agent.owner_id, await self._repo.registry.members(agent_id))

    async def remove_member(self, actor: Actor, agent_id: str, user_id: str) -> list[str]:
        agent = await self._access.require_manager(actor, agent_id, "removing members")
        user_id = _member_id(user_id)
        if user_id == agent.owner_id:
            raise FailedPrecondition(
                f"{user_id} owns agent {agent_id!r} and stays a member", agent_id=agent_id
            )
        audit = new_event(ThreadsAuditEvent, actor, "agent.member_remove", agent_id, f"member={user_id}")
        await self._repo.registry.remove_member(agent_id, user_id, audit)
        return _owner_first(agent.owner_id, await self._repo.registry.members(agent_id))

    async def list_audit(
        self, actor: Actor, requested_size: int, token: str, before: AuditPosition | None
    ) -> tuple[list[AuditEvent], str]:
        """The registry's audit log, newest first: for admins."""
        return await self._repo.registry.audit.list(actor, requested_size, token, before)

    # Agent threads

    async def ensure_agent_thread(self, actor: Actor, agent_id: str) -> tuple[Thread, bool]:
        """The agent's live thread and whether this call created it; for the
        agent's members. The partial unique index decides between concurrent
        creators (any number of processes): the losers read the winner's thread.
        Asking an agent starts here: it needs the right to ask (an editor of
        the agent's project, not a viewer)."""
        await self._access.require_member(actor, agent_id, ASK)
        for _ in range(3):
            existing = await self._repo.threads.live_agent_thread(agent_id)
            if existing is not None:
                return existing, False
            now = utcnow()
            thread = Thread(
                id=str(uuid.uuid4()), kind="agent", agent_id=agent_id, create_time=now, update_time=now
            )
            if await self._repo.threads.insert_agent_thread(thread):
                return thread, True
        # Only reachable if the winner's thread was retired between our reads.
        raise NotFound(f"agent {agent_id!r} has no live thread", agent_id=agent_id)

    async def _live_agent_thread(self, actor: Actor, agent_id: str, field: str) -> Thread:
        if not agent_id:
            raise InvalidArgument(f"{field} must not be empty", field=field)
        await self._access.require_member(actor, agent_id, READ)
        thread = await self._repo.threads.live_agent_thread(agent_id)
        if thread is None:
            await self.get_agent(actor, agent_id)  # unknown agent: NOT_FOUND with the agent id
            raise NotFound(f"agent {agent_id!r} has no thread yet", agent_id=agent_id)
        return thread

    # Conversations

    async def create_conversation(
        self,
        user_id: str,
        request_id: str,
        title: str,
        allowed_sources: dict[str, Any],
        metadata: dict[str, str] | None = None,
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
            metadata_json=_metadata_json(metadata or {}),
        )
        return await self._repo.threads.insert_conversation(thread)

    async def get_conversation(self, user_id: str, conversation_id: str) -> Thread:
        """Another user's conversation is NOT_FOUND, exactly like a missing one."""
        thread = await self._repo.threads.get_thread(conversation_id) if conversation_id else None
        if thread is None or thread.kind != "conversation" or thread.user_id != user_id:
            raise NotFound(f"conversation {conversation_id!r} not found", conversation_id=conversation_id)
        return thread

    async def _own_conversation(self, user_id: str, conversation_id: str) -> ThreadOwner:
        """Like :meth:`get_conversation` (archived ones included), from the
        owner cache: for calls that need only to know the caller owns it."""
        owner = await self._access.owners.get(conversation_id) if conversation_id else None
        if owner is None or owner.kind != "conversation" or owner.user_id != user_id:
            raise NotFound(f"conversation {conversation_id!r} not found", conversation_id=conversation_id)
        return owner

    async def list_conversations(
        self,
        user_id: str,
        requested_size: int,
        token: str,
        title_query: str = "",
        include_archived: bool = False,
    ) -> tuple[Sequence[Thread], str]:
        title_query = title_query.strip()
        if len(title_query) > MAX_TITLE_CHARS:
            raise TooLarge(f"title_query is longer than {MAX_TITLE_CHARS} characters", field="title_query")
        size, key = page_request(
            requested_size,
            token,
            lambda cursor: (bool(cursor["pinned"]), as_instant(cursor["time"]), as_text(cursor["id"])),
        )
        rows = await self._repo.threads.list_conversations(
            user_id, key, size + 1, title_query, include_archived
        )
        return page_of(
            rows,
            size,
            lambda last: {"pinned": last.pinned, "time": last.update_time.isoformat(), "id": last.id},
        )

    async def update_conversation(
        self,
        user_id: str,
        conversation_id: str,
        title: str,
        pinned: bool,
        paths: Sequence[str],
        allowed_sources: dict[str, Any] | None = None,
        metadata: dict[str, str] | None = None,
    ) -> Thread:
        fields = masked_fields(paths, CONVERSATION_MUTABLE_FIELDS)
        values: dict[str, Any] = {"update_time": utcnow()}
        if "title" in fields:
            title = title.strip()
            if len(title) > MAX_TITLE_CHARS:
                raise TooLarge(f"title is longer than {MAX_TITLE_CHARS} characters", field="title")
            # A rename is manual: no automatic title overwrites it afterwards.
            values.update(title=title, title_auto=False)
        if "pinned" in fields:
            values["pinned"] = pinned
        if "metadata" in fields:
            values["metadata_json"] = _metadata_json(metadata or {})
        named = [f.removeprefix("allowed_sources.") for f in fields if f.startswith("allowed_sources.")]
        if "allowed_sources" in fields:
            if named:
                raise InvalidArgument(
                    "update_mask names allowed_sources and some of its fields: name the whole or its fields",
                    field="update_mask",
                )
            # Stored whole, as CreateConversation stores it.
            values["sources_json"] = json.dumps(allowed_sources or {}, sort_keys=True)
        # Only the sources named change; an unset memory is its default (on).
        given = allowed_sources or {}
        return await self._updated(
            user_id, conversation_id, values, {name: given.get(name) for name in named}
        )

    async def set_auto_title(
        self, user_id: str, conversation_id: str, request_text: str, title: str
    ) -> tuple[Thread, bool]:
        """Sets the automatic title unless the user named the conversation;
        returns the conversation and whether the title was applied."""
        chosen = auto_title(title or request_text)
        if not chosen:
            raise InvalidArgument("request_text or title must not be blank", field="request_text")
        values = {"title": chosen, "title_auto": True}
        thread = (
            await self._repo.threads.update_conversation(user_id, conversation_id, values, only_if_auto=True)
            if conversation_id
            else None
        )
        if thread is not None:
            return thread, True
        return await self.get_conversation(user_id, conversation_id), False

    async def archive_conversation(self, user_id: str, conversation_id: str) -> Thread:
        current = await self.get_conversation(user_id, conversation_id)
        if current.archive_time is not None:
            return current  # archiving twice is a no-op
        return await self._updated(user_id, conversation_id, {"archive_time": utcnow()})

    async def _updated(
        self,
        user_id: str,
        conversation_id: str,
        values: dict[str, Any],
        source_changes: dict[str, Any] | None = None,
    ) -> Thread:
        thread = (
            await self._repo.threads.update_conversation(
                user_id, conversation_id, values, source_changes=source_changes
            )
            if conversation_id
            else None
        )
        if thread is None:
            raise NotFound(f"conversation {conversation_id!r} not found", conversation_id=conversation_id)
        return thread

    # Entries

    async def _readable_thread(self, actor: Actor, thread_id: str) -> ThreadOwner:
        thread = await self._access.owners.get(thread_id) if thread_id else None
        # Conversations belong to one user; agent threads to their agent's members.
        if thread is None or (thread.kind == "conversation" and thread.user_id != actor.user):
            raise NotFound(f"thread {thread_id!r} not found", thread_id=thread_id)
        await self._access.require_thread_member(actor, thread, READ)
        return thread

    async def append_entries(
        self, actor: Actor, thread_id: str, request_id: str, entries: Sequence[NewEntry]
    ) -> list[EntryRow]:
        user_id = actor.user
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
        # The owner cache spares a read; the append's UPDATE checks the owner again.
        target = await self._access.owners.get(thread_id) if thread_id else None
        if target is not None:
            await self._access.require_thread_member(actor, target, ASK)
        policy = self._rotation.policy if self._rotation is not None else None
        written = (
            await self._repo.entries.append(thread_id, user_id, request_id, entries, policy)
            if thread_id
            else None
        )
        if written is None:
            # Off the happy path: say why an agent thread refused the entries.
            thread = await self._repo.threads.get_thread(thread_id) if thread_id else None
            if thread is not None and thread.kind == "agent":
                raise InvalidArgument(
                    f"entries on agent {thread.agent_id!r}'s thread need a requester and "
                    f"target {thread.agent_id!r}",
                    field="entries.target",
                )
            raise NotFound(f"thread {thread_id!r} not found", thread_id=thread_id)
        if written.closed and self._rotation is not None:
            await self._rotation.segments_closed(written.closed)
        return written.entries

    async def list_entries(
        self,
        actor: Actor,
        view: View,
        descending: bool,
        requested_size: int,
        token: str,
        start_entry_id: str = "",
    ) -> EntriesPage:
        thread, entry_filter = await self._resolve_view(actor, view)
        size = page_size(requested_size)
        fingerprint = view_fingerprint(thread.id, entry_filter, descending)
        if start_entry_id and not token:
            start = await self._repo.entries.sequence_in_view(thread.id, entry_filter, start_entry_id)
            if start is None:
                raise NotFound(f"entry {start_entry_id!r} not found", entry_id=start_entry_id)
            token = start_token(not descending, start, fingerprint)

        async def fetch(position: int | None, ascending: bool, limit: int) -> Sequence[EntryRow]:
            return await self._repo.entries.list_entries(thread.id, entry_filter, position, ascending, limit)

        page = await read_page(fetch, descending, size, token, fingerprint)
        # Partial only when the filter really leaves entries out: one probe
        # that stops at the first entry outside the view.
        partial = await self._repo.entries.has_entries_outside(thread.id, entry_filter)
        return EntriesPage(page.items, page.next_token, page.previous_token, thread.id, partial)

    async def _resolve_view(self, actor: Actor, view: View) -> tuple[Thread | ThreadOwner, EntryFilter]:
        """The thread a view reads and the filter it applies to it."""
        user_id = actor.user
        if view.kind == "agent":
            return await self._live_agent_thread(actor, view.agent_id, "for_agent.agent_id"), EntryFilter()
        if view.kind == "pair":
            # Pair-keyed reads resolve to the target's one agent thread, filtered.
            if not view.requester:
                raise InvalidArgument("for_pair.requester must not be empty", field="for_pair.requester")
            thread = await self._live_agent_thread(actor, view.target, "for_pair.target")
            return thread, EntryFilter(requester=view.requester, target=view.target)
        if view.kind == "correlation":
            if not view.correlation_id:
                raise InvalidArgument(
                    "for_correlation.correlation_id must not be empty", field="for_correlation.correlation_id"
                )
            readable = await self._readable_thread(actor, view.thread_id)
            return readable, EntryFilter(correlation_id=view.correlation_id)
        if view.kind == "conversation":
            return await self._own_conversation(user_id, view.thread_id), EntryFilter()
        return await self._readable_thread(actor, view.thread_id), EntryFilter(
            correlation_id=view.correlation_id
        )


def _agent_detail(agent: Agent) -> str:
    if agent.remote_card_url:
        return f"name={agent.display_name} remote={agent.remote_card_url}"
    return f"name={agent.display_name} provider={agent.provider_id or '-'} model={agent.model or '-'}"


def _check_agent_id(agent_id: str, field: str) -> None:
    if not _AGENT_ID.match(agent_id):
        raise InvalidArgument("agent id must be a slug: a-z, 0-9 and '-', at most 64", field=field)


def _member_id(user_id: str) -> str:
    user_id = user_id.strip()
    if not user_id or len(user_id) > MAX_USER_CHARS:
        raise InvalidArgument(f"user_id must be 1 to {MAX_USER_CHARS} characters", field="user_id")
    return user_id


def _owner_first(owner: str, members: Sequence[str]) -> list[str]:
    return sorted(members, key=lambda member: (member != owner, member))


def _metadata_json(metadata: dict[str, str]) -> str:
    """A conversation's labels, checked against their bounds, as stored."""
    if len(metadata) > MAX_METADATA_PAIRS:
        raise InvalidArgument(f"metadata holds at most {MAX_METADATA_PAIRS} pairs", field="metadata")
    for key, value in metadata.items():
        if not key or len(key) > MAX_METADATA_KEY_CHARS:
            raise InvalidArgument(
                f"a metadata key has 1 to {MAX_METADATA_KEY_CHARS} characters", field="metadata"
            )
        if len(value) > MAX_METADATA_VALUE_CHARS:
            raise InvalidArgument(
                f"metadata[{key!r}] is longer than {MAX_METADATA_VALUE_CHARS} characters", field="metadata"
            )
    return json.dumps(metadata, sort_keys=True)
