"""The labelled router fixture through the real service (the default
multilingual embedder, shipped thresholds, offline), on SQLite and
PostgreSQL: the fixture's own one-language skills are created through
CreateSkill, every request goes through RouteSkills, and precision and
recall in each language reach the floors docs/router.md states, the same
figures as the fit's (tests/unit/test_skill_fixture.py)."""

from __future__ import annotations

import json
from pathlib import Path

from services.router import fit
from services.router.server import build_server
from services.router.settings import RouterSettings
from switchboard.router.v1 import router_pb2, router_service_pb2_grpc
from switchboard.router.v1 import router_service_pb2 as pb
from tests.service.harness import as_admin, as_user, running

FIXTURE = Path(__file__).parents[1] / "fixtures/router/skill_requests.json"
ALICE = as_user("alice")
ADMIN = as_admin("alice")  # catalog writes are for admins


async def test_fixture_precision_and_recall_per_language_through_the_service(db_url: str) -> None:
    settings = RouterSettings(port=0, database_url=db_url)
    async with running(build_server, settings) as (_, channel):
        stub = router_service_pb2_grpc.RouterServiceStub(channel)
        for skill in json.loads(FIXTURE.read_text())["skills"]:
            new = router_pb2.Skill(name=skill["name"], description=skill["description"], body=skill["body"])
            new.auto_use = True
            await stub.CreateSkill(pb.CreateSkillRequest(skill=new), **ADMIN)
        counts: dict[str, list[int]] = {}  # language -> [true positives, false positives, missed]
        for request in fit.load_fixture(FIXTURE):
            response = await stub.RouteSkills(pb.RouteSkillsRequest(text=request.text, offline=True), **ALICE)
            assert response.decision.embedder == settings.embedder.value, response.decision.explanation
            applied = [s.name for s in response.skills]
            tally = counts.setdefault(request.lang, [0, 0, 0])
            hit = request.expected is not None and request.expected in applied
            tally[0] += hit
            tally[1] += len(applied) - hit
            tally[2] += request.expected is not None and not hit
            if request.kind == "none":
                assert applied == [], (request.text, response.decision.explanation)
    assert set(counts) == {"en", "fr"}
    for lang, (tp, fp, fn) in counts.items():
        precision, recall = tp / (tp + fp), tp / (tp + fn)
        print(f"{lang}: precision {precision:.3f} recall {recall:.3f} (tp={tp} fp={fp} fn={fn})")
        assert precision >= 0.9 and recall >= 0.85, (lang, tp, fp, fn)
