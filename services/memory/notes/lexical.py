"""Rules of the memory service shared by its parts: tokenising and BM25 (the
lexical half of recall), ranking, limits, and personal settings. No gRPC here.

The scoring lives in small pure pieces (:func:`tokenize`, :func:`recall_weights`,
:class:`LexicalIndex`, :func:`rank`); services.memory.recall fuses the lexical
ranking with the embedding one."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt

from services.memory.models import Note, PersonalSettings
from services.memory.repository import MemoryRepository
from services.shared.errors import InvalidArgument, TooLarge
from services.shared.masks import masked_fields
from services.shared.text import fold

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
    return [token for token in _WORD.findall(fold(text)) if len(token) >= 2]


def recall_weights(query: str, persona: str) -> dict[str, float]:
    """Weight of each distinct term: 1 for a query term, PERSONA_WEIGHT for a
    term only the persona has. Empty when neither has a term."""
    weights = dict.fromkeys(tokenize(persona), PERSONA_WEIGHT)
    weights.update(dict.fromkeys(tokenize(query), 1.0))
    return weights


def note_terms(title: str, body: str, tags: Iterable[str]) -> list[str]:
    """The terms a note is found by."""
    return tokenize(" ".join([title, body, *tags]))


class LexicalIndex:
    """Okapi BM25 over tokenised documents, as an inverted index (term ->
    positions and counts) so that a query only touches the documents that
    hold one of its terms. The idf is the non-negative
    ln(1 + (N - n + 0.5) / (n + 0.5))."""

    def __init__(self, documents: Sequence[Sequence[str]], k1: float = BM25_K1, b: float = BM25_B) -> None:
        self.size = len(documents)
        self._k1 = k1
        lengths = np.array([len(document) for document in documents], dtype=np.float64)
        average_length = float(lengths.mean()) if self.size and lengths.sum() else 1.0
        # The length normalisation of each document, computed once.
        self._norm = k1 * (1.0 - b + b * lengths / average_length)
        postings: dict[str, tuple[list[int], list[int]]] = {}
        for position, document in enumerate(documents):
            for term, occurrences in Counter(document).items():
                positions, counts = postings.setdefault(term, ([], []))
                positions.append(position)
                counts.append(occurrences)
        self._postings = {
            term: (np.array(positions, dtype=np.int64), np.array(counts, dtype=np.float64))
            for term, (positions, counts) in postings.items()
        }

    def scores(self, weights: Mapping[str, float]) -> npt.NDArray[np.float64]:
        """The BM25 of every document against weighted terms. A document
        scores > 0 if and only if it contains a term of positive weight."""
        scores = np.zeros(self.size, dtype=np.float64)
        for term, weight in weights.items():
            posting = self._postings.get(term)
            if posting is None or weight <= 0.0:
                continue
            positions, counts = posting
            idf = math.log(1.0 + (self.size - len(positions) + 0.5) / (len(positions) + 0.5))
            scores[positions] += weight * idf * counts * (self._k1 + 1.0) / (counts + self._norm[positions])
        return scores


def bm25_scores(
    weights: Mapping[str, float],
    documents: Sequence[Sequence[str]],
    k1: float = BM25_K1,
    b: float = BM25_B,
) -> list[float]:
    """Okapi BM25 of each tokenised document against weighted terms (see LexicalIndex)."""
    if not documents:
        return []
    return [float(score) for score in LexicalIndex(documents, k1, b).scores(weights)]


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
class SettingsValues:
    """Candidate values of an update; only the fields named by the mask are written."""

    display_name: str = ""
    avatar_json: str = ""
    instruction_page_ids: Sequence[str] = ()
    active_instruction_page_id: str = ""
    chat_mode: int = 0
    default_model: str = ""


class MemoryDomain:
    """Personal settings (notes: services.memory.notes)."""

    def __init__(self, repository: MemoryRepository) -> None:
        self._repo = repository

    # Personal settings

    async def get_personal_settings(self, user_id: str) -> PersonalSettings:
        """The user's row, or the defaults (not written) when there is none."""
        return await self._repo.get_settings(user_id) or PersonalSettings(user_id=user_id)

    async def update_personal_settings(
        self, user_id: str, values: SettingsValues, paths: Sequence[str]
    ) -> PersonalSettings:
        """Writes the fields named by ``paths`` (a FieldMask) and only those."""
        fields = masked_fields(paths, SETTINGS_PATHS)
        return await self._repo.upsert_settings(user_id, settings_changes(values, set(fields)))


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


MAX_PROJECT_ID_CHARS = 128


def project_of(project_id: str) -> str:
    """The project a request names: "default" when empty."""
    project = project_id.strip() or DEFAULT_PROJECT_ID
    if len(project) > MAX_PROJECT_ID_CHARS:
        raise TooLarge(f"project_id is longer than {MAX_PROJECT_ID_CHARS} characters", field="project_id")
    return project


def aware(value: datetime) -> datetime:
    """SQLite hands back naive datetimes; every time here is UTC."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)
