"""Live state: who is doing what in a project, now, as opposed to durable
memory. Entries expire; nothing here is ever recalled as
memory (its own table, never read by recall).

A watch sends a snapshot, then changes. It works across replicas on one
database: every write bumps the project's live revision and, once
committed, announces the project (services.shared.wakeups), which wakes its
watchers on every replica; a watcher then reads that counter (one
primary-key read), re-reading the entries only when it moved. It also wakes
when an entry it holds reaches its expiry, and at the safety poll. Changes
are found by comparing the entries with the ones the watcher last sent, so
several writes to one agent between two reads arrive as the last of them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import IntEnum

from services.memory.context.models import LiveState
from services.memory.context.repository import ContextRepository
from services.memory.projects.domain import ProjectsDomain, Role
from services.memory.revisions import LIVE
from services.shared.audit import Actor
from services.shared.errors import InvalidArgument, NotFound, TooLarge
from services.shared.pagination import Cursor, as_text, page_of, page_request, same
from services.shared.time import aware, utcnow
from services.shared.wakeups import LIVE_STATE, Wakeups

MAX_AGENT_ID_CHARS = 128
MAX_ACTIVITY_CHARS = 200
MAX_DETAIL_CHARS = 2000


class EventType(IntEnum):
    """LiveStateEventType of memory.proto."""

    SNAPSHOT = 1
    SET = 2
    REMOVED = 3


class Removal(IntEnum):
    """LiveStateRemoval of memory.proto."""

    DELETED = 1
    EXPIRED = 2


@dataclass(frozen=True)
class LiveEvent:
    type: EventType
    entries: list[LiveState]
    removal: Removal | None = None


@dataclass(frozen=True)
class LivePage:
    entries: list[LiveState]
    next_token: str


def _normalised(row: LiveState) -> LiveState:
    row.update_time, row.expire_time = aware(row.update_time), aware(row.expire_time)
    return row


def _agent(agent_id: str) -> str:
    agent = agent_id.strip()
    if not agent:
        raise InvalidArgument("agent_id is required", field="agent_id")
    if len(agent) > MAX_AGENT_ID_CHARS:
        raise TooLarge(f"agent_id is longer than {MAX_AGENT_ID_CHARS} characters", field="agent_id")
    return agent


class LiveStateDomain:
    def __init__(
        self,
        repository: ContextRepository,
        projects: ProjectsDomain,
        default_ttl: float,
        max_ttl: float,
        wakeups: Wakeups,
    ) -> None:
        self._repo = repository
        self._projects = projects
        self._default_ttl = timedelta(seconds=default_ttl)
        self._max_ttl = timedelta(seconds=max_ttl)
        self._wakeups = wakeups

    async def set(
        self,
        actor: Actor,
        project_id: str,
        agent_id: str,
        activity: str,
        detail: str,
        ttl: timedelta | None,
        expire_time: datetime | None,
    ) -> LiveState:
        agent = _agent(agent_id)
        activity, detail = activity.strip(), detail.strip()
        if not activity:
            raise InvalidArgument("activity is required", field="activity")
        if len(activity) > MAX_ACTIVITY_CHARS:
            raise TooLarge(f"activity is longer than {MAX_ACTIVITY_CHARS} characters", field="activity")
        if len(detail) > MAX_DETAIL_CHARS:
            raise TooLarge(f"detail is longer than {MAX_DETAIL_CHARS} characters", field="detail")
        if ttl is not None and expire_time is not None:
            raise InvalidArgument("give ttl or expire_time, not both", field="ttl")
        project = (await self._projects.access(actor, project_id, Role.EDITOR)).project_id
        now = utcnow()
        if expire_time is not None:
            ttl = expire_time - now
            field = "expire_time"
        else:
            field = "ttl"
        lifetime = self._default_ttl if ttl is None else ttl
        if lifetime <= timedelta(0):
            raise InvalidArgument(f"{field} must be in the future", field=field)
        if lifetime > self._max_ttl:
            raise InvalidArgument(
                f"{field} is more than {self._max_ttl.total_seconds():.0f} s away; live state is not memory",
                field=field,
            )
        row = LiveState(
            project_id=project,
            agent_id=agent,
            author_user_id=actor.user,
            activity=activity,
            detail=detail,
            update_time=now,
            expire_time=now + lifetime,
        )
        saved = await self._repo.set_live(row, now)
        await self._wakeups.notify(LIVE_STATE.of(project))
        return saved

    async def list(self, actor: Actor, project_id: str, size: int, token: str) -> LivePage:
        access = await self._projects.access(actor, project_id, Role.VIEWER)
        return await self.list_in(access.project_id, size, token)

    async def list_in(self, project: str, size: int, token: str) -> LivePage:
        """A page of a project the caller was already found to read."""

        def read(cursor: Cursor) -> str:
            same(cursor.get("p"), project)
            return as_text(cursor.get("a", ""))

        limit, after = page_request(size, token, read)
        rows = [_normalised(r) for r in await self._repo.list_live(project, utcnow(), after or "", limit + 1)]
        entries, next_token = page_of(rows, limit, lambda last: {"p": project, "a": last.agent_id})
        return LivePage(entries, next_token)

    async def delete(self, actor: Actor, project_id: str, agent_id: str) -> None:
        agent = _agent(agent_id)
        project = (await self._projects.access(actor, project_id, Role.EDITOR)).project_id
        if not await self._repo.delete_live(project, agent, utcnow()):
            raise NotFound(f"agent {agent!r} has no live state in project {project!r}", field="agent_id")
        await self._wakeups.notify(LIVE_STATE.of(project))

    async def clear(self, actor: Actor, project_id: str) -> int:
        project = (await self._projects.access(actor, project_id, Role.EDITOR)).project_id
        deleted = await self._repo.delete_live(project, None, utcnow())
        if deleted:
            await self._wakeups.notify(LIVE_STATE.of(project))
        return deleted

    async def _read(self, project: str) -> tuple[int, dict[str, LiveState]]:
        # The revision first: a write landing between the two reads is seen
        # again at the next wake-up, never missed.
        revision = await self._repo.revision(project, LIVE)
        rows = await self._repo.list_live(project, utcnow())
        return revision, {row.agent_id: _normalised(row) for row in rows}

    async def watch(self, actor: Actor, project_id: str) -> AsyncIterator[LiveEvent]:
        project = (await self._projects.access(actor, project_id, Role.VIEWER)).project_id
        # Subscribed before the snapshot: a write after it wakes the watch.
        async with self._wakeups.subscribe(LIVE_STATE, project) as waiter:
            revision, known = await self._read(project)
            yield LiveEvent(EventType.SNAPSHOT, list(known.values()))
            while True:
                await waiter.wait(_until_first_expiry(known, utcnow()))
                now = utcnow()
                expiring = any(entry.expire_time <= now for entry in known.values())
                if not expiring and await self._repo.revision(project, LIVE) == revision:
                    continue
                revision, current = await self._read(project)
                for event in changes(known, current, utcnow()):
                    yield event
                known = current


def _until_first_expiry(known: dict[str, LiveState], now: datetime) -> float | None:
    """Seconds until the first entry held expires (None: nothing held)."""
    first = min((entry.expire_time for entry in known.values()), default=None)
    return None if first is None else max(0.0, (first - now).total_seconds())


def changes(before: dict[str, LiveState], after: dict[str, LiveState], now: datetime) -> Sequence[LiveEvent]:
    """The events that turn ``before`` into ``after`` (removals first)."""
    events = [
        LiveEvent(
            EventType.REMOVED,
            [entry],
            Removal.EXPIRED if entry.expire_time <= now else Removal.DELETED,
        )
        for agent, entry in sorted(before.items())
        if agent not in after
    ]
    for agent, entry in sorted(after.items()):
        old = before.get(agent)
        if old is None or (old.activity, old.detail, old.update_time, old.expire_time) != (
            entry.activity,
            entry.detail,
            entry.update_time,
            entry.expire_time,
        ):
            events.append(LiveEvent(EventType.SET, [entry]))
    return events
