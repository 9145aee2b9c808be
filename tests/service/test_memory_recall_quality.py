"""Recall@5 on the labelled set (tests/fixtures/memory/recall_set.json) with
the real embedder (MiniLM): lexical only, embedding only, hybrid. The numbers
are in docs/memory.md, "Recall quality"."""

from __future__ import annotations

import json
from pathlib import Path

from services.memory.server import build_server
from services.memory.settings import MemorySettings
from services.shared.embeddings import EmbedderName
from switchboard.memory.v1 import memory_pb2, memory_service_pb2_grpc
from switchboard.memory.v1 import memory_service_pb2 as pb
from tests.service.harness import as_user, running

SET = json.loads((Path(__file__).parents[1] / "fixtures" / "memory" / "recall_set.json").read_text())
K = 5
# Measured: lexical 0.729, embedding 0.708, hybrid 0.771 (24 queries).
HYBRID_FLOOR = 0.75
TOLERANCE = 0.03


async def test_hybrid_recall_at_5_beats_each_half(db_url: str) -> None:
    settings = MemorySettings(port=0, database_url=db_url, embedder=EmbedderName.MINILM)
    async with running(build_server, settings) as (_, channel):
        stub = memory_service_pb2_grpc.MemoryServiceStub(channel)
        label = {}
        for n in SET["notes"]:
            note = memory_pb2.Note(
                project_id="set", kind=n["kind"], title=n["title"], body=n["body"], tags=n["tags"]
            )
            created = await stub.CreateNote(pb.CreateNoteRequest(note=note), **as_user("eval"))
            label[created.note.id] = n["id"]
        assert len(label) == len(SET["notes"])  # none refused as a duplicate

        async def recall_at_k(mode: memory_pb2.RecallMode.ValueType) -> float:
            total = 0.0
            for q in SET["queries"]:
                request = pb.RecallNotesRequest(project_id="set", query=q["query"], limit=K, mode=mode)
                found = {label[r.note.id] for r in (await stub.RecallNotes(request, **as_user("eval"))).notes}
                total += len(found & set(q["relevant"])) / len(q["relevant"])
            return total / len(SET["queries"])

        lexical = await recall_at_k(memory_pb2.RECALL_MODE_LEXICAL)
        embedding = await recall_at_k(memory_pb2.RECALL_MODE_EMBEDDING)
        hybrid = await recall_at_k(memory_pb2.RECALL_MODE_HYBRID)
        print(f"recall@{K}: lexical {lexical:.3f}, embedding {embedding:.3f}, hybrid {hybrid:.3f}")
        assert hybrid >= max(lexical, embedding) - TOLERANCE, (lexical, embedding, hybrid)
        assert hybrid >= HYBRID_FLOOR, (lexical, embedding, hybrid)
