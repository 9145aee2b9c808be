"""Run events as Server-Sent Events: `id:` is the run's event sequence (what a
client sends back as Last-Event-ID), `event:` the kind, `data:` JSON."""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import json_format

from gateway.enums import (
    APPROVALS,
    RUN_REGIMES,
    RUN_STATUSES,
    SKILL_INVOCATIONS,
    STEP_STATUSES,
    SURFACES,
    json_name,
)
from switchboard.engine.v1 import engine_pb2


def message_dict(message: Any) -> dict[str, Any]:
    return json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


def _usage(data: dict[str, Any]) -> None:
    """int64 fields are strings in proto JSON; token counts read better as numbers."""
    usage = data.get("usage")
    if isinstance(usage, dict):
        data["usage"] = {key: int(value) for key, value in usage.items()}


def event_data(event: engine_pb2.RunEvent) -> tuple[str, dict[str, Any]]:
    kind = event.WhichOneof("kind") or "unknown"
    data = message_dict(getattr(event, kind)) if kind != "unknown" else {}
    if kind == "step":
        data["status"] = json_name(STEP_STATUSES, event.step.status)
    if kind == "final":
        _usage(data)
        data["status"] = json_name(RUN_STATUSES, event.final.status)  # done | waiting_approval
    if kind == "skill_used":
        data = data.get("skill", {})
        data["invocation"] = json_name(SKILL_INVOCATIONS, event.skill_used.skill.invocation)
    data["run_id"] = event.run_id
    data["sequence"] = event.sequence
    return kind, data


def to_sse(event: engine_pb2.RunEvent) -> dict[str, str]:
    kind, data = event_data(event)
    return {"id": str(event.sequence), "event": kind, "data": json.dumps(data, separators=(",", ":"))}


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
