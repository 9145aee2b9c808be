"""Note proposals: how agents promote what they learn into a project's
durable memory without filling it with noise. An agent's note that its
user did not ask for in so many words is a proposal; a member of the project
accepts it (the note is written) or refuses it (nothing is). A project whose
note policy is AUTO accepts its agents' proposals at once.

A proposal is checked against the project's notes when it is made. The note
it repeats or contradicts (the same text, or an embedding cosine at or above
RELATED_COSINE: a translation, or the same fact with another value) becomes
its target: accepting it updates that note instead of adding a second one,
and the member reviews the diff from the note's text to the proposed one.
No gRPC here."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime

from services.memory.notes.domain import NewNote, NoteFields, NotesDomain, clean_fields, content_hash
from services.memory.notes.lexical import tags_of
from services.memory.notes.models import Note, NoteProposalRow
from services.memory.notes.proposals_repository import PENDING, NoteProposalsRepository
from services.memory.notes.recall import note_text
from services.memory.pages.diffs import TextDiff, diff_texts
from services.memory.projects.domain import Access, Role
from services.shared.audit import Actor
from services.shared.embeddings import EmbedderName, embed
from services.shared.errors import FailedPrecondition, InvalidArgument, NotFound, QuotaExceeded, TooLarge
from services.shared.pagination import Cursor, as_instant, as_text, page_of, page_request, same
from services.shared.time import aware, utcnow

ACCEPTED, REFUSED = 2, 3
STATES = frozenset({PENDING, ACCEPTED, REFUSED})
AUTO = 2
MAX_REASON_CHARS = 2000
# Cosine at or above which a proposal is about an existing note. Measured
# with USE (tests/service/test_memory_note_proposals.py keeps the pairs): a
# note and its French translation 0.90; the same fact with another value
# 0.73 to 0.93 ("runs on PostgreSQL 16" / "on MySQL 8", across languages
# too); another fact on the same subject 0.47; unrelated notes of one
# project 0.03 to 0.11. The hashing embedder measures spelling only.
RELATED_COSINE = {EmbedderName.USE_MULTILINGUAL.value: 0.7, EmbedderName.HASHING.value: 0.6}


@dataclass(frozen=True)
class ProposalView:
    proposal: NoteProposalRow
    diff: TextDiff


@dataclass(frozen=True)
class Decided:
    view: ProposalView
    note: Note | None


def note_document(title: str, body: str) -> str:
    """What a member reviews of a note: its title as a heading, then its body."""
    return f"# {title}\n\n{body}\n" if title or body else ""


def _normalised(row: NoteProposalRow) -> NoteProposalRow:
    row.create_time = aware(row.create_time)
    row.decide_time = aware(row.decide_time) if row.decide_time else None
    row.target_update_time = aware(row.target_update_time) if row.target_update_time else None
    return row


def view_of(row: NoteProposalRow) -> ProposalView:
    old = note_document(row.target_title, row.target_body) if row.target_note_id else ""
    old_label = f"note {row.target_note_id}" if row.target_note_id else "(new note)"
    return ProposalView(
        _normalised(row), diff_texts(old, note_document(row.title, row.body), old_label, "proposal")
    )


class NoteProposalsDomain:
    def __init__(self, repository: NoteProposalsRepository, notes: NotesDomain, max_pending: int) -> None:
        self._repo = repository
        self._notes = notes
        self._max_pending = max_pending
        name = notes.embedder_name
        self.related_cosine = RELATED_COSINE.get(name, 0.7)

    async def related(self, project: str, fields: NoteFields) -> tuple[Note, str] | None:
        """The project's note that ``fields`` repeats or contradicts, and why."""
        index = await self._notes.index(project)
        same_text = index.by_hash.get(content_hash(fields.title, fields.body))
        if same_text is not None:
            return same_text, "identical text (ignoring case, accents, punctuation and spacing)"
        vector = (await embed(self._notes.embedder, [note_text(fields.title, fields.body, fields.tags)]))[0]
        for position, cosine in index.vectors.search(vector, 1):
            if cosine >= self.related_cosine:
                return index.notes[position], f"embedding cosine {cosine:.3f} >= {self.related_cosine:.2f}"
        return None

    async def propose(self, actor: Actor, request_id: str, new: NewNote, reason: str, run_id: str) -> Decided:
        access = await self._notes.projects.access(actor, new.project_id, Role.EDITOR)
        fields = clean_fields(NoteFields(new.kind, new.title, new.body, new.tags), self._notes.max_note_chars)
        reason = reason.strip()
        if len(reason) > MAX_REASON_CHARS:
            raise TooLarge(f"reason is longer than {MAX_REASON_CHARS} characters", field="reason")
        if request_id:
            earlier = await self._repo.by_request(actor.user, request_id)
            if earlier is not None:  # a retry: the first call's answer
                return Decided(view_of(earlier), None)
        if await self._repo.pending_count(access.project_id) >= self._max_pending:
            raise QuotaExceeded(
                f"project {access.project_id!r} has {self._max_pending} proposals waiting: "
                "accept or refuse some first",
                field="project_id",
            )
        now = utcnow()
        row = NoteProposalRow(
            id=str(uuid.uuid4()),
            project_id=access.project_id,
            proposer_user_id=actor.user,
            request_id=request_id or None,
            run_id=run_id.strip()[:64],
            author_agent_id=new.author_agent_id.strip()[:128],
            kind=fields.kind,
            title=fields.title,
            body=fields.body,
            tags_json=json.dumps(list(fields.tags), ensure_ascii=False),
            reason=reason,
            create_time=now,
        )
        match = await self.related(access.project_id, fields)
        if match is not None:
            target, why = match
            row.target_note_id, row.target_kind = target.id, target.kind
            row.target_title, row.target_body = target.title, target.body
            row.target_tags_json, row.target_update_time = target.tags_json, target.update_time
            row.match_reason = why
        saved = await self._repo.insert(row)
        if saved.id != row.id or access.note_policy != AUTO:
            return Decided(view_of(saved), None)
        return await self._accept(access, saved, decided_by="")

    async def _readable(self, actor: Actor, proposal_id: str, need: Role) -> tuple[Access, NoteProposalRow]:
        """The proposal, when ``actor`` is a member of its project (NOT_FOUND
        otherwise, exactly like a missing id) with the ``need`` role."""
        clean = proposal_id.strip()
        if not clean:
            raise InvalidArgument("id is required", field="id")
        row = await self._repo.get(clean)
        if row is None:
            raise NotFound(f"note proposal {clean!r} not found", field="id")
        try:
            access = await self._notes.projects.access(actor, row.project_id, need)
        except NotFound:
            raise NotFound(f"note proposal {clean!r} not found", field="id") from None
        return access, row

    async def get(self, actor: Actor, proposal_id: str) -> ProposalView:
        _access, row = await self._readable(actor, proposal_id, Role.VIEWER)
        return view_of(row)

    async def list(
        self, actor: Actor, project_id: str, state: int, size: int, token: str
    ) -> tuple[list[ProposalView], str]:
        if state and state not in STATES:
            raise InvalidArgument(f"state {state} is not a known state", field="state")
        access = await self._notes.projects.access(actor, project_id, Role.VIEWER)
        view = [access.project_id, state]

        def read(cursor: Cursor) -> tuple[datetime, str]:
            same(cursor["v"], view)
            return as_instant(cursor["t"]), as_text(cursor["i"])

        limit, after = page_request(size, token, read)
        rows = await self._repo.page(access.project_id, state, after, limit + 1)
        page, next_token = page_of(
            list(rows),
            limit,
            lambda last: {"v": view, "t": aware(last.create_time).isoformat(), "i": last.id},
        )
        return [view_of(row) for row in page], next_token

    async def accept(self, actor: Actor, proposal_id: str) -> Decided:
        access, row = await self._readable(actor, proposal_id, Role.EDITOR)
        if row.state != PENDING:
            raise FailedPrecondition(f"note proposal {row.id} was already decided", field="id")
        return await self._accept(access, row, decided_by=actor.user)

    async def refuse(self, actor: Actor, proposal_id: str) -> ProposalView:
        _access, row = await self._readable(actor, proposal_id, Role.EDITOR)
        if not await self._decide(row, REFUSED, actor.user):
            raise FailedPrecondition(f"note proposal {row.id} was already decided", field="id")
        await self._repo.set_result(row.id, "")  # nothing written: no claim left behind
        return view_of(await self._current(row.id))

    async def _decide(self, row: NoteProposalRow, state: int, by: str) -> bool:
        """Moves the proposal out of pending; False when another call did.
        The claim is marked with a token of this call, so that a retried
        update whose first reply was lost finds its own decision, and a
        concurrent one (even by the same member) does not."""
        claim = f"claim:{uuid.uuid4()}"
        if await self._repo.decide(row.id, state, by, utcnow(), claim=claim):
            return True
        current = await self._current(row.id)
        return current.state == state and current.result_note_id == claim

    async def _current(self, proposal_id: str) -> NoteProposalRow:
        row = await self._repo.get(proposal_id)
        if row is None:
            raise NotFound(f"note proposal {proposal_id!r} not found", field="id")
        return row

    async def _accept(self, access: Access, row: NoteProposalRow, decided_by: str) -> Decided:
        """Claims the decision, then writes the note (or the target's update);
        a write that fails gives the proposal back to pending."""
        target: Note | None = None
        if row.target_note_id:
            target = await self._notes.note_by_id(row.target_note_id)
            recorded = row.target_update_time
            stale = target is None or recorded is None or aware(target.update_time) != aware(recorded)
            if stale:
                raise FailedPrecondition(
                    f"note {row.target_note_id} changed or went since this proposal was made: "
                    "refuse it and let the agent propose again",
                    field="id",
                )
        if not await self._decide(row, ACCEPTED, decided_by):
            raise FailedPrecondition(f"note proposal {row.id} was already decided", field="id")
        fields = NoteFields(row.kind, row.title, row.body, json.loads(row.tags_json))
        try:
            if target is not None:
                tags = list(dict.fromkeys([*tags_of(target), *fields.tags]))
                note = await self._notes.replace_text(
                    target, NoteFields(fields.kind, fields.title, fields.body, tags)
                )
            else:
                new = NewNote(row.project_id, row.kind, row.title, row.body, fields.tags, row.author_agent_id)
                author = Access(row.project_id, access.role, row.proposer_user_id, access.note_policy)
                note = (await self._notes.create_in(author, f"proposal:{row.id}", new)).note
        except Exception:
            await self._repo.decide(row.id, PENDING, "", None, from_state=ACCEPTED, claim="")
            raise
        await self._repo.set_result(row.id, note.id)
        return Decided(view_of(await self._current(row.id)), note)
