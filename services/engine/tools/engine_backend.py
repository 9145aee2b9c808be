"""The built-in tools' backend (backend.ToolBackend) over the other services,
each call as the run's user — pages, notes and live state through memory,
asks through this engine's own AskAgent path (a nested run on the target's
thread, started through :class:`AskRuns`)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from datetime import UTC
from typing import TYPE_CHECKING, Protocol

from services.engine.feed import StreamedEvent
from services.engine.remember import with_fact
from services.engine.runs import AskSpec
from services.engine.tools.backend import (
    AgentReply,
    AskUnanswered,
    InstructionProposal,
    LiveEntry,
    PageHit,
    PageText,
    ProposedNote,
    SavedNote,
)
from services.shared.errors import FailedPrecondition, InvalidArgument
from switchboard.engine.v1 import engine_pb2
from switchboard.memory.v1 import memory_pb2, pages_pb2

if TYPE_CHECKING:
    from services.engine.collaborators import Collaborators

# Pages looked at by one search (the user's readable pages, newest first).
SEARCH_SCAN = 100
SNIPPET_CHARS = 200
NOTE_KINDS = {
    "decision": memory_pb2.NOTE_KIND_DECISION,
    "feature_summary": memory_pb2.NOTE_KIND_FEATURE_SUMMARY,
    "preference": memory_pb2.NOTE_KIND_PREFERENCE,
    "fact": memory_pb2.NOTE_KIND_FACT,
}
# Nested asks under one first ask: A asks B asks C asks D, then no further.
MAX_ASK_DEPTH = 3
# The notices of an asked run that failed which its asker's user is told too:
# why a remote agent gave no answer is theirs to know, not only the model's.
RELAYED_NOTICES = frozenset({"REMOTE_AGENT_FAILED"})
_WORD = re.compile(r"[^\W_]{3,}")


def _terms(text: str) -> set[str]:
    return {w.casefold() for w in _WORD.findall(text)}


class AskRuns(Protocol):
    """The one call of the run service a nested ask makes (given to the
    backend when it is built: the run service builds its tools with itself)."""

    def ask_and_follow(
        self, user: str, request_id: str, ask: AskSpec, message: str
    ) -> AsyncIterator[StreamedEvent]:
        """Starts an AskAgent run and follows it to its terminal event."""
        ...


class EngineToolBackend:
    def __init__(self, collaborators: Collaborators, runs: AskRuns, requester: str = "personal") -> None:
        self._collab = collaborators
        self._runs = runs
        self._requester = requester

    async def search_pages(self, user: str, query: str, limit: int) -> Sequence[PageHit]:
        """The readable pages sharing the most words with the query. Memory has
        no page search RPC yet, so this ranks the user's newest pages here."""
        wanted = _terms(query)
        scored = []
        for page in await self._collab.readable_pages(user, SEARCH_SCAN):
            score = len(wanted & _terms(f"{page.title} {page.body}"))
            if score:
                scored.append((score, page))
        scored.sort(key=lambda pair: -pair[0])
        return [PageHit(p.id, p.title, " ".join(p.body.split())[:SNIPPET_CHARS]) for _, p in scored[:limit]]

    async def read_page(self, user: str, page_id: str) -> PageText:
        page = await self._collab.get_page(user, page_id)
        return PageText(page.id, page.title, page.body, page.version)

    @staticmethod
    def _note(
        project_id: str, kind: str, title: str, body: str, tags: Sequence[str], agent: str
    ) -> memory_pb2.Note:
        if kind not in NOTE_KINDS:
            raise InvalidArgument(f"kind must be one of {sorted(NOTE_KINDS)}", field="kind")
        return memory_pb2.Note(
            project_id=project_id,
            kind=NOTE_KINDS[kind],
            title=title,
            body=body,
            tags=list(tags),
            author_agent_id=agent,
        )

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
        """Into ``project_id``, the run's project ("" = the user's personal one)."""
        note = self._note(project_id, kind, title, body, tags, self._requester)
        saved = await self._collab.create_note(user, request_id, note)
        outcome = "merged" if saved.outcome == memory_pb2.SAVE_OUTCOME_MERGED else "created"
        return SavedNote(saved.note.id, saved.note.title, outcome)

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
        """A proposal for ``project_id``'s members to review (accepted at once
        in a project whose note policy is auto)."""
        note = self._note(project_id, kind, title, body, tags, agent or self._requester)
        response = await self._collab.propose_note(user, request_id, note, reason, run_id)
        proposal = response.proposal
        accepted = proposal.state == memory_pb2.NOTE_PROPOSAL_STATE_ACCEPTED
        return ProposedNote(
            proposal.id,
            proposal.note.title,
            "accepted" if accepted else "pending",
            proposal.target_note.id,
            response.note.id if accepted else "",
        )

    async def propose_instruction_update(
        self, user: str, request_id: str, addition: str, reason: str, run_id: str = "", language: str = "en"
    ) -> InstructionProposal:
        """``language``: the run's, that of the template a user without an
        instruction page gets, and of the section the line goes in."""
        page = await self._collab.active_instructions(user)
        if page.state == pages_pb2.INSTRUCTION_PAGE_STATE_UNREADABLE:
            raise FailedPrecondition("the active instruction page cannot be read")
        page_id, title, body = page.page_id, page.title, page.body
        if page.state != pages_pb2.INSTRUCTION_PAGE_STATE_READABLE:
            created = await self._collab.create_instruction_page(user, f"{request_id}:page", language)
            page_id, title, body = created.id, created.title, created.body
        proposal = await self._collab.create_proposal(
            user, request_id, page_id, with_fact(body, addition, language), reason, run_id=run_id
        )
        return InstructionProposal(proposal.id, page_id, title, addition, proposal.diff.unified)

    async def ask_agent(
        self,
        user: str,
        request_id: str,
        agent: str,
        message: str,
        parent_run_id: str = "",
        requester: str = "",
        chain: tuple[str, ...] = (),
        correlation_id: str = "",
    ) -> AgentReply:
        """A nested AskAgent run on the target's thread (its parent_run_id the
        asking run, the same correlation as the ask it serves); its answer.
        An agent already waiting in the chain is a cycle, and a chain stops
        at MAX_ASK_DEPTH nested asks: both refused before anything is asked."""
        requester = requester or self._requester
        if agent == requester:
            raise InvalidArgument("an agent cannot ask itself", field="agent")
        if agent in chain:
            path = " → ".join((*chain, agent))
            raise InvalidArgument(
                f"{agent} is already waiting for an answer in this chain of asks ({path}): "
                "asking it again would be a cycle",
                field="agent",
            )
        if len(chain) > MAX_ASK_DEPTH:
            raise InvalidArgument(
                f"this chain of asks is {len(chain) - 1} deep already, the limit is {MAX_ASK_DEPTH}: "
                "answer with what you know",
                field="agent",
            )
        target = await self._collab.get_agent(user, agent)
        ask = AskSpec(
            requester,
            agent,
            correlation_id=correlation_id,
            parent_run_id=parent_run_id,
            chain=chain,
            target_agent=target,
        )
        events = [e.event async for e in self._runs.ask_and_follow(user, request_id, ask, message)]
        last = events[-1]
        if last.WhichOneof("kind") != "final":
            told = [(e.notice.code, e.notice.message) for e in events if e.notice.code in RELAYED_NOTICES]
            raise AskUnanswered(f"{agent} could not answer: {last.error.message}", next(iter(told), None))
        return AgentReply(agent, target.display_name or agent, _final_text(last))

    async def live_state(self, user: str, project_id: str, limit: int) -> Sequence[LiveEntry]:
        return [_live_entry(e) for e in await self._collab.live_state(user, project_id, limit)]

    async def set_live_state(
        self,
        user: str,
        project_id: str,
        agent_id: str,
        activity: str,
        detail: str,
        ttl_seconds: int | None,
    ) -> LiveEntry:
        """Through memory's SetLiveState as ``user``: memory checks the role."""
        entry = await self._collab.set_live_state(user, project_id, agent_id, activity, detail, ttl_seconds)
        return _live_entry(entry)


def _live_entry(entry: memory_pb2.LiveStateEntry) -> LiveEntry:
    expires = entry.expire_time.ToDatetime(tzinfo=UTC) if entry.HasField("expire_time") else None
    updated = entry.update_time.ToDatetime(tzinfo=UTC) if entry.HasField("update_time") else None
    return LiveEntry(entry.agent_id, entry.activity, entry.detail, expires, entry.project_id, updated)


def _final_text(event: engine_pb2.RunEvent) -> str:
    return event.final.text
