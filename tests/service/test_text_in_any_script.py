"""Text in any script, emoji or mixed languages gets a decision from the
router and an answer from memory recall, never an error; blank and oversize
text are refused as before. The real multilingual embedder, through the
real stubs, on SQLite and PostgreSQL."""

from __future__ import annotations

import grpc

from services.memory.server import build_server as build_memory
from services.memory.settings import MemorySettings
from services.router.server import build_server as build_router
from services.router.settings import RouterSettings
from switchboard.memory.v1 import memory_pb2, memory_service_pb2_grpc
from switchboard.memory.v1 import memory_service_pb2 as mpb
from switchboard.router.v1 import router_pb2, router_service_pb2_grpc
from switchboard.router.v1 import router_service_pb2 as rpb
from tests.service.harness import as_user, expect_error, running

ALICE = as_user("alice")
TEXTS = [
    "会议纪要转换为行动项",
    "حوّل ملاحظات الاجتماع إلى مهام",
    "Составь повестку дня совещания",
    "ミーティングの議事録をまとめて",
    "🎉🚀🔥",
    "📊📈",
    "Rédige le weekly report 📊 pour l'équipe, please",
    "Turn les notes de réunion into action items, bitte schnell",
    "e\u0301te\u0301 de\u0301composé",
    "zero\u200bwidth\u200djoiner\ufeff",
    "\x07\x1b[31mcontrol\x7f",  # NUL is refused by the request guard, as before
    "...!!!???",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ℌ𝔢𝔩𝔩𝔬",
    "a" * 31_000,
]


async def test_the_router_decides_on_text_in_any_script(db_url: str) -> None:
    async with running(build_router, RouterSettings(port=0, database_url=db_url)) as (_, channel):
        stub = router_service_pb2_grpc.RouterServiceStub(channel)
        for text in TEXTS:
            response = await stub.RouteSkills(rpb.RouteSkillsRequest(text=text, offline=True), **ALICE)
            decision = response.decision
            assert decision.branch != router_pb2.ROUTE_BRANCH_UNSPECIFIED and decision.explanation, text
            assert all(0.0 <= c.fused_score <= 1.0 for c in decision.candidates), text
        # Across scripts, meaning still routes: Chinese "turn meeting minutes into action items".
        chinese = await stub.RouteSkills(rpb.RouteSkillsRequest(text=TEXTS[0], offline=True), **ALICE)
        assert chinese.decision.candidates[0].name == "meeting-notes-to-actions"
        for blank in ("", " \t\n"):
            await expect_error(
                stub.RouteSkills(rpb.RouteSkillsRequest(text=blank), **ALICE),
                grpc.StatusCode.INVALID_ARGUMENT,
                "ERROR_REASON_INVALID_ARGUMENT",
            )
        await expect_error(
            stub.RouteSkills(rpb.RouteSkillsRequest(text="é" * 32_001), **ALICE),
            grpc.StatusCode.INVALID_ARGUMENT,
            "ERROR_REASON_TOO_LARGE",
        )


async def test_memory_saves_and_recalls_text_in_any_script(db_url: str) -> None:
    async with running(build_memory, MemorySettings(port=0, database_url=db_url)) as (_, channel):
        stub = memory_service_pb2_grpc.MemoryServiceStub(channel)
        saved = []
        for i, text in enumerate(TEXTS[:-1]):
            note = memory_pb2.Note(project_id="personal", kind=1, title=f"note {i}", body=text)
            saved.append((await stub.CreateNote(mpb.CreateNoteRequest(note=note), **ALICE)).note.id)
        assert len(set(saved)) == len(saved)
        for text in TEXTS:
            for mode in (memory_pb2.RECALL_MODE_HYBRID, memory_pb2.RECALL_MODE_EMBEDDING):
                request = mpb.RecallNotesRequest(project_id="personal", query=text[:2000], limit=5, mode=mode)
                found = (await stub.RecallNotes(request, **ALICE)).notes
                assert len(found) <= 5 and all(r.note.id in saved for r in found), text
        # The Arabic request finds the Chinese note that says the same.
        request = mpb.RecallNotesRequest(
            project_id="personal", query=TEXTS[1], limit=1, mode=memory_pb2.RECALL_MODE_EMBEDDING
        )
        assert [r.note.id for r in (await stub.RecallNotes(request, **ALICE)).notes] in (
            [saved[0]],
            [saved[1]],
        )
