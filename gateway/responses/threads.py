"""Conversations, their entries and runs, and agents with their threads."""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from pydantic import Field

from gateway import enums
from gateway.responses.base import NEXT_PAGE, Body
from gateway.responses.views import (
    ProtoView,
    computed,
    nested,
    number,
    printed_or,
    short,
)
from switchboard.engine.v1 import engine_pb2, engine_service_pb2
from switchboard.router.v1 import router_pb2
from switchboard.threads.v1 import threads_pb2


def _sparse(message: Message) -> dict[str, Any]:
    """Proto JSON without the zero and empty values."""
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


# Conversations and their messages.
class Conversation(ProtoView, proto=threads_pb2.Conversation):
    pass


class ConversationList(Body):
    """A page of the caller's conversations: pinned first, then the most recently active."""

    conversations: list[Conversation] = Field(description="the conversations of this page")
    next_page_token: str = Field(description=NEXT_PAGE)


class Entry(ProtoView, proto=threads_pb2.Entry):
    role: str = short(enums.ROLES)
    sequence: int = number()


class EntryPage(Body):
    """A page of a conversation's entries, in order."""

    entries: list[Entry] = Field(description="the entries of this page")
    next_page_token: str = Field(description=NEXT_PAGE)
    previous_page_token: str = Field(description="opaque; the page before this one, empty on the first")


class AgentEntryPage(EntryPage):
    """A page of a view of an agent's live thread."""

    thread_id: str = Field(description='the agent\'s live thread; "" before its first ask')
    partial_view: bool = Field(description="the thread holds entries this view leaves out")


# Runs.
class SkillUse(ProtoView, proto=engine_pb2.SkillUse, name="RunSkillUse"):
    invocation: str = short(enums.SKILL_INVOCATIONS)


class InstructionLayer(ProtoView, proto=engine_pb2.InstructionLayer, name="RunInstructionLayer"):
    size_chars: int = number()
    size_tokens: int = number()


class RunContext(ProtoView, proto=engine_pb2.RunContext):
    regime: str = short(enums.RUN_REGIMES)


class Run(ProtoView, proto=engine_pb2.Run, drop=("usage",)):
    status: str = short(enums.RUN_STATUSES)
    surface: str = short(enums.SURFACES)
    # Decided on its proposal: "accepted" or "refused"; "" otherwise.
    approval: str = computed(
        'lower case without its prefix: "accepted", "refused", or "" while undecided',
        lambda run: enums.APPROVALS.name(run.approval),
    )
    skills: list[SkillUse] = nested(SkillUse)
    layers: list[InstructionLayer] = nested(InstructionLayer)
    tokens_in: int = computed("input tokens the run's model calls used", lambda run: run.usage.tokens_in)
    tokens_out: int = computed(
        "output tokens the run's model calls produced", lambda run: run.usage.tokens_out
    )
    # The Skill Router's record stays `router_decision`; the model's choice
    # is `model_decision` (an AskAgent run has only the latter). Zero and
    # empty values are left out of both, as they always were.
    router_decision: dict[str, Any] = computed(
        "the skill router's full decision record (SkillDecision); {} when none, as for an ask",
        lambda run: _sparse(run.router_decision.skills),
    )
    model_decision: dict[str, Any] = computed(
        "the model router's choice (ModelDecision): model, reason, routed, fallback; {} before routing",
        lambda run: _sparse(run.router_decision.model),
    )
    # A message: unset when the run had no trigger.
    trigger_payload: dict[str, Any] = printed_or("{} for a run no trigger started", {})
    # Always there: every run has a regime, whatever else its request sent.
    context: RunContext = nested(RunContext)


class RunList(Body):
    """A page of a conversation's runs, newest first."""

    runs: list[Run] = Field(description="the runs of this page")
    next_page_token: str = Field(description=NEXT_PAGE)


class BackgroundRun(Body):
    """A run started without a stream (`"background": true`)."""

    run_id: str = Field(description="the run's id: GET /api/agent/runs/{run_id} follows it")
    status: str = Field(description='"running"')
    events: str = Field(description="the run's events route (Server-Sent Events, resumable)")


class WebhookDelivery(ProtoView, proto=engine_service_pb2.WebhookDelivery):
    duration_ms: int = number()


class WebhookDeliveries(Body):
    """A run's webhook and every delivery attempt, oldest first."""

    webhook_url: str = Field(description='the webhook the run names; "" when none')
    webhook_id: str = Field(description='the `webhook-id` header of every attempt; "" before the run ends')
    state: str = Field(
        description='"pending" (attempts go on), "delivered", "failed" (retry time over), '
        'or "" (no webhook, or the run has not ended)'
    )
    deliveries: list[WebhookDelivery] = Field(description="the attempts, oldest first")


class WebhookDefault(Body):
    """A conversation's or agent's default webhook."""

    webhook_url: str = Field(description='used by its runs that name none; "" when none')


class DisableAutoUseAction(Body):
    """The request that turns "Use automatically" off for the caller."""

    method: str = Field(description="PUT")
    path: str = Field(description="/api/agent/skills/{skill_id}/enablement")
    body: dict[str, Any] = Field(description='{"enabled": true, "auto_use": "off"}')


class SkillFeedback(ProtoView, proto=router_pb2.SkillFeedback):
    pass


class SkillFeedbackResult(Body):
    """The recorded "this skill was not relevant", and what the page may offer next."""

    feedback: SkillFeedback = Field(description="the recorded feedback")
    offer_disable_auto_use: bool = Field(description="the skill is still used automatically for the caller")
    disable_auto_use: DisableAutoUseAction | None = Field(
        default=None, description="present when offer_disable_auto_use is true"
    )


# Agents and their threads.
class Agent(ProtoView, proto=threads_pb2.Agent):
    injection_strategy: str = short(enums.INJECTION_STRATEGIES)


class AgentList(Body):
    """A page of the registry's agents, by id."""

    agents: list[Agent] = Field(description="the agents of this page")
    next_page_token: str = Field(description=NEXT_PAGE)


class Segment(ProtoView, proto=threads_pb2.Segment):
    first_sequence: int = number()
    last_sequence: int = number()
    entry_count: int = number()
    char_count: int = number()
    state: str = short(enums.SEGMENT_STATES)
    handoff_state: str = short(enums.HANDOFF_STATES)


class SegmentPage(Body):
    """A page of the segments of an agent's live thread, oldest first."""

    segments: list[Segment] = Field(description="the segments of this page")
    thread_id: str = Field(description='the agent\'s live thread; "" before its first ask')
    next_page_token: str = Field(description=NEXT_PAGE)


class ThreadFile(Body):
    """One file of an exported agent thread."""

    path: str = Field(description="agents/<id>/log.jsonl, log.N.jsonl, handoff.md or providers.json")
    content: str = Field(description="its whole text")


class AgentThreadExport(Body):
    """An agent's live thread as files (POST /agents/import takes them back)."""

    agent_id: str = Field(description="the agent exported")
    files: list[ThreadFile] = Field(
        description="the closed segments' logs, the open log, handoff.md, providers.json"
    )


class ImportedAgentThread(ProtoView, proto=threads_pb2.AgentThread):
    last_sequence: int = number()


class AgentThreadImport(Body):
    """The imported thread."""

    thread: ImportedAgentThread = Field(description="the live thread, now holding the entries")
