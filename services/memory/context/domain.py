"""Project context (the `.ideai/CONTEXT.md` equivalent: rules and constraints
every agent of the project applies at once), and the import of a project
folder's `.ideai/CONTEXT.md` and `.ideai/memory/*.md`, sent as contents.

Import is idempotent: a memory file maps to one note through its name (front
matter ``name``, else the file name), and the note remembers the hash of the
file it came from, so the same files again are UNCHANGED, a changed file
UPDATES its note, and a new one CREATES a note through the ordinary save path
(duplicate rules included). Nothing is deleted when a file disappears."""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import yaml  # type: ignore[import-untyped]

from services.memory.context.models import ProjectContextRow
from services.memory.context.repository import ContextRepository
from services.memory.notes.domain import Duplicate, NewNote, NoteFields, NotesDomain, clean_fields
from services.memory.notes.lexical import NOTE_KINDS
from services.memory.projects.domain import Access, Role
from services.shared.audit import Actor
from services.shared.errors import DomainError, InvalidArgument, NotFound, TooLarge
from services.shared.time import aware, utcnow

CONTEXT_PATH = "CONTEXT.md"
MEMORY_FOLDER = "memory"
MAX_IMPORT_FILES = 500
# NoteKind of memory.proto for each front-matter ``metadata.type``: ours, and
# the types of agent memory files (user / feedback / project / reference).
KIND_OF_TYPE = {
    "decision": 1,
    "project": 1,
    "feature": 2,
    "feature_summary": 2,
    "feature-summary": 2,
    "preference": 3,
    "user": 3,
    "feedback": 3,
    "fact": 4,
    "reference": 4,
}
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)
_HEADING = re.compile(r"^#[ \t]+(.+?)[ \t#]*$", re.MULTILINE)


class Outcome(IntEnum):
    """ImportOutcome of memory.proto."""

    CREATED = 1
    UPDATED = 2
    UNCHANGED = 3
    SKIPPED = 4


@dataclass(frozen=True)
class ImportedFile:
    path: str
    outcome: Outcome
    note_id: str = ""
    reason: str = ""


@dataclass(frozen=True)
class MemoryFile:
    """A `.ideai/memory/*.md` file, parsed."""

    source: str
    kind: int
    title: str
    body: str
    tags: list[str]


def split_front_matter(content: str) -> tuple[dict[str, Any], str]:
    """(front matter, the rest); InvalidArgument when the YAML is malformed."""
    match = _FRONT_MATTER.match(content)
    if match is None:
        return {}, content
    try:
        data = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        raise InvalidArgument(f"front matter is not valid YAML ({exc.__class__.__name__})") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InvalidArgument("front matter is not a YAML mapping")
    return data, content[match.end() :]


def parse_memory_file(path: str, content: str) -> MemoryFile:
    """A memory file's note: title = its first `# ` heading (else ``name``),
    body = ``description`` then the markdown, kind from ``metadata.type``,
    tags from ``tags`` / ``metadata.tags``. InvalidArgument says what is missing."""
    front, markdown = split_front_matter(content)
    metadata = front.get("metadata") if isinstance(front.get("metadata"), dict) else {}
    assert isinstance(metadata, dict)
    stem = posixpath.splitext(posixpath.basename(path))[0]
    name = str(front.get("name") or stem).strip()
    kind_name = str(metadata.get("type") or front.get("type") or "").strip().casefold()
    if not kind_name:
        raise InvalidArgument("no metadata.type in the front matter: a note needs a kind")
    kind = KIND_OF_TYPE.get(kind_name)
    if kind is None or kind not in NOTE_KINDS:
        raise InvalidArgument(f"metadata.type {kind_name!r} is not one of {sorted(KIND_OF_TYPE)}")
    heading = _HEADING.search(markdown)
    title = heading.group(1).strip() if heading else name
    description = str(front.get("description") or "").strip()
    body = "\n\n".join(part for part in (description, markdown.strip()) if part)
    raw_tags = front.get("tags", metadata.get("tags")) or []
    tags = [str(tag) for tag in raw_tags] if isinstance(raw_tags, list) else [str(raw_tags)]
    return MemoryFile(source=name, kind=kind, title=title, body=body, tags=tags)


def relative_path(path: str) -> str | None:
    """ "CONTEXT.md" or "memory/<name>.md" for a file of the `.ideai` folder
    (given with or without the `.ideai/` prefix); None for anything else."""
    clean = posixpath.normpath(path.strip().replace("\\", "/"))
    if clean.startswith(".ideai/"):
        clean = clean[len(".ideai/") :]
    if clean == CONTEXT_PATH:
        return clean
    folder, name = posixpath.split(clean)
    if folder == MEMORY_FOLDER and name.endswith(".md") and len(name) > 3:
        return clean
    return None


class ContextDomain:
    def __init__(self, repository: ContextRepository, notes: NotesDomain, max_context_chars: int) -> None:
        self._repo = repository
        self._notes = notes
        self._max_context_chars = max_context_chars

    async def get_context(self, actor: Actor, project_id: str) -> ProjectContextRow:
        access = await self._notes.projects.access(actor, project_id, Role.VIEWER)
        return await self.context_of(access.project_id)

    async def context_of(self, project: str) -> ProjectContextRow:
        """The context of a project the caller was already found to read."""
        row = await self._repo.get_context(project)
        if row is None:
            raise NotFound(f"project {project!r} has no context yet", field="project_id")
        row.update_time = aware(row.update_time)
        return row

    async def put_context(self, actor: Actor, project_id: str, body: str) -> ProjectContextRow:
        access = await self._notes.projects.access(actor, project_id, Role.EDITOR)
        return await self._put(access, body)

    async def _put(self, access: Access, body: str) -> ProjectContextRow:
        text = body.strip()
        if not text:
            raise InvalidArgument("context.body must not be empty", field="context.body")
        if len(text) > self._max_context_chars:
            raise TooLarge(
                f"context.body is longer than {self._max_context_chars} characters", field="context.body"
            )
        row = ProjectContextRow(
            project_id=access.project_id, body=text, author_user_id=access.user, update_time=utcnow()
        )
        return await self._repo.put_context(row)

    async def import_files(
        self, actor: Actor, project_id: str, files: Sequence[tuple[str, str]]
    ) -> list[ImportedFile]:
        if not files:
            raise InvalidArgument("files must not be empty", field="files")
        if len(files) > MAX_IMPORT_FILES:
            raise TooLarge(f"at most {MAX_IMPORT_FILES} files per import", field="files")
        access = await self._notes.projects.access(actor, project_id, Role.EDITOR)
        seen: set[str] = set()
        report = []
        for path, content in files:
            relative = relative_path(path)
            if relative is None:
                report.append(
                    ImportedFile(path, Outcome.SKIPPED, reason="not .ideai/CONTEXT.md or .ideai/memory/*.md")
                )
            elif relative in seen:
                report.append(ImportedFile(path, Outcome.SKIPPED, reason="the same file was sent earlier"))
            else:
                seen.add(relative)
                try:
                    if relative == CONTEXT_PATH:
                        report.append(await self._import_context(access, path, content))
                    else:
                        report.append(await self._import_note(access, path, content))
                except DomainError as error:  # one bad file does not stop the others
                    report.append(ImportedFile(path, Outcome.SKIPPED, reason=error.message))
        return report

    async def _import_context(self, access: Access, path: str, content: str) -> ImportedFile:
        current = await self._repo.get_context(access.project_id)
        if current is not None and current.body == content.strip():
            return ImportedFile(path, Outcome.UNCHANGED)
        await self._put(access, content)
        return ImportedFile(path, Outcome.CREATED if current is None else Outcome.UPDATED)

    async def _import_note(self, access: Access, path: str, content: str) -> ImportedFile:
        parsed = parse_memory_file(path, content)
        digest = hashlib.sha256(content.encode()).hexdigest()
        existing = await self._notes.from_source(access.project_id, parsed.source)
        if existing is not None and existing.source_hash == digest:
            return ImportedFile(path, Outcome.UNCHANGED, note_id=existing.id)
        fields = clean_fields(
            NoteFields(parsed.kind, parsed.title, parsed.body, parsed.tags), self._notes.max_note_chars
        )
        try:
            if existing is not None:
                note = await self._notes.rewrite(existing, fields, source_hash=digest)
                return ImportedFile(path, Outcome.UPDATED, note_id=note.id, reason="the file changed")
            new = NewNote(
                project_id=access.project_id,
                kind=fields.kind,
                title=fields.title,
                body=fields.body,
                tags=fields.tags,
                author_agent_id="",
                source=parsed.source,
                source_hash=digest,
            )
            saved = await self._notes.create_in(access, "", new)
            return ImportedFile(path, Outcome.CREATED, note_id=saved.note.id)
        except Duplicate as duplicate:
            return ImportedFile(
                path,
                Outcome.SKIPPED,
                note_id=duplicate.existing.id,
                reason=f"repeats note {duplicate.existing.id}: {duplicate.why}",
            )
