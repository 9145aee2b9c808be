"""Run events as Server-Sent Events: `id:` is the run's event sequence (what a
client sends back as Last-Event-ID), `event:` the kind, `data:` JSON
(services.shared.api_json)."""

from __future__ import annotations

from services.shared.api_json import event_json, event_kind
from services.shared.api_json import message_dict as message_dict
from switchboard.engine.v1 import engine_pb2


def to_sse(event: engine_pb2.RunEvent, encoded: str = "") -> dict[str, str]:
    """``encoded`` is the engine's JSON of the event (``event_json`` of its
    stream's response), relayed as is; an engine older than that field sends
    none, and the gateway encodes the event itself."""
    return {"id": str(event.sequence), "event": event_kind(event), "data": encoded or event_json(event)}
