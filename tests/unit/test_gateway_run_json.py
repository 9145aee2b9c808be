"""The HTTP run record keeps the Skill Router's record as `router_decision`
and the model's choice as `model_decision`, zero values left out, for a chat
run (both) and an ask (the model's only)."""

from __future__ import annotations

from gateway.responses import Run
from services.engine.models import AgentRun
from services.engine.runs import run_to_proto
from switchboard.engine.v1 import engine_pb2
from switchboard.router.v1 import router_pb2

MODEL = router_pb2.ModelOption(id="m1", provider="offline", model="switchboard-offline-fast")


def test_a_chat_run_has_both_decisions() -> None:
    run = engine_pb2.Run(id="r1", status=engine_pb2.RUN_STATUS_DONE)
    run.router_decision.skills.branch = router_pb2.ROUTE_BRANCH_HIGH
    run.router_decision.skills.candidates.add(skill_id="s1", name="meeting-notes", fused_score=0.5)
    run.router_decision.model.model.CopyFrom(MODEL)
    run.router_decision.model.routed = True
    record = Run.proto_dict(run)
    assert record["router_decision"] == {
        "branch": "ROUTE_BRANCH_HIGH",
        "candidates": [{"skill_id": "s1", "name": "meeting-notes", "fused_score": 0.5}],
    }
    assert record["model_decision"] == {
        "model": {"id": "m1", "provider": "offline", "model": "switchboard-offline-fast"},
        "routed": True,
    }


def test_an_ask_has_no_skill_decision() -> None:
    run = engine_pb2.Run(id="r2", surface=engine_pb2.SURFACE_AGENT)
    run.router_decision.model.model.CopyFrom(MODEL)
    run.router_decision.model.reason = "l'agent a son propre modèle"
    record = Run.proto_dict(run)
    assert record["router_decision"] == {}
    assert record["model_decision"]["reason"] == "l'agent a son propre modèle"
    assert "router_decision_json" not in record


def test_the_trigger_payload_is_an_object_from_store_to_record() -> None:
    # Stored as JSON text, carried as a Struct, shown as the object it was.
    stored = AgentRun(
        id="r3",
        user_id="u",
        trigger_id="hook-1",
        trigger_payload_json='{"event": "push", "commits": [{"id": "abc"}], "forced": false}',
    )
    run = run_to_proto(stored)
    assert run.HasField("trigger_payload")
    record = Run.proto_dict(run)
    assert record["trigger_payload"] == {"event": "push", "commits": [{"id": "abc"}], "forced": False}
    assert "trigger_payload_json" not in record
    # A run no trigger started: unset on the wire, {} in the record.
    plain = run_to_proto(AgentRun(id="r4", user_id="u"))
    assert not plain.HasField("trigger_payload")
    assert Run.proto_dict(plain)["trigger_payload"] == {}
