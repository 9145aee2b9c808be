"""The shared hybrid-search blocks: embedders, the vector index, RRF."""

from __future__ import annotations

import numpy as np
import pytest

from services.shared.embeddings import HashingEmbedder, load_embedder
from services.shared.search import RRF_K, VectorIndex, rrf_fuse, rrf_max


def test_hashing_embedder_is_deterministic_normalised_and_accent_insensitive() -> None:
    embedder = HashingEmbedder()
    rows = embedder.embed(["Compte rendu de réunion", "compte rendu de reunion", "weekly status report"])
    assert rows.shape == (3, embedder.dimension) and rows.dtype == np.float32
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    assert np.allclose(rows[0], rows[1])  # accents and case folded
    assert float(rows[0] @ rows[2]) < 0.3
    assert np.array_equal(embedder.embed(["weekly status report"])[0], rows[2])


def test_hashing_embedder_shares_trigrams_across_inflections() -> None:
    embedder = HashingEmbedder()
    meeting, meetings, invoice = embedder.embed(["réunion", "réunions", "facture"])
    assert float(meeting @ meetings) > 0.5 > float(meeting @ invoice)


def test_an_empty_text_embeds_to_zeros_without_dividing_by_zero() -> None:
    row = HashingEmbedder().embed([""])[0]
    assert not np.isnan(row).any() and float(np.abs(row).sum()) == 0.0


def test_load_embedder_refuses_unknown_names_and_caches() -> None:
    assert load_embedder("hashing") is load_embedder("hashing")
    with pytest.raises(ValueError):
        load_embedder("word2vec")


def test_rrf_adds_reciprocal_ranks_and_rescales_to_one() -> None:
    fused = rrf_fuse([["a", "b", "c"], ["b", "a"]])
    assert fused["a"] == pytest.approx(1 / (RRF_K + 1) + 1 / (RRF_K + 2))
    assert fused["a"] == pytest.approx(fused["b"])
    assert fused["c"] == pytest.approx(1 / (RRF_K + 3))
    assert rrf_fuse([["x"], ["x"]])["x"] / rrf_max(2) == pytest.approx(1.0)


def test_vector_index_returns_the_nearest_first() -> None:
    embedder = HashingEmbedder()
    texts = ["meeting notes to action items", "translate a text", "weekly status report", "draft an email"]
    index = VectorIndex(texts, embedder.embed(texts))
    query = embedder.embed(["turn my meeting notes into action items"])
    best = index.search(query, 2)
    assert best[0][0] == "meeting notes to action items"
    assert len(best) == 2 and best[0][1] >= best[1][1]
    assert [key for key, _ in index.search(query, 10)][0] == best[0][0]  # top > size
    assert index.scores(query)["meeting notes to action items"] == pytest.approx(best[0][1])
    assert VectorIndex([], embedder.embed([])).search(query, 3) == []


def test_minilm_embeds_meaning_not_spelling() -> None:
    """The real model (loads in a few seconds, once per process): a paraphrase
    with no shared content word is nearer than an unrelated sentence."""
    model = load_embedder("minilm")
    request, paraphrase, unrelated = model.embed(
        ["summarise this long document", "give me a short overview of the text", "book a flight to Paris"]
    )
    assert model.dimension == 384
    assert float(request @ paraphrase) > float(request @ unrelated) + 0.2


def test_minilm_on_onnx_runtime_matches_sentence_transformers() -> None:
    """The ONNX Runtime path gives the embeddings the model's own library gives."""
    from sentence_transformers import SentenceTransformer

    from services.shared.embeddings import minilm_model_dir

    texts = ["Transforme mes notes de réunion en actions", "weekly status report", "a", "x " * 400]
    ours = load_embedder("minilm").embed(texts)
    reference = SentenceTransformer(str(minilm_model_dir()), device="cpu").encode(
        texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    assert np.allclose((ours * reference).sum(axis=1), 1.0, atol=1e-4)
