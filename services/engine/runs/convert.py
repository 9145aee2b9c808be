"""A stored run as the contract's ``Run`` message."""

from __future__ import annotations

import json

from google.protobuf import json_format

from services.engine.models import AgentRun
from services.engine.runs import run_context
from services.engine.runs.outcome import STATUSES
from services.shared.enums import EnumNames
from switchboard.engine.v1 import engine_pb2

# Stored as "chat", "editor", "agent"; "accepted", "refused" ("" undecided).
SURFACES = EnumNames(engine_pb2.Surface)
APPROVALS = EnumNames(engine_pb2.ApprovalDecision)


def run_to_proto(run: AgentRun) -> engine_pb2.Run:
    proto = engine_pb2.Run(
        id=run.id,
        agent_id=run.agent_id or "",
        user_id=run.user_id,
        conversation_id=run.conversation_id or "",
        parent_run_id=run.parent_run_id or "",
        surface=SURFACES.number(run.surface),
        trigger_id=run.trigger_id or "",
        status=STATUSES.number(run.status),
        provider=run.provider or "",
        model=run.model or "",
        credits=run.credits,
        error=run.error or "",
        request_id=run.request_id or "",
        requested_model=run.requested_model,
        approval=APPROVALS.number(run.approval),
        webhook_url=run.webhook_url or "",
        language=run.language,
        correlation_id=run.correlation_id or "",
    )
    payload = json.loads(run.trigger_payload_json or "{}")
    if payload:  # no trigger: the field stays unset
        proto.trigger_payload.update(payload)
    json_format.Parse(run.router_decision_json, proto.router_decision, ignore_unknown_fields=True)
    proto.context.CopyFrom(run_context.from_json(run.run_context_json, proto.surface))
    proto.usage.tokens_in = run.tokens_in
    proto.usage.tokens_out = run.tokens_out
    for skill in json.loads(run.skills_json):
        json_format.ParseDict(skill, proto.skills.add())
    for source in json.loads(run.sources_json):
        json_format.ParseDict(source, proto.sources.add())
    for layer in json.loads(run.layers_json):
        json_format.ParseDict(layer, proto.layers.add())
    proto.start_time.FromDatetime(run.started_at)
    if run.finished_at is not None:
        proto.finish_time.FromDatetime(run.finished_at)
    return proto
