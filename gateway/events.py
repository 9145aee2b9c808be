"""Run events as Server-Sent Events: `id:` is the run's event sequence (what a
client sends back as Last-Event-ID), `event:` the kind, `data:` JSON
(services.shared.api_json)."""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format

from gateway.enums import APPROVALS, RUN_REGIMES, RUN_STATUSES, SKILL_INVOCATIONS, SURFACES, json_name
from services.shared.api_json import event_json, event_kind
from services.shared.api_json import message_dict as message_dict
from switchboard.engine.v1 import engine_pb2


def to_sse(event: engine_pb2.RunEvent, encoded: str = "") -> dict[str, str]:
    """``encoded`` is the engine's JSON of the event (``event_json`` of its
    stream's response), relayed as is; an engine older than that field sends
    none, and the gateway encodes the event itself."""
    return {"id": str(event.sequence), "event": event_kind(event), "data": encoded or event_json(event)}


def run_json(run: engine_pb2.Run) -> dict[str, Any]:
    data = message_dict(run)
    data["status"] = json_name(RUN_STATUSES, run.status)
    data["surface"] = json_name(SURFACES, run.surface)
    for skill, use in zip(data.get("skills", []), run.skills, strict=True):
        skill["invocation"] = json_name(SKILL_INVOCATIONS, use.invocation)
    usage = data.pop("usage", {})
    data["tokens_in"] = int(usage.get("tokens_in", 0))
    data["tokens_out"] = int(usage.get("tokens_out", 0))
    # Decided on its proposal: "accepted" or "refused"; "" otherwise.
    data["approval"] = APPROVALS.name(run.approval)
    for layer in data.get("layers", []):
        layer["size_chars"] = int(layer.get("size_chars", 0))
        layer["size_tokens"] = int(layer.get("size_tokens", 0))
    # The Skill Router's record stays `router_decision`; the model's choice
    # is `model_decision` (an AskAgent run has only the latter).
    # Zero and empty values are left out of both, as they always were.
    decision = run.router_decision
    data["router_decision"] = json_format.MessageToDict(decision.skills, preserving_proto_field_name=True)
    data["model_decision"] = json_format.MessageToDict(decision.model, preserving_proto_field_name=True)
    data.setdefault("trigger_payload", {})  # a message: unset when the run had no trigger
    # Always there: every run has a regime, whatever else its request sent.
    context = data.setdefault("context", {"selections": []})
    context["regime"] = json_name(RUN_REGIMES, run.context.regime)
    return data
