"""Proto messages as the HTTP API's JSON shows them, and a run event as its
SSE ``data:`` carries it.

The one owner of a run event's JSON: the engine encodes each event once for
every stream that sends it (``event_json`` of StartRunResponse,
WatchRunResponse and AskAgentResponse), and the gateway relays that string as
is, encoding the proto itself only when an older engine sent none."""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import json_format

from services.shared.enums import EnumNames
from switchboard.engine.v1 import engine_pb2
from switchboard.memory.v1 import memory_pb2

# How a response names UNSPECIFIED, and a value this side does not know
# (sent by a newer service).
UNSPECIFIED = "unspecified"

# The enums a run event's JSON names.
RUN_STATUSES = EnumNames(engine_pb2.RunStatus)
STEP_STATUSES = EnumNames(engine_pb2.StepStatus)
SKILL_INVOCATIONS = EnumNames(engine_pb2.SkillInvocation)
LIVE_STATE_EVENT_TYPES = EnumNames(memory_pb2.LiveStateEventType)


def json_name(names: EnumNames[Any], number: int) -> str:
    """The name a response shows for ``number``."""
    return names.name(number, UNSPECIFIED)


def message_dict(message: Any) -> dict[str, Any]:
    return json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


def _usage(data: dict[str, Any]) -> None:
    """int64 fields are strings in proto JSON; token counts read better as numbers."""
    usage = data.get("usage")
    if isinstance(usage, dict):
        data["usage"] = {key: int(value) for key, value in usage.items()}


def event_kind(event: engine_pb2.RunEvent) -> str:
    """The SSE ``event:`` of a run event."""
    return event.WhichOneof("kind") or "unknown"


def event_data(event: engine_pb2.RunEvent) -> dict[str, Any]:
    kind = event_kind(event)
    # The most frequent kinds built directly: json_format's reflection costs
    # some 20 µs an event, and a run streams a delta per piece of its answer.
    # Same keys in the same order (the proto's fields), so the same JSON.
    if kind == "delta":
        return {"text": event.delta.text, "run_id": event.run_id, "sequence": event.sequence}
    if kind == "step":
        step = event.step
        status = json_name(STEP_STATUSES, step.status)
        return {
            "key": step.key,
            "label": step.label,
            "status": status,
            "run_id": event.run_id,
            "sequence": event.sequence,
        }
    data = message_dict(getattr(event, kind)) if kind != "unknown" else {}
    if kind == "step":
        data["status"] = json_name(STEP_STATUSES, event.step.status)
    if kind == "final":
        _usage(data)
        data["status"] = json_name(RUN_STATUSES, event.final.status)  # done | waiting_approval
    if kind == "live_state":
        data["type"] = json_name(LIVE_STATE_EVENT_TYPES, event.live_state.type)  # snapshot | set
    if kind == "skill_used":
        data = data.get("skill", {})
        data["invocation"] = json_name(SKILL_INVOCATIONS, event.skill_used.skill.invocation)
    data["run_id"] = event.run_id
    data["sequence"] = event.sequence
    return data


def event_json(event: engine_pb2.RunEvent) -> str:
    """The SSE ``data:`` of a run event."""
    return json.dumps(event_data(event), separators=(",", ":"))
