"""Memory and router retry their idempotent database work as the engine and
threads do (services/shared/db_retry.py): a write whose commit reply is lost
runs again and changes nothing more; a read that meets a dropped connection
is answered from a new one. On SQLite and on PostgreSQL."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from services.memory.context.models import LiveState
from services.memory.context.repository import ContextRepository
from services.memory.notes.models import Note
from services.memory.notes.repository import NotesRepository
from services.memory.personal.repository import PersonalSettingsRepository
from services.memory.revisions import NOTES
from services.memory.server import MIGRATIONS as MEMORY_MIGRATIONS
from services.router.models import RouterAuditEvent, Skill, SkillFeedback
from services.router.repository import RouterRepository
from services.router.server import MIGRATIONS as ROUTER_MIGRATIONS
from services.shared.audit import Actor, new_event
from services.shared.db import session_factory
from services.shared.time import utcnow
from tests.service.test_db_retry import LostReplies, fast_retries, losing_replies, lost

__all__ = ["fast_retries", "lost"]  # the fixtures, used by name below


async def column(engine: AsyncEngine, query: str) -> list[Any]:
    async with engine.connect() as connection:
        return list((await connection.execute(text(query))).scalars().all())


def note(request_id: str | None, body: str = "Decision: PostgreSQL in production") -> Note:
    return Note(
        id=str(uuid.uuid4()),
        author_user_id="alice",
        project_id="apollo",
        title="Storage",
        body=body,
        request_id=request_id,
        content_hash=uuid.uuid4().hex,
    )


async def test_memory_writes_whose_commits_fail_are_written_once(
    db_url: str, monkeypatch: pytest.MonkeyPatch, fast_retries: None, lost: LostReplies
) -> None:
    async with losing_replies(db_url, MEMORY_MIGRATIONS, "memory", monkeypatch, lost) as engine:
        sessions = session_factory(engine)
        notes, settings, live = (
            NotesRepository(sessions),
            PersonalSettingsRepository(sessions),
            ContextRepository(sessions),
        )
        lost.count = 1
        created, revision = await notes.insert_note(note("k1"))
        again, again_revision = await notes.insert_note(note("k1"))
        # A retry that meets the row of a COMMIT whose reply was lost has no
        # revision to report (0: a cached index is rebuilt, not extended); one
        # after a COMMIT that never arrived writes the note, and says its revision.
        assert (revision, again_revision) == (1 if lost.before_commit else 0, 0)
        assert await notes.revision("apollo", NOTES) == 1
        assert await column(engine, "SELECT id FROM notes") == [created.id] and again.id == created.id
        lost.count = 1
        saved = await settings.upsert_settings("alice", {"display_name": "Alice", "default_model": "fast"})
        assert (saved.display_name, saved.default_model) == ("Alice", "fast")
        now = utcnow()
        lost.count = 1
        await live.set_live(
            LiveState(
                author_user_id="alice",
                project_id="apollo",
                agent_id="qa",
                activity="relit la PR",
                update_time=now,
                expire_time=now + timedelta(minutes=5),
            ),
            now,
        )
        assert [row.activity for row in await live.list_live("apollo", now)] == ["relit la PR"]
        assert lost.lost == 3


async def test_a_skill_and_a_feedback_whose_commits_fail_are_written_once(
    db_url: str, monkeypatch: pytest.MonkeyPatch, fast_retries: None, lost: LostReplies
) -> None:
    async with losing_replies(db_url, ROUTER_MIGRATIONS, "router", monkeypatch, lost) as engine:
        repo = RouterRepository(session_factory(engine))
        before = await column(engine, "SELECT id FROM skills")
        lost.count = 1
        audit = new_event(RouterAuditEvent, Actor("alice", "admin"), "skill.create", "s", "name=resume-fr")
        skill = await repo.insert_skill(
            Skill(id=str(uuid.uuid4()), name="resume-fr", create_request_id="s1"), audit
        )
        lost.count = 1
        feedback = SkillFeedback(
            id=str(uuid.uuid4()),
            user_id="alice",
            request_id="f1",
            skill_id=skill.id,
            skill_name=skill.name,
            request_text="résume ce fil",
            run_id="r",
        )
        first = await repo.insert_feedback(feedback)
        lost.count = 1
        await repo.set_enablement("alice", skill.id, False, None)
        after = await column(engine, "SELECT id FROM skills")
        feedbacks = await column(engine, "SELECT id FROM skill_feedback")
        assert lost.lost == 3 and sorted(after) == sorted([*before, skill.id]) and feedbacks == [first.id]
        enablement = await repo.enablement("alice", skill.id)
        assert enablement is not None and enablement.enabled is False
