"""Hybrid search building blocks shared by the router and memory: an
in-memory cosine index over embeddings, and reciprocal rank fusion of
several rankings (Cormack et al., 2009: score = sum of 1 / (k + rank))."""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Generic, TypeVar

import numpy as np
from threadpoolctl import ThreadpoolController

from services.shared.embeddings import Vectors

RRF_K = 60
Key = TypeVar("Key", bound=Hashable)


def rrf_fuse(rankings: Sequence[Sequence[Key]], k: int = RRF_K) -> dict[Key, float]:
    """Reciprocal-rank-fused score of every key that appears in a ranking
    (rank 1 is best). A key missing from a ranking gets nothing from it."""
    fused: dict[Key, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            fused[key] = fused.get(key, 0.0) + 1.0 / (k + rank)
    return fused


def rrf_max(lists: int, k: int = RRF_K) -> float:
    """The fused score of a key ranked first in ``lists`` rankings: divide
    by it to rescale fused scores to 0..1."""
    return lists / (k + 1)


@functools.cache
def _blas_limit() -> Callable[..., AbstractContextManager[Any]]:
    """threadpoolctl's limit on the BLAS NumPy loaded, its libraries found
    once (a scan of the loaded libraries per call would cost more than the
    product)."""
    limit: Callable[..., AbstractContextManager[Any]] = ThreadpoolController().limit
    return limit


class VectorIndex(Generic[Key]):
    """Exact cosine search by one matrix product. Rows are L2-normalised, so
    the dot product is the cosine. 10,000 rows of 384 floats take about a
    millisecond per query; past a few hundred thousand rows an ANN index
    (pgvector, hnswlib) would be the next step."""

    def __init__(self, keys: Sequence[Key], vectors: Vectors) -> None:
        if len(keys) != len(vectors):
            raise ValueError("one vector per key")
        self.keys = list(keys)
        self._matrix = vectors

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def nbytes(self) -> int:
        """The matrix's bytes (the keys are the caller's)."""
        return int(self._matrix.nbytes)

    @property
    def matrix(self) -> Vectors:
        """The rows, one per key in order (to be read, not written)."""
        return self._matrix

    def search(self, query: Vectors, top: int) -> list[tuple[Key, float]]:
        """The ``top`` nearest keys to the (1, d) or (d,) query, best first,
        equal scores in key order: always the head of the whole ranking, so
        a search widened step by step sees the same order."""
        if not self.keys or top <= 0:
            return []
        scores = self._products(query)
        if top < len(scores):
            # Every row as good as the top-th, in key order, then sorted
            # stably: only the head is sorted, ties at its end included.
            threshold = np.partition(scores, len(scores) - top)[len(scores) - top]
            picked = np.flatnonzero(scores >= threshold)
            picked = picked[np.argsort(-scores[picked], kind="stable")][:top]
        else:
            picked = np.argsort(-scores, kind="stable")
        return [(self.keys[i], float(scores[i])) for i in picked]

    def scores(self, query: Vectors) -> dict[Key, float]:
        """The cosine of every key with the query."""
        values = self._products(query)
        return {key: float(v) for key, v in zip(self.keys, values, strict=True)}

    def _products(self, query: Vectors) -> Vectors:
        """Every row's dot product with the query, on one BLAS thread: the
        product reads the matrix once, and OpenBLAS's threads, spinning while
        they wait, cost several times its CPU on a loaded 2-core machine
        (10,000 rows of 256: 3.0 ms of CPU on two threads, 0.8 ms on one;
        the results are the same, each row's product is computed whole)."""
        with _blas_limit()(limits=1, user_api="blas"):
            products: Vectors = self._matrix @ query.reshape(-1)
        return products
