"""The limits of a note, and the lexical half of recall: tokenising, BM25
and ranking. Pure: no SQL, no gRPC.

The scoring lives in small pure pieces (:func:`tokenize`, :func:`recall_weights`,
:class:`LexicalIndex`, :func:`rank`); services.memory.notes.recall fuses the lexical
ranking with the embedding one."""

from __future__ import annotations

import functools
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from services.memory.notes.models import Note
from services.shared.errors import InvalidArgument
from services.shared.text import fold

# NoteKind values of memory.proto other than UNSPECIFIED
# (tests/unit/test_memory_domain.py keeps them in step with the contract).
NOTE_KINDS = frozenset({1, 2, 3, 4})
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


# A term's documents (rows) and its count in each.
Posting = tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]
EMPTY_ROWS: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
EMPTY_COUNTS: npt.NDArray[np.float64] = np.zeros(0, dtype=np.float64)


class LexicalIndex:
    """Okapi BM25 over tokenised documents, as an inverted index (term ->
    documents and counts) so that a query only touches the documents that
    hold one of its terms. The idf is the non-negative
    ln(1 + (N - n + 0.5) / (n + 0.5)).

    The documents are held last first (the caller's last is the index's
    row 0): a document put before all the others (``with_first``, a new
    note in a newest-first list) is appended, touching only its own terms'
    postings. ``scores`` answers in the caller's order."""

    def __init__(self, documents: Sequence[Sequence[str]], k1: float = BM25_K1, b: float = BM25_B) -> None:
        self._k1, self._b = k1, b
        held = documents[::-1]
        postings: dict[str, tuple[list[int], list[int]]] = {}
        for row, document in enumerate(held):
            for term, occurrences in Counter(document).items():
                rows, counts = postings.setdefault(term, ([], []))
                rows.append(row)
                counts.append(occurrences)
        self._hold(
            np.array([len(document) for document in held], dtype=np.float64),
            {
                term: (np.array(rows, dtype=np.int64), np.array(counts, dtype=np.float64))
                for term, (rows, counts) in postings.items()
            },
        )

    def _hold(self, lengths: npt.NDArray[np.float64], postings: dict[str, Posting]) -> None:
        self.size = len(lengths)
        self._lengths = lengths
        average_length = float(lengths.mean()) if self.size and lengths.sum() else 1.0
        # The length normalisation of each document, computed once.
        self._norm = self._k1 * (1.0 - self._b + self._b * lengths / average_length)
        self._postings = postings

    def with_first(self, document: Sequence[str]) -> LexicalIndex:
        """A new index, as if built with ``document`` before this one's
        documents. This one is left as it is: a recall may be reading it.
        Only the document's own terms' postings are copied (grown by one
        row); the others are shared: no tokenising, no rebuild."""
        postings = dict(self._postings)
        added = 8  # the new document's norm
        for term, occurrences in Counter(document).items():
            rows, counts = postings.get(term, (EMPTY_ROWS, EMPTY_COUNTS))
            grown = (np.append(rows, self.size), np.append(counts, float(occurrences)))
            postings[term] = grown
            added += grown[0].nbytes + grown[1].nbytes - rows.nbytes - counts.nbytes
            added += 100 if rows is EMPTY_ROWS else 0
        index = LexicalIndex([], self._k1, self._b)
        index._hold(np.append(self._lengths, float(len(document))), postings)
        index.__dict__["nbytes"] = self.nbytes + added  # as nbytes counts it, without summing it all again
        return index

    @functools.cached_property
    def nbytes(self) -> int:
        """The postings' and norms' arrays, plus a dictionary entry per term, about."""
        arrays = sum(rows.nbytes + counts.nbytes for rows, counts in self._postings.values())
        return int(arrays + self._norm.nbytes + 100 * len(self._postings))

    def scores(self, weights: Mapping[str, float]) -> npt.NDArray[np.float64]:
        """The BM25 of every document against weighted terms. A document
        scores > 0 if and only if it contains a term of positive weight."""
        scores = np.zeros(self.size, dtype=np.float64)
        for term, weight in weights.items():
            posting = self._postings.get(term)
            if posting is None or weight <= 0.0:
                continue
            rows, counts = posting
            idf = math.log(1.0 + (self.size - len(rows) + 0.5) / (len(rows) + 0.5))
            scores[rows] += weight * idf * counts * (self._k1 + 1.0) / (counts + self._norm[rows])
        return scores[::-1]  # in the caller's order


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
