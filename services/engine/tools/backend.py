"""What the built-in tools need from the other services (:class:`ToolBackend`),
and what it returns. Each call acts for the run's user; the engine
implements it over gRPC (engine_backend), tests with an in-memory fake."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from services.shared.errors import FailedPrecondition


@dataclass(frozen=True)
class PageHit:
    page_id: str
    title: str
    snippet: str


@dataclass(frozen=True)
class PageText:
    page_id: str
    title: str
    body: str
    version: int


@dataclass(frozen=True)
class SavedNote:
    note_id: str
    title: str
    # "created", or "merged" into an existing note (memory's duplicate policy).
    outcome: str


@dataclass(frozen=True)
class ProposedNote:
    """A note the agent promoted on its own: a proposal the project reviews,
    or, in a project that accepts its agents' notes at once, a saved note."""

    proposal_id: str
    title: str
    # "pending", or "accepted" (the note is ``note_id``).
    state: str
    # The existing note the proposal updates ("" for a new one).
    target_note_id: str = ""
    note_id: str = ""


@dataclass(frozen=True)
class InstructionProposal:
    """A proposed change of the active instruction page: nothing is written
    until the user accepts it. The engine shows it as a ``proposal`` event
    and ends the run ``waiting_approval``."""

    proposal_id: str
    page_id: str
    page_title: str
    summary: str
    unified_diff: str


@dataclass(frozen=True)
class LiveEntry:
    """One entry of a project's live state: what an agent (or a person) says
    it is doing now, until ``expire_time``."""

    agent_id: str
    activity: str
    detail: str
    expire_time: datetime | None = None
    # Where and when it was set, as memory stored it (the run's live_state event shows them).
    project_id: str = ""
    update_time: datetime | None = None


class AskUnanswered(FailedPrecondition):
    """A nested ask that ended without an answer. ``notice``: the (code,
    text) of the notice its run said why with when the asking run's user
    should be told too (a remote agent's failure); None otherwise."""

    def __init__(self, message: str, notice: tuple[str, str] | None = None) -> None:
        super().__init__(message)
        self.notice = notice


@dataclass(frozen=True)
class AgentReply:
    agent_id: str
    agent_name: str
    text: str


class ToolBackend(Protocol):
    """What the built-in tools need from the other services. Each call acts
    for ``user``; a page the user cannot read is NotFound exactly like a
    missing one. Failures are services.shared.errors.DomainError."""

    async def search_pages(self, user: str, query: str, limit: int) -> Sequence[PageHit]: ...

    async def read_page(self, user: str, page_id: str) -> PageText: ...

    async def save_note(
        self,
        user: str,
        request_id: str,
        kind: str,
        title: str,
        body: str,
        tags: Sequence[str],
        project_id: str = "",
    ) -> SavedNote:
        """Saves a durable note in ``project_id`` ("" = the user's personal project)."""
        ...

    async def propose_note(
        self,
        user: str,
        request_id: str,
        kind: str,
        title: str,
        body: str,
        tags: Sequence[str],
        reason: str = "",
        run_id: str = "",
        project_id: str = "",
        agent: str = "",
    ) -> ProposedNote:
        """Proposes a note for ``project_id``'s memory, for its members to
        review, as ``agent`` (the run's agent; "" = the backend's own)."""
        ...

    async def propose_instruction_update(
        self, user: str, request_id: str, addition: str, reason: str, run_id: str = "", language: str = "en"
    ) -> InstructionProposal: ...

    async def ask_agent(
        self,
        user: str,
        request_id: str,
        agent: str,
        message: str,
        parent_run_id: str = "",
        requester: str = "personal",
        chain: tuple[str, ...] = (),
        correlation_id: str = "",
    ) -> AgentReply: ...

    async def live_state(self, user: str, project_id: str, limit: int) -> Sequence[LiveEntry]:
        """The first ``limit`` unexpired entries of ``project_id``'s live
        state ("" = the user's personal project), by agent id."""
        ...

    async def set_live_state(
        self,
        user: str,
        project_id: str,
        agent_id: str,
        activity: str,
        detail: str,
        ttl_seconds: int | None,
    ) -> LiveEntry:
        """Creates or replaces ``agent_id``'s entry, as ``user`` (whose role
        in the project must allow it: PermissionDenied for a viewer)."""
        ...
