"""`python -m services.router export-feedback`: "not relevant" feedback
recorded through the RPC becomes counter-examples of the labelled fixture,
once each, and the fixture still loads for fit-thresholds."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from services.router.fit import load_fixture
from services.router.server import build_server
from services.router.settings import RouterSettings
from switchboard.router.v1 import router_service_pb2 as pb
from switchboard.router.v1 import router_service_pb2_grpc
from tests.conftest import DatabaseFactory
from tests.service.harness import as_user, running

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "router" / "skill_requests.json"


def export(url: str, fixture: Path) -> str:
    env = {**os.environ, "SWITCHBOARD_ROUTER_DATABASE_URL": url}
    done = subprocess.run(
        [sys.executable, "-m", "services.router", "export-feedback", "--fixture", str(fixture)],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_feedback_is_appended_to_the_fixture_once(
    make_database: DatabaseFactory, tmp_path: Path
) -> None:
    fixture = tmp_path / "skill_requests.json"
    shutil.copy(FIXTURE, fixture)
    before = len(json.loads(fixture.read_text())["requests"])
    async with make_database("router") as url:
        settings = RouterSettings(port=0, database_url=url, embedder="hashing")
        async with running(build_server, settings) as (_, channel):
            stub = router_service_pb2_grpc.RouterServiceStub(channel)
            skills = {
                s.name: s.id
                for s in (await stub.ListSkills(pb.ListSkillsRequest(page_size=100), **as_user("a"))).skills
            }
            skill = skills["weekly-status-report"]
            text = "Résume la réunion d'hier en trois lignes"
            for user, request_id in (
                ("alice", "f1"),
                ("alice", "f2"),
                ("bob", "f3"),
            ):  # same text and skill thrice
                request = pb.CreateSkillFeedbackRequest(
                    request_id=request_id, skill_id=skill, request_text=text
                )
                await stub.CreateSkillFeedback(request, **as_user(user))
            other = pb.CreateSkillFeedbackRequest(
                request_id="f4", skill_id=skills["email-reply-draft"], request_text="Hi"
            )
            await stub.CreateSkillFeedback(other, **as_user("alice"))
        assert "2 new counter-examples" in export(url, fixture)
        assert "0 new counter-examples" in export(url, fixture)  # idempotent
    requests = json.loads(fixture.read_text())["requests"]
    assert len(requests) == before + 2
    assert {
        "kind": "counter",
        "lang": "",
        "text": text,
        "expected": None,
        "rejected": "weekly-status-report",
    } in requests
    counters = [r for r in load_fixture(fixture) if r.kind == "counter"]
    assert {r.rejected for r in counters} >= {"weekly-status-report", "email-reply-draft"}
