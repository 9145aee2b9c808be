"""A chat run's context read in one call: each part is read by its own
concept's domain, exactly as its own RPC reads it, side by side. Nothing
here decides anything about a part; it only says which parts to read and
turns "nothing written yet" into an absent part instead of an error."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TypeVar

from services.memory.context.domain import ContextDomain
from services.memory.context.live_state import LiveStateDomain
from services.memory.context.models import LiveState, ProjectContextRow
from services.memory.handoff.domain import HandoffDomain, Summary
from services.memory.notes.domain import NotesDomain
from services.memory.notes.recall import Recall, Recalled
from services.memory.pages.instructions import ActiveInstructions, InstructionPages
from services.memory.personal.domain import PersonalSettingsDomain
from services.memory.personal.models import PersonalSettings
from services.memory.projects.domain import Role
from services.shared.audit import Actor
from services.shared.embeddings import TextEmbedding
from services.shared.errors import InvalidArgument, NotFound
from services.shared.gathered_reads import gathered_reads
from services.shared.together import all_or_none

RECALLED_NOTES = "recalled_notes"
SETTINGS = "settings"
ACTIVE_INSTRUCTIONS = "active_instructions"
PROJECT_CONTEXT = "project_context"
LIVE_STATE = "live_state"
HANDOFF_SUMMARY = "handoff_summary"
PARTS = (RECALLED_NOTES, SETTINGS, ACTIVE_INSTRUCTIONS, PROJECT_CONTEXT, LIVE_STATE, HANDOFF_SUMMARY)

_T = TypeVar("_T")


def parts_of(paths: Sequence[str]) -> frozenset[str]:
    """The parts a read mask names; an empty mask names them all. An unknown
    path is INVALID_ARGUMENT on ``read_mask``."""
    if not paths:
        return frozenset(PARTS)
    unknown = sorted(set(paths) - set(PARTS))
    if unknown:
        raise InvalidArgument(
            f"read_mask has unknown paths {unknown}; allowed: {list(PARTS)}", field="read_mask"
        )
    return frozenset(paths)


@dataclass(frozen=True)
class ChatContextQuery:
    """What to read: ``parts`` (of PARTS), for which thread, project and text."""

    parts: Collection[str]
    thread_id: str = ""
    project_id: str = ""
    recall_query: str = ""
    recall_limit: int = 0
    live_state_page_size: int = 0


@dataclass(frozen=True)
class ChatContext:
    """The parts read; a part not asked for is empty (None or ())."""

    recalled: Sequence[Recalled] = ()
    settings: PersonalSettings | None = None
    instructions: ActiveInstructions | None = None
    # None: the project has no context yet.
    project_context: ProjectContextRow | None = None
    live_state: Sequence[LiveState] = ()
    # None: nothing recorded for the thread (or another user's conversation).
    summary: Summary | None = None
    # The recall query's embedding, when recall computed one (Recall).
    recall_query_embedding: TextEmbedding | None = None


async def _absent(value: _T) -> _T:
    return value


async def _or_none(read: Callable[[], Awaitable[_T]]) -> _T | None:
    """A read whose NOT_FOUND means "nothing written yet". Started here, not
    by the caller: a call cancelled before this runs leaves no coroutine
    that was never awaited."""
    try:
        return await read()
    except NotFound:
        return None


class ChatContextDomain:
    def __init__(
        self,
        notes: NotesDomain,
        settings: PersonalSettingsDomain,
        instructions: InstructionPages,
        contexts: ContextDomain,
        live: LiveStateDomain,
        handoff: HandoffDomain,
    ) -> None:
        self._notes = notes
        self._settings = settings
        self._instructions = instructions
        self._contexts = contexts
        self._live = live
        self._handoff = handoff

    async def read(self, actor: Actor, query: ChatContextQuery) -> ChatContext:
        """The parts ``query`` asks for, read concurrently as ``user``. A
        failing read fails the whole call (memory is one process: what fails
        one read would fail the others), but an unreadable instruction page
        is a state of ``instructions``, never an error."""
        wanted = set(query.parts)
        user = actor.user
        project = ""
        if wanted & {RECALLED_NOTES, PROJECT_CONTEXT, LIVE_STATE}:
            # One membership check for the three project reads.
            project = (await self._notes.projects.access(actor, query.project_id, Role.VIEWER)).project_id
        # The parts' first reads (revision, settings, context, live state,
        # summary) start in one turn: one batch, one snapshot (on SQLite).
        with gathered_reads():
            recalled, (settings, instructions), project_context, live, summary = await all_or_none(
                self._notes.recall_in(project, query.recall_query, "", query.recall_limit)
                if RECALLED_NOTES in wanted
                else _absent(Recall([])),
                self._settings_and_instructions(user, SETTINGS in wanted, ACTIVE_INSTRUCTIONS in wanted),
                _or_none(lambda: self._contexts.context_of(project))
                if PROJECT_CONTEXT in wanted
                else _absent(None),
                self._live.list_in(project, query.live_state_page_size, "")
                if LIVE_STATE in wanted
                else _absent(None),
                _or_none(lambda: self._handoff.summary(query.thread_id, user))
                if HANDOFF_SUMMARY in wanted and query.thread_id
                else _absent(None),
            )
        return ChatContext(
            recalled=recalled.notes,
            settings=settings,
            instructions=instructions,
            project_context=project_context,
            live_state=live.entries if live is not None else (),
            summary=summary,
            recall_query_embedding=recalled.query_embedding,
        )

    async def _settings_and_instructions(
        self, user: str, settings: bool, instructions: bool
    ) -> tuple[PersonalSettings | None, ActiveInstructions | None]:
        """The settings and the active instructions, as asked: both from one
        read of the settings row, which lists the instruction pages."""
        row = await self._settings.get_personal_settings(user) if settings or instructions else None
        active = await self._instructions.active_instructions(user, row) if instructions else None
        return (row if settings else None), active
