"""The rules of schedules: what a valid schedule is (a cron expression that
parses, a known time zone, a message, one target the user may run on), and
create / read / list / pause / resume / delete. No gRPC here."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

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
        self._max_message_chars = max_message_chars

    async def create(self, user: str, new: NewSchedule) -> Schedule:
        """Checks everything before writing: a bad schedule stores nothing.
        The target must be the user's conversation or a known agent (a
        foreign conversation is NOT_FOUND, like a missing one)."""
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
            await self._collab.get_agent(user, agent_id)
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

    async def get(self, user: str, schedule_id: str) -> Schedule:
        row = await self._repo.get(user, schedule_id) if schedule_id else None
        if row is None:
            raise NotFound(f"schedule {schedule_id!r} not found", schedule_id=schedule_id)
        return row

    async def list(self, user: str, requested_size: int, token: str) -> tuple[list[Schedule], str]:
        """The user's schedules, oldest first, one page (keyset paging)."""
        size, after = page_request(
            requested_size, token, lambda cursor: (as_instant(cursor["t"]), as_text(cursor["id"]))
        )
        rows = await self._repo.list(user, after, size + 1)
        return page_of(rows, size, lambda row: {"t": aware(row.create_time).isoformat(), "id": row.id})

    async def pause(self, user: str, schedule_id: str) -> Schedule:
        await self.get(user, schedule_id)
        await self._repo.set_paused(user, schedule_id, True, None)
        return await self.get(user, schedule_id)

    async def resume(self, user: str, schedule_id: str) -> Schedule:
        """From the first tick after now: ticks that passed while paused are
        neither run nor counted as missed."""
        row = await self.get(user, schedule_id)
        cron = Cron(row.cron, row.time_zone)
        await self._repo.set_paused(user, schedule_id, False, cron.next_after(utcnow()))
        return await self.get(user, schedule_id)

    async def delete(self, user: str, schedule_id: str) -> None:
        if not schedule_id or not await self._repo.delete(user, schedule_id):
            raise NotFound(f"schedule {schedule_id!r} not found", schedule_id=schedule_id)
