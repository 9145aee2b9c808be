"""Durable notes: save (with duplicate refusal or merge), get, list, update,
delete, and recall. Saving is for stable, high-value knowledge that an agent
chose to write down: a note needs a kind, a title and a
body within bounds, and must not repeat a note the project already has.

Two notes are duplicates when
* their normalised text is identical (case, accents, punctuation and spacing
  ignored): enforced by a unique constraint, so it holds across replicas and
  concurrent saves; or
* their embeddings have a cosine at or above the duplicate threshold
  (DUPLICATE_COSINE per embedder, or the setting): the same knowledge
  reworded. This one is checked against the project's index before the write
  (two replicas saving two rewordings at the same instant may both land).
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import IntEnum

from services.memory.notes.lexical import (
    MAX_RECALL_LIMIT,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MAX_TITLE_CHARS,
    NOTE_KINDS,
    recall_limit,
    tags_of,
)
from services.memory.notes.models import Note
from services.memory.notes.recall import Mode, NoteIndexes, ProjectIndex, Recall, Recalled, note_text
from services.memory.notes.repository import ContentConflict, NoteFilter, NotesRepository
from services.memory.projects.domain import Access, ProjectsDomain, Role
from services.shared.audit import Actor
from services.shared.embeddings import Embedder, EmbedderName, embed, from_bytes, to_bytes
from services.shared.errors import FailedPrecondition, InvalidArgument, NotFound, QuotaExceeded, TooLarge
from services.shared.masks import masked_fields
from services.shared.pagination import Cursor, as_instant, as_text, page_of, page_request, same
from services.shared.text import fold
from services.shared.time import aware, utcnow

# Cosine at or above which two notes say the same thing. USE puts a note and
# its translation at 0.80 to 0.90, but also two facts that differ by one
# name ("reports go out on Friday" / "on Monday": 0.93), so only near-copies
# count: refusing a real note costs more than keeping a redundant one. The
# hashing embedder measures spelling: only near-verbatim copies reach 0.9.
DUPLICATE_COSINE = {EmbedderName.USE_MULTILINGUAL.value: 0.95, EmbedderName.HASHING.value: 0.9}
NOTE_PATHS = frozenset({"kind", "title", "body", "tags"})
MAX_NOTE_ID_CHARS = 36

_WORD = re.compile(r"[^\W_]+")


class Policy(IntEnum):
    """DuplicatePolicy of memory.proto (UNSPECIFIED = REFUSE)."""

    REFUSE = 1
    MERGE = 2


def content_hash(title: str, body: str) -> str:
    """sha256 of the note's words, casefolded and without accents: two notes
    that differ only in case, accents, punctuation or spacing collide."""
    parts = []
    for text in (title, body):
        parts.append(" ".join(_WORD.findall(fold(text))))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


@dataclass(frozen=True)
class NoteFields:
    kind: int
    title: str
    body: str
    tags: Sequence[str] = ()


@dataclass(frozen=True)
class NewNote:
    project_id: str
    kind: int
    title: str
    body: str
    tags: Sequence[str]
    author_agent_id: str
    # Set by imports: the memory file's name and its content's hash.
    source: str | None = None
    source_hash: str = ""


@dataclass(frozen=True)
class Saved:
    note: Note
    merged: bool
    reason: str = ""


@dataclass(frozen=True)
class NotePage:
    notes: list[Note]
    next_token: str


class Duplicate(FailedPrecondition):
    """The note repeats ``existing``; the metadata names it and the rule."""

    def __init__(self, existing: Note, why: str) -> None:
        super().__init__(
            f"note repeats note {existing.id} ({existing.title!r}): {why}; update that note instead, "
            "or save with duplicate_policy MERGE",
            field="note",
            duplicate_of=existing.id,
            rule=why,
        )
        self.existing = existing
        self.why = why


def clean_fields(fields: NoteFields, max_body_chars: int) -> NoteFields:
    """Checks and normalises what a note says; InvalidArgument / TooLarge with the field."""
    if fields.kind == 0:
        raise InvalidArgument("note.kind is required", field="note.kind")
    if fields.kind not in NOTE_KINDS:
        raise InvalidArgument(f"note.kind {fields.kind} is not a known kind", field="note.kind")
    title, body = fields.title.strip(), fields.body.strip()
    if not title:
        raise InvalidArgument("note.title must not be empty", field="note.title")
    if not body:
        raise InvalidArgument("note.body must not be empty", field="note.body")
    if len(title) > MAX_TITLE_CHARS:
        raise TooLarge(f"note.title is longer than {MAX_TITLE_CHARS} characters", field="note.title")
    if len(body) > max_body_chars:
        raise TooLarge(f"note.body is longer than {max_body_chars} characters", field="note.body")
    tags = list(dict.fromkeys(tag.strip() for tag in fields.tags if tag.strip()))
    if len(tags) > MAX_TAGS or any(len(tag) > MAX_TAG_CHARS for tag in tags):
        raise TooLarge(f"at most {MAX_TAGS} tags of at most {MAX_TAG_CHARS} characters", field="note.tags")
    return NoteFields(fields.kind, title, body, tags)


def _note_id(note_id: str) -> str:
    if not note_id.strip():
        raise InvalidArgument("id is required", field="id")
    return note_id.strip()


class NotesDomain:
    def __init__(
        self,
        repository: NotesRepository,
        indexes: NoteIndexes,
        max_note_chars: int,
        projects: ProjectsDomain,
        duplicate_cosine: float | None = None,
        max_project_chars: int | None = None,
    ) -> None:
        self._repo = repository
        self._max_project_chars = max_project_chars
        self.projects = projects
        self._indexes = indexes
        self._max_note_chars = max_note_chars
        name = indexes.embedder.name
        self.duplicate_cosine = (
            DUPLICATE_COSINE.get(name, 0.95) if duplicate_cosine is None else duplicate_cosine
        )

    async def _vector(self, fields: NoteFields) -> bytes:
        rows = await embed(self._indexes.embedder, [note_text(fields.title, fields.body, fields.tags)])
        return to_bytes(rows[0])

    def find_duplicate(
        self, index: ProjectIndex, fields: NoteFields, vector: bytes, exclude: str = ""
    ) -> tuple[Note, str] | None:
        """The note of the project's ``index`` that ``fields`` repeats, and why; None if none."""
        same = index.by_hash.get(content_hash(fields.title, fields.body))
        if same is not None and same.id != exclude:
            return same, "identical text (ignoring case, accents, punctuation and spacing)"
        for position, cosine in index.vectors.search(from_bytes(vector), 2):
            note = index.notes[position]
            if note.id != exclude and cosine >= self.duplicate_cosine:
                return note, f"embedding cosine {cosine:.3f} >= {self.duplicate_cosine:.2f} (same meaning)"
        return None

    async def create_note(
        self, actor: Actor, request_id: str, new: NewNote, policy: int = Policy.REFUSE
    ) -> Saved:
        """Saves into the project ``new`` names, which the actor must be an editor of."""
        access = await self.projects.access(actor, new.project_id, Role.EDITOR)
        return await self.create_in(access, request_id, new, policy)

    async def create_in(
        self, access: Access, request_id: str, new: NewNote, policy: int = Policy.REFUSE
    ) -> Saved:
        if policy not in (0, Policy.REFUSE, Policy.MERGE):
            raise InvalidArgument(
                f"duplicate_policy {policy} is not a known policy", field="duplicate_policy"
            )
        fields = clean_fields(NoteFields(new.kind, new.title, new.body, new.tags), self._max_note_chars)
        owner, project = access.user, access.project_id
        if request_id:
            earlier = await self._repo.note_by_request(owner, request_id)
            if earlier is not None:  # a retry: the first call's answer
                return Saved(earlier, merged=False)
        # One read of the index (its revision checked) for the quota and the repeats.
        index = await self._indexes.get(project)
        self._check_room(index, project, fields)
        vector = await self._vector(fields)
        duplicate = self.find_duplicate(index, fields, vector)
        if duplicate is not None:
            # A concurrent retry of this very request may be what we found.
            if (retried := await self._retried(owner, request_id)) is not None:
                return retried
            return await self._on_duplicate(duplicate[0], duplicate[1], fields, policy)
        now = utcnow()
        note = Note(
            id=str(uuid.uuid4()),
            author_user_id=owner,
            project_id=project,
            kind=fields.kind,
            title=fields.title,
            body=fields.body,
            tags_json=json.dumps(list(fields.tags), ensure_ascii=False),
            author_agent_id=new.author_agent_id.strip(),
            request_id=request_id or None,
            content_hash=content_hash(fields.title, fields.body),
            embedding=vector,
            embedder=self._indexes.embedder.name,
            embedding_dimension=self._indexes.embedder.dimension,
            source=new.source,
            source_hash=new.source_hash,
            create_time=now,
            update_time=now,
        )
        try:
            saved, revision = await self._repo.insert_note(note)
        except ContentConflict as conflict:  # saved meanwhile, here or on another replica
            if (retried := await self._retried(owner, request_id)) is not None:
                return retried
            why = "identical text (ignoring case, accents, punctuation and spacing)"
            return await self._on_duplicate(conflict.existing, why, fields, policy)
        if revision:
            self._indexes.added(project, saved, revision)
        return Saved(saved, merged=False)

    async def _retried(self, owner: str, request_id: str) -> Saved | None:
        """The note an earlier call with this request_id saved, if any."""
        if not request_id:
            return None
        earlier = await self._repo.note_by_request(owner, request_id)
        return Saved(earlier, merged=False) if earlier is not None else None

    async def _on_duplicate(self, existing: Note, why: str, fields: NoteFields, policy: int) -> Saved:
        if policy != Policy.MERGE:
            raise Duplicate(existing, why)
        # The newer wording supersedes the older one; tags accumulate.
        tags = list(dict.fromkeys([*tags_of(existing), *fields.tags]))[:MAX_TAGS]
        merged = replace(fields, tags=tags)
        # A fresh copy: ``existing`` may be the shared index's object.
        current = await self._repo.get_note(existing.id)
        if current is None:  # deleted meanwhile
            raise Duplicate(existing, why)
        note = await self._write(current, merged, await self._vector(merged))
        return Saved(note, merged=True, reason=f"merged into note {existing.id}: {why}")

    def _check_room(self, index: ProjectIndex, project: str, fields: NoteFields, replacing: str = "") -> None:
        """QuotaExceeded when the project's notes would hold more than its
        quota: counted on the project's ``index`` (current by its revision),
        not by summing every row."""
        if self._max_project_chars is None:
            return
        held = index.chars_without(replacing)
        if held + len(fields.title) + len(fields.body) > self._max_project_chars:
            raise QuotaExceeded(
                f"project {project!r} holds {held} characters of notes; this note would pass its "
                f"quota of {self._max_project_chars}: shorten or delete notes first",
                field="note",
            )

    async def _write(self, note: Note, fields: NoteFields, vector: bytes) -> Note:
        self._check_room(await self._indexes.get(note.project_id), note.project_id, fields, replacing=note.id)
        note.kind, note.title, note.body = fields.kind, fields.title, fields.body
        note.tags_json = json.dumps(list(fields.tags), ensure_ascii=False)
        note.content_hash = content_hash(fields.title, fields.body)
        note.embedding, note.embedder = vector, self._indexes.embedder.name
        note.embedding_dimension = self._indexes.embedder.dimension
        note.update_time = utcnow()
        try:
            return await self._repo.save_note(note)
        except ContentConflict as conflict:
            raise Duplicate(
                conflict.existing, "identical text (ignoring case, accents, punctuation and spacing)"
            ) from None

    @property
    def max_note_chars(self) -> int:
        return self._max_note_chars

    @property
    def embedder(self) -> Embedder:
        return self._indexes.embedder

    @property
    def embedder_name(self) -> str:
        return self._indexes.embedder.name

    async def index(self, project: str) -> ProjectIndex:
        """The project's current recall index (its notes, hashes and vectors)."""
        return await self._indexes.get(project)

    async def note_by_id(self, note_id: str) -> Note | None:
        """A note by id, with no access check: for a caller that checked it."""
        return await self._repo.get_note(note_id)

    async def replace_text(self, note: Note, fields: NoteFields) -> Note:
        """Writes new text over a note (fields already cleaned), re-embedded."""
        return await self._write(note, fields, await self._vector(fields))

    async def rewrite(self, note: Note, fields: NoteFields, source_hash: str) -> Note:
        """Replaces what an imported note says (fields already cleaned)."""
        note.source_hash = source_hash
        return await self._write(note, fields, await self._vector(fields))

    async def from_source(self, project: str, source: str) -> Note | None:
        """The note an imported memory file became, if any."""
        return await self._repo.note_by_source(project, source)

    async def get_note(self, actor: Actor, note_id: str, need: Role = Role.VIEWER) -> Note:
        """A note of a project the actor is a member of; NOT_FOUND otherwise,
        PERMISSION_DENIED when ``need`` is above the actor's role."""
        note = await self._repo.get_note(_note_id(note_id))
        if note is None:
            raise NotFound(f"note {note_id.strip()!r} not found", field="id")
        try:
            await self.projects.access(actor, note.project_id, need)
        except NotFound:
            raise NotFound(f"note {note_id.strip()!r} not found", field="id") from None
        return note

    async def list_notes(self, actor: Actor, where: NoteFilter, size: int, token: str) -> NotePage:
        """A project's notes, or (project "") those of every project of the actor."""
        if where.kind and where.kind not in NOTE_KINDS:
            raise InvalidArgument(f"kind {where.kind} is not a known kind", field="kind")
        if where.project_id:
            access = await self.projects.access(actor, where.project_id, Role.VIEWER)
            where = replace(where, project_id=access.project_id)
        view = [where.project_id, where.kind, where.tag]

        def read(cursor: Cursor) -> tuple[datetime, str]:
            same(cursor["v"], view)
            return as_instant(cursor["t"]), as_text(cursor["i"])

        limit, after = page_request(size, token, read)
        rows = await self._repo.list_notes(where, after, limit + 1)
        notes, next_token = page_of(
            rows, limit, lambda last: {"v": view, "t": aware(last.create_time).isoformat(), "i": last.id}
        )
        return NotePage(notes, next_token)

    async def update_note(self, actor: Actor, note_id: str, values: NoteFields, paths: Sequence[str]) -> Note:
        paths = masked_fields(paths, NOTE_PATHS)
        note = await self.get_note(actor, note_id, Role.EDITOR)
        current = NoteFields(note.kind, note.title, note.body, tags_of(note))
        wanted = NoteFields(
            values.kind if "kind" in paths else current.kind,
            values.title if "title" in paths else current.title,
            values.body if "body" in paths else current.body,
            values.tags if "tags" in paths else current.tags,
        )
        fields = clean_fields(wanted, self._max_note_chars)
        return await self._write(note, fields, await self._vector(fields))

    async def delete_note(self, actor: Actor, note_id: str) -> None:
        note = await self.get_note(actor, note_id, Role.EDITOR)
        if not await self._repo.delete_note(note.id):
            raise NotFound(f"note {note_id.strip()!r} not found", field="id")

    async def recall(
        self, actor: Actor, project_id: str, query: str, persona: str, requested_limit: int, mode: int = 0
    ) -> list[Recalled]:
        access = await self.projects.access(actor, project_id, Role.VIEWER)
        return (await self.recall_in(access.project_id, query, persona, requested_limit, mode)).notes

    async def recall_in(
        self, project: str, query: str, persona: str, requested_limit: int, mode: int = 0
    ) -> Recall:
        """Recall in a project the caller was already found to read."""
        limit = recall_limit(requested_limit)
        if mode not in (0, *Mode):
            raise InvalidArgument(f"mode {mode} is not a known recall mode", field="mode")
        return await self._indexes.recall(
            project,
            query,
            persona,
            min(limit, MAX_RECALL_LIMIT),
            Mode(mode or Mode.HYBRID),
        )
