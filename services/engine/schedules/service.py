"""The rules of schedules: what a valid schedule is (a cron expression that
parses, a known time zone, a message, one target the user may run on), and
create / read / list / pause / resume / delete. No gRPC here.

A schedule of a conversation is its user's alone. A schedule of an agent of
a shared project belongs to that project too: creating one needs the editor
role there (besides being allowed to ask the agent); its project's members
read it and list it (ListSchedules naming the agent), its editors and owners
pause, resume and delete it, and its creator keeps every right on it. It
still runs as its creator. To anyone else it is NOT_FOUND, like a missing
one; a member whose role is too low gets PERMISSION_DENIED with the reason."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from services.engine.agent_projects import EDITOR, NONE, VIEWER, AgentProjects, require
from services.engine.collaborators import Collaborators
from services.engine.schedules.cron import Cron
from services.engine.schedules.models import Schedule
from services.engine.schedules.repository import SchedulesRepository
from services.shared.errors import InvalidArgument, NotFound, TooLarge
from services.shared.pagination import as_instant, as_text, page_of, page_request
from services.shared.time import aware, utcnow


@dataclass(frozen=True)
class NewSchedule:
    request_id: str
    cron: str
    time_zone: str
    message: str
    conversation_id: str = ""
    agent_id: str = ""


class Schedules:
    def __init__(
        self, repo: SchedulesRepository, collaborators: Collaborators, max_message_chars: int
    ) -> None:
        self._repo = repo
        self._collab = collaborators
        self._agents = AgentProjects(collaborators)
        self._max_message_chars = max_message_chars

    async def create(self, user: str, new: NewSchedule) -> Schedule:
        """Checks everything before writing: a bad schedule stores nothing.
        The target must be the user's conversation or a known agent (a
        foreign conversation is NOT_FOUND, like a missing one); an agent of
        a shared project needs the editor role in it."""
        cron = Cron.parse(new.cron, new.time_zone.strip())
        if not new.message.strip():
            raise InvalidArgument("message must not be empty", field="message")
        if len(new.message) > self._max_message_chars:
            raise TooLarge(f"message exceeds {self._max_message_chars} characters", field="message")
        if len(new.request_id) > 128:
            raise InvalidArgument("request_id exceeds 128 characters", field="request_id")
        conversation_id, agent_id = new.conversation_id.strip(), new.agent_id.strip()
        if bool(conversation_id) == bool(agent_id):
            raise InvalidArgument("give exactly one target: conversation_id or agent_id", field="target")
        if conversation_id:
            await self._collab.get_conversation(user, conversation_id)
        else:
            access = await self._agents.of(user, agent_id)
            if access.shared:
                require(user, access, EDITOR, "scheduling the agent's runs")
        now = utcnow()
        return await self._repo.insert(
            Schedule(
                id=str(uuid.uuid4()),
                user_id=user,
                request_id=new.request_id or None,
                cron=cron.expression,
                time_zone=cron.time_zone,
                message=new.message,
                conversation_id=conversation_id or None,
                agent_id=agent_id or None,
                next_run_at=cron.next_after(now),
                create_time=now,
            )
        )

    async def _find(self, user: str, schedule_id: str, needed: int, what: str = "") -> Schedule:
        """The schedule, when ``user`` created it or has at least ``needed``
        in the shared project of its agent; NOT_FOUND to anyone else."""
        row = await self._repo.get(None, schedule_id) if schedule_id else None
        if row is not None and row.user_id == user:
            return row
        missing = NotFound(f"schedule {schedule_id!r} not found", schedule_id=schedule_id)
        if row is None or not row.agent_id:
            raise missing
        try:
            access = await self._agents.of(user, row.agent_id)
        except NotFound:
            raise missing from None
        if not access.shared or access.role == NONE:
            raise missing
        require(user, access, needed, what or "reading the agent's schedules")
        return row

    async def get(self, user: str, schedule_id: str) -> Schedule:
        return await self._find(user, schedule_id, VIEWER)

    async def list(
        self, user: str, requested_size: int, token: str, agent_id: str = ""
    ) -> tuple[list[Schedule], str]:
        """The user's schedules, oldest first, one page (keyset paging). With
        ``agent_id``: that agent's schedules, every member's when the agent
        is of a shared project the user is a member of (viewer and up), else
        the user's own."""
        size, after = page_request(
            requested_size, token, lambda cursor: (as_instant(cursor["t"]), as_text(cursor["id"]))
        )
        owner: str | None = user
        agent_id = agent_id.strip()
        if agent_id:
            access = await self._agents.of(user, agent_id)
            if access.shared and access.role >= VIEWER:
                owner = None
        rows = await self._repo.list(owner, after, size + 1, agent_id)
        return page_of(rows, size, lambda row: {"t": aware(row.create_time).isoformat(), "id": row.id})

    async def pause(self, user: str, schedule_id: str) -> Schedule:
        await self._find(user, schedule_id, EDITOR, "pausing the agent's schedules")
        await self._repo.set_paused(None, schedule_id, True, None)
        return await self.get(user, schedule_id)

    async def resume(self, user: str, schedule_id: str) -> Schedule:
        """From the first tick after now: ticks that passed while paused are
        neither run nor counted as missed."""
        row = await self._find(user, schedule_id, EDITOR, "resuming the agent's schedules")
        cron = Cron(row.cron, row.time_zone)
        await self._repo.set_paused(None, schedule_id, False, cron.next_after(utcnow()))
        return await self.get(user, schedule_id)

    async def delete(self, user: str, schedule_id: str) -> None:
        await self._find(user, schedule_id, EDITOR, "deleting the agent's schedules")
        if not await self._repo.delete(None, schedule_id):
            raise NotFound(f"schedule {schedule_id!r} not found", schedule_id=schedule_id)
