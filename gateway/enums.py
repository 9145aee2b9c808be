"""The contract's enums as the HTTP API names them: lower case without the
enum's prefix (``RUN_STATUS_WAITING_APPROVAL`` is ``"waiting_approval"``),
both ways, one table per enum built from the enum itself
(services.shared.enums.EnumNames), so a value added to a .proto is named
here at once and bodies, responses and the API docs agree."""

from __future__ import annotations

from typing import Any

from services.shared.enums import EnumNames
from switchboard.engine.v1 import engine_pb2, engine_service_pb2
from switchboard.memory.v1 import memory_pb2, pages_pb2, projects_pb2
from switchboard.router.v1 import router_pb2, router_service_pb2
from switchboard.threads.v1 import threads_pb2

# How a response names UNSPECIFIED, and a value this gateway does not know
# (sent by a newer service).
UNSPECIFIED = "unspecified"

# Engine.
RUN_STATUSES = EnumNames(engine_pb2.RunStatus)
STEP_STATUSES = EnumNames(engine_pb2.StepStatus)
SURFACES = EnumNames(engine_pb2.Surface)
# Who started a run: a person (user) or the engine's scheduler (autonomous).
RUN_REGIMES = EnumNames(engine_pb2.RunRegime)
SKILL_INVOCATIONS = EnumNames(engine_pb2.SkillInvocation)
APPROVALS = EnumNames(engine_pb2.ApprovalDecision)
BUSY_POLICIES = EnumNames(engine_service_pb2.BusyPolicy)
# A run's webhook delivery ("" while there is nothing to deliver yet).
DELIVERY_STATES = EnumNames(engine_service_pb2.WebhookDeliveryState)
# Threads.
ROLES = EnumNames(threads_pb2.Role)
INJECTION_STRATEGIES = EnumNames(threads_pb2.InjectionStrategy)
SEGMENT_STATES = EnumNames(threads_pb2.SegmentState)
HANDOFF_STATES = EnumNames(threads_pb2.HandoffState)
# Memory.
NOTE_KINDS = EnumNames(memory_pb2.NoteKind)
SAVE_OUTCOMES = EnumNames(memory_pb2.SaveOutcome)
IMPORT_OUTCOMES = EnumNames(memory_pb2.ImportOutcome)
LIVE_STATE_EVENT_TYPES = EnumNames(memory_pb2.LiveStateEventType)
LIVE_STATE_REMOVALS = EnumNames(memory_pb2.LiveStateRemoval)
CHAT_MODES = EnumNames(memory_pb2.ChatMode)
DIFF_LINE_KINDS = EnumNames(pages_pb2.DiffLineKind)
# No state ("") in a request is UNSPECIFIED: proposals in any state.
PROPOSAL_STATES = EnumNames(pages_pb2.ProposalState)
# A note proposal's state; none in a request: every state.
NOTE_PROPOSAL_STATES = EnumNames(memory_pb2.NoteProposalState)
INSTRUCTION_PAGE_STATES = EnumNames(pages_pb2.InstructionPageState)
# A caller's role in a project: viewer, editor, owner.
PROJECT_ROLES = EnumNames(projects_pb2.ProjectRole)
# No note_policy in a body is UNSPECIFIED: review on create, unchanged on update.
NOTE_POLICIES = EnumNames(projects_pb2.NotePolicy)
# Router.
MODEL_PROFILES = EnumNames(router_pb2.ModelProfile)
# No auto_use in a body is UNSPECIFIED: the enablement's override is kept.
AUTO_USE = EnumNames(router_service_pb2.AutoUseOverride)


def json_name(names: EnumNames[Any], number: int) -> str:
    """The name a response shows for ``number``."""
    return names.name(number, UNSPECIFIED)


def documented(names: EnumNames[Any]) -> str:
    """What the API docs say of such a field."""
    return "lower case without its prefix, one of: " + ", ".join((UNSPECIFIED, *names.names))
