"""A request's embedding passed from memory's recall to the Skill Router
(services/shared/embeddings.py, TextEmbedding): the router uses it only when
it is its own embedder's, at its dimension, of the exact text it matches
skills on, and routes exactly as when it embeds the request itself."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pytest

from services.router.catalog import CATALOG
from services.router.request_parts import split_request
from services.router.skill_router import IndexedSkill, SkillIndex, Thresholds, decide
from services.shared.embeddings import (
    Embedder,
    EmbedderName,
    HashingEmbedder,
    TextEmbedding,
    Vectors,
    load_embedder,
)
from switchboard.common.v1 import common_pb2

REQUESTS = {
    "en": "Write the weekly status report for the mobile team",
    "fr": "Rédige le compte rendu de la réunion d'équipe de ce matin",
}
THRESHOLDS = Thresholds(high=0.6, low=0.3)


class CountingEmbedder:
    """An embedder that records every text it is asked to embed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name, self.dimension = inner.name, inner.dimension
        self.blocking, self.cross_lingual = inner.blocking, inner.cross_lingual
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.texts.extend(texts)
        return self.inner.embed(texts)


async def catalog_index(embedder: Embedder) -> SkillIndex:
    index = SkillIndex(embedder)
    await index.rebuild(
        [
            IndexedSkill(s["id"], s["name"], s["description"], s["body"], s["builtin"], s["auto_use"])
            for s in CATALOG
        ],
        revision=1,
    )
    return index


def from_memory(embedder: Embedder, text: str) -> TextEmbedding:
    """What memory's recall sends for ``text``, as the router reads it off the wire."""
    sent = TextEmbedding.of(embedder, text, embedder.embed([text])[0]).to_proto()
    received = TextEmbedding.from_proto(common_pb2.TextEmbedding.FromString(sent.SerializeToString()))
    assert received is not None
    return received


@pytest.mark.parametrize("language", ["en", "fr"])
async def test_a_fitting_embedding_is_used_instead_of_embedding_again(language: str) -> None:
    counting = CountingEmbedder(HashingEmbedder())
    index = await catalog_index(counting)
    text = REQUESTS[language]
    given = from_memory(HashingEmbedder(), text)
    counting.texts.clear()
    query = await index.embed_query(text, given)
    assert counting.texts == []
    assert np.array_equal(query[0], given.vector)


@pytest.mark.parametrize("differs", ["embedder", "dimension"])
async def test_another_embedders_vector_is_ignored(differs: str) -> None:
    counting = CountingEmbedder(HashingEmbedder())
    index = await catalog_index(counting)
    text = REQUESTS["en"]
    given = (
        # The router's own vector of the text, under another embedder's name.
        replace(from_memory(HashingEmbedder(), text), embedder=EmbedderName.USE_MULTILINGUAL.value)
        if differs == "embedder"
        else from_memory(HashingEmbedder(dimension=512), text)
    )
    counting.texts.clear()
    query = await index.embed_query(text, given)
    assert counting.texts == [text]
    assert np.array_equal(query[0], HashingEmbedder().embed([text])[0])


@pytest.mark.parametrize("language", ["en", "fr"])
async def test_an_embedding_of_other_text_is_ignored(language: str) -> None:
    """Memory embeds the whole message; the router matches a request that
    carries its material on its instruction alone, and embeds that itself."""
    counting = CountingEmbedder(HashingEmbedder())
    index = await catalog_index(counting)
    message = {
        "en": "Reply to this email: the weekly status report is late",
        "fr": "Réponds à ce courriel : le rapport hebdomadaire est en retard",
    }[language]
    parts = split_request(message)
    assert parts.instruction != message
    given = from_memory(HashingEmbedder(), message)
    counting.texts.clear()
    await index.embed_query(parts.instruction, given)
    assert counting.texts == [parts.instruction]


def test_an_unset_or_torn_message_is_no_embedding() -> None:
    assert TextEmbedding.from_proto(common_pb2.TextEmbedding()) is None
    torn = common_pb2.TextEmbedding(embedder="hashing", dimension=256, text_sha256="x", vector=b"\0" * 1023)
    assert TextEmbedding.from_proto(torn) is None


@pytest.mark.parametrize("embedder", [EmbedderName.HASHING.value, EmbedderName.USE_MULTILINGUAL.value])
@pytest.mark.parametrize("language", ["en", "fr"])
async def test_routing_is_identical_with_and_without_the_reuse(embedder: str, language: str) -> None:
    """Same candidates, same scores, same decision: the reused vector is the
    one the router would have computed."""
    loaded = load_embedder(embedder)
    index = await catalog_index(loaded)
    instruction = split_request(REQUESTS[language]).instruction
    embedded = await index.embed_query(instruction)
    reused = await index.embed_query(instruction, from_memory(loaded, instruction))
    fresh = index.candidates(instruction, embedded, SkillIndex.default_eligible)
    again = index.candidates(instruction, reused, SkillIndex.default_eligible)
    assert fresh and again == fresh
    assert [c.fused_score for c in again] == [c.fused_score for c in fresh]
    assert decide(again, THRESHOLDS) == decide(fresh, THRESHOLDS)
