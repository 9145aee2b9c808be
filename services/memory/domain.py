"""Rules of the memory service: note validation, lexical recall, personal
settings. No gRPC here.

Recall is lexical for now (BM25 over title, body and tags). The scoring lives
in small pure functions (:func:`tokenize`, :func:`recall_weights`,
:func:`bm25_scores`, :func:`rank`) so that later rankers (embeddings) can be
fused with it without touching the service plumbing."""

from __future__ import annotations

import json
import math
import re
import unicodedata
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from services.memory.models import Note, PersonalSettings
from services.memory.repository import MemoryRepository
from services.shared.errors import InvalidArgument, TooLarge
from services.shared.time import utcnow

DEFAULT_PROJECT_ID = "default"
# NoteKind and ChatMode values of memory.proto other than UNSPECIFIED
# (tests/unit/test_memory_domain.py keeps them in step with the contract).
NOTE_KINDS = frozenset({1, 2, 3, 4})
CHAT_MODES = frozenset({1, 2})
MAX_TITLE_CHARS = 200
MAX_TAGS = 32
MAX_TAG_CHARS = 64

DEFAULT_RECALL_LIMIT = 5
MAX_RECALL_LIMIT = 50
# A persona term counts half as much as a query term.
PERSONA_WEIGHT = 0.5
# Okapi BM25 parameters (the usual ones).
BM25_K1 = 1.2
BM25_B = 0.75

MAX_DISPLAY_NAME_CHARS = 100
MAX_AVATAR_JSON_CHARS = 16_384
MAX_INSTRUCTION_PAGES = 100
SETTINGS_PATHS = frozenset(
    {
        "display_name",
        "avatar_json",
        "instruction_page_ids",
        "active_instruction_page_id",
        "chat_mode",
        "default_model",
    }
)


# Recall: pure functions

_WORD = re.compile(r"[^\W_]+")  # runs of Unicode letters and digits


def tokenize(text: str) -> list[str]:
    """Lowercase terms without accents ("Décision" -> "decision"), split on
    anything that is not a letter or a digit; terms shorter than 2 characters
    are dropped."""
    decomposed = unicodedata.normalize("NFKD", text)
    bare = "".join(char for char in decomposed if not unicodedata.combining(char))
    return [token for token in _WORD.findall(bare.casefold()) if len(token) >= 2]


def recall_weights(query: str, persona: str) -> dict[str, float]:
    """Weight of each distinct term: 1 for a query term, PERSONA_WEIGHT for a
    term only the persona has. Empty when neither has a term."""
    weights = dict.fromkeys(tokenize(persona), PERSONA_WEIGHT)
    weights.update(dict.fromkeys(tokenize(query), 1.0))
    return weights


def note_terms(title: str, body: str, tags: Iterable[str]) -> list[str]:
    """The terms a note is found by."""
    return tokenize(" ".join([title, body, *tags]))


def bm25_scores(
    weights: Mapping[str, float],
    documents: Sequence[Sequence[str]],
    k1: float = BM25_K1,
    b: float = BM25_B,
) -> list[float]:
    """Okapi BM25 of each tokenised document against weighted terms, with the
    non-negative idf ln(1 + (N - n + 0.5) / (n + 0.5)). A document scores > 0
    if and only if it contains a term of positive weight."""
    if not documents or not weights:
        return [0.0] * len(documents)
    counts = [Counter(document) for document in documents]
    average_length = sum(len(document) for document in documents) / len(documents) or 1.0
    total = len(documents)
    idf = {
        term: math.log(1.0 + (total - frequency + 0.5) / (frequency + 0.5))
        for term in weights
        if (frequency := sum(1 for count in counts if term in count))
    }
    scores = []
    for document, count in zip(documents, counts, strict=True):
        norm = k1 * (1.0 - b + b * len(document) / average_length)
        score = 0.0
        for term, term_idf in idf.items():
            occurrences = count.get(term, 0)
            if occurrences:
                score += weights[term] * term_idf * occurrences * (k1 + 1.0) / (occurrences + norm)
        scores.append(score)
    return scores


def rank(scored: Iterable[tuple[Note, float]], limit: int) -> list[tuple[Note, float]]:
    """Notes with a positive score, best first; equal scores most recently
    updated first (then by id, so the order is stable)."""
    kept = [(note, score) for note, score in scored if score > 0.0]
    kept.sort(key=lambda pair: pair[0].id)
    kept.sort(key=lambda pair: pair[0].update_time, reverse=True)
    kept.sort(key=lambda pair: pair[1], reverse=True)
    return kept[:limit]


def recall_limit(requested: int) -> int:
    if requested < 0:
        raise InvalidArgument("limit must not be negative", field="limit")
    return min(requested or DEFAULT_RECALL_LIMIT, MAX_RECALL_LIMIT)


def tags_of(note: Note) -> list[str]:
    return [str(tag) for tag in json.loads(note.tags_json or "[]")]


def instruction_page_ids_of(settings: PersonalSettings) -> list[str]:
    return [str(page) for page in json.loads(settings.instruction_page_ids_json or "[]")]


# Domain


@dataclass(frozen=True)
class NewNote:
    project_id: str
    kind: int
    title: str
    body: str
    tags: Sequence[str]
    author_agent_id: str


@dataclass(frozen=True)
class SettingsValues:
    """Candidate values of an update; only the fields named by the mask are written."""

    display_name: str = ""
    avatar_json: str = ""
    instruction_page_ids: Sequence[str] = ()
    active_instruction_page_id: str = ""
    chat_mode: int = 0
    default_model: str = ""


class MemoryDomain:
    def __init__(self, repository: MemoryRepository, max_note_chars: int) -> None:
        self._repo = repository
        self._max_note_chars = max_note_chars

    # Notes

    async def create_note(self, user_id: str, request_id: str, new: NewNote) -> Note:
        if new.kind == 0:
            raise InvalidArgument("note.kind is required", field="note.kind")
        if new.kind not in NOTE_KINDS:
            raise InvalidArgument(f"note.kind {new.kind} is not a known kind", field="note.kind")
        title, body = new.title.strip(), new.body.strip()
        if not title:
            raise InvalidArgument("note.title must not be empty", field="note.title")
        if not body:
            raise InvalidArgument("note.body must not be empty", field="note.body")
        if len(title) > MAX_TITLE_CHARS:
            raise TooLarge(f"note.title is longer than {MAX_TITLE_CHARS} characters", field="note.title")
        if len(body) > self._max_note_chars:
            raise TooLarge(f"note.body is longer than {self._max_note_chars} characters", field="note.body")
        tags = list(dict.fromkeys(tag.strip() for tag in new.tags if tag.strip()))
        if len(tags) > MAX_TAGS or any(len(tag) > MAX_TAG_CHARS for tag in tags):
            raise TooLarge(
                f"at most {MAX_TAGS} tags of at most {MAX_TAG_CHARS} characters", field="note.tags"
            )
        now = utcnow()
        note = Note(
            id=str(uuid.uuid4()),
            owner_user_id=user_id,
            project_id=new.project_id.strip() or DEFAULT_PROJECT_ID,
            kind=new.kind,
            title=title,
            body=body,
            tags_json=json.dumps(tags, ensure_ascii=False),
            author_agent_id=new.author_agent_id,
            request_id=request_id or None,
            create_time=now,
            update_time=now,
        )
        return await self._repo.insert_note(note)

    async def recall_notes(
        self, user_id: str, project_id: str, query: str, persona: str, requested_limit: int
    ) -> list[tuple[Note, float]]:
        limit = recall_limit(requested_limit)
        weights = recall_weights(query, persona)
        if not weights:
            return []  # nothing to look for: no database round trip at all
        notes = await self._repo.project_notes(user_id, project_id.strip() or DEFAULT_PROJECT_ID)
        if not notes:
            return []
        documents = [note_terms(note.title, note.body, tags_of(note)) for note in notes]
        return rank(zip(notes, bm25_scores(weights, documents), strict=True), limit)

    # Personal settings

    async def get_personal_settings(self, user_id: str) -> PersonalSettings:
        """The user's row, or the defaults (not written) when there is none."""
        return await self._repo.get_settings(user_id) or PersonalSettings(user_id=user_id)

    async def update_personal_settings(
        self, user_id: str, values: SettingsValues, paths: Sequence[str]
    ) -> PersonalSettings:
        """Writes the fields named by ``paths`` (a FieldMask) and only those."""
        if not paths:
            raise InvalidArgument("update_mask must name at least one field", field="update_mask")
        unknown = sorted(set(paths) - SETTINGS_PATHS)
        if unknown:
            raise InvalidArgument(
                f"update_mask has unknown or read-only paths {unknown}; allowed: {sorted(SETTINGS_PATHS)}",
                field="update_mask",
            )
        return await self._repo.upsert_settings(user_id, settings_changes(values, set(paths)))


def settings_changes(values: SettingsValues, paths: set[str]) -> dict[str, object]:
    """Validates the masked fields of ``values``; returns column -> value."""
    changes: dict[str, object] = {}
    if "display_name" in paths:
        display_name = values.display_name.strip()
        if len(display_name) > MAX_DISPLAY_NAME_CHARS:
            raise TooLarge(
                f"display_name is longer than {MAX_DISPLAY_NAME_CHARS} characters",
                field="settings.display_name",
            )
        changes["display_name"] = display_name
    if "avatar_json" in paths:
        # An empty string in the mask clears the field, i.e. back to the default "{}".
        avatar_json = values.avatar_json.strip() or "{}"
        if len(avatar_json) > MAX_AVATAR_JSON_CHARS:
            raise TooLarge(
                f"avatar_json is longer than {MAX_AVATAR_JSON_CHARS} characters", field="settings.avatar_json"
            )
        try:
            avatar = json.loads(avatar_json)
        except ValueError as exc:
            raise InvalidArgument("avatar_json is not valid JSON", field="settings.avatar_json") from exc
        if not isinstance(avatar, dict):
            raise InvalidArgument("avatar_json must be a JSON object", field="settings.avatar_json")
        changes["avatar_json"] = avatar_json
    if "instruction_page_ids" in paths:
        pages = list(dict.fromkeys(page.strip() for page in values.instruction_page_ids))
        if any(not page for page in pages):
            raise InvalidArgument(
                "instruction_page_ids must not contain empty ids", field="settings.instruction_page_ids"
            )
        if len(pages) > MAX_INSTRUCTION_PAGES:
            raise TooLarge(
                f"at most {MAX_INSTRUCTION_PAGES} instruction pages", field="settings.instruction_page_ids"
            )
        changes["instruction_page_ids_json"] = json.dumps(pages, ensure_ascii=False)
    if "active_instruction_page_id" in paths:
        changes["active_instruction_page_id"] = values.active_instruction_page_id.strip()
    if "chat_mode" in paths:
        if values.chat_mode not in CHAT_MODES:
            raise InvalidArgument(
                "chat_mode must be CHAT_MODE_SIDEBAR or CHAT_MODE_FLOATING", field="settings.chat_mode"
            )
        changes["chat_mode"] = values.chat_mode
    if "default_model" in paths:
        changes["default_model"] = values.default_model.strip()
    return changes
