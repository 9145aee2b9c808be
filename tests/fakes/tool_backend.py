"""An in-memory ToolBackend (services.engine.tools.backend) for the tool tests:
pages with owners and readers, notes, proposals and agents, with the same
rules as the real services where the tools depend on them (a page another
user cannot read is NotFound like a missing one; a save is idempotent on
its request_id). Every call is logged, so tests can see what was asked."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from services.engine.tools.backend import (
    AgentReply,
    InstructionProposal,
    LiveEntry,
    PageHit,
    PageText,
    ProposedNote,
    SavedNote,
)
from services.shared.errors import DependencyUnavailable, NotFound, PermissionDenied


@dataclass
class FakePage:
    page_id: str
    owner: str
    title: str
    body: str
    readers: tuple[str, ...] = ()
    version: int = 1


@dataclass
class FakeToolBackend:
    pages: dict[str, FakePage] = field(default_factory=dict)
    notes: dict[str, tuple[str, str, str, str, tuple[str, ...]]] = field(default_factory=dict)
    proposals: list[InstructionProposal] = field(default_factory=list)
    note_proposals: list[tuple[str, str, str, str, str]] = field(default_factory=list)
    agents: dict[str, str] = field(default_factory=lambda: {"qa": "QA"})
    calls: list[tuple[str, str]] = field(default_factory=list)
    # Live state by (project, agent id); who only reads each project.
    live: dict[tuple[str, str], LiveEntry] = field(default_factory=dict)
    viewers: dict[str, set[str]] = field(default_factory=dict)
    # Makes the next backend call fail as an unavailable service would.
    unavailable: bool = False

    def add_page(self, page_id: str, owner: str, title: str, body: str, readers: Sequence[str] = ()) -> None:
        self.pages[page_id] = FakePage(page_id, owner, title, body, tuple(readers))

    def _check(self, name: str, user: str) -> None:
        self.calls.append((name, user))
        if self.unavailable:
            raise DependencyUnavailable("memory service failed: UNAVAILABLE")

    def _readable(self, user: str) -> list[FakePage]:
        return [p for p in self.pages.values() if p.owner == user or user in p.readers]

    async def search_pages(self, user: str, query: str, limit: int) -> Sequence[PageHit]:
        self._check("search_pages", user)
        words = query.lower().split()
        hits = [
            PageHit(p.page_id, p.title, p.body[:80])
            for p in self._readable(user)
            if any(w in f"{p.title} {p.body}".lower() for w in words)
        ]
        return hits[:limit]

    async def read_page(self, user: str, page_id: str) -> PageText:
        self._check("read_page", user)
        page = next((p for p in self._readable(user) if p.page_id == page_id), None)
        if page is None:
            raise NotFound(f"page {page_id!r} not found")
        return PageText(page.page_id, page.title, page.body, page.version)

    async def save_note(
        self, user: str, request_id: str, kind: str, title: str, body: str, tags: Sequence[str]
    ) -> SavedNote:
        self._check("save_note", user)
        note_id = f"note-{request_id}"
        self.notes.setdefault(note_id, (user, kind, title, body, tuple(tags)))
        return SavedNote(note_id, title, "created")

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
        self._check("propose_note", user)
        self.note_proposals.append((user, kind, title, body, reason))
        return ProposedNote(f"note-proposal-{request_id}", title, "pending")

    async def propose_instruction_update(
        self, user: str, request_id: str, addition: str, reason: str, run_id: str = "", language: str = "en"
    ) -> InstructionProposal:
        self._check("propose_instruction_update", user)
        proposal = InstructionProposal(
            f"proposal-{request_id}", f"instructions-{user}", "My Switchboard AI", addition, f"+ - {addition}"
        )
        self.proposals.append(proposal)
        return proposal

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
    ) -> AgentReply:
        self._check("ask_agent", user)
        name = self.agents.get(agent)
        if name is None:
            raise NotFound(f"agent {agent!r} not found")
        return AgentReply(agent, name, f"{name} received: {message}")

    async def live_state(self, user: str, project_id: str, limit: int) -> Sequence[LiveEntry]:
        self._check("live_state", user)
        entries = [entry for (project, _), entry in sorted(self.live.items()) if project == project_id]
        return entries[:limit]

    async def set_live_state(
        self,
        user: str,
        project_id: str,
        agent_id: str,
        activity: str,
        detail: str,
        ttl_seconds: int | None,
    ) -> LiveEntry:
        self._check("set_live_state", user)
        if user in self.viewers.get(project_id, set()):
            raise PermissionDenied(
                f"{user} is a viewer of project {project_id!r}; this needs the editor role"
            )
        expires = datetime(2030, 1, 1, 12, 0, tzinfo=UTC) + timedelta(seconds=ttl_seconds or 300)
        entry = LiveEntry(agent_id, activity, detail, expires)
        self.live[project_id, agent_id] = entry
        return entry
