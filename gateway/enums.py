"""The contract's enums as the HTTP API names them: lower case without the
enum's prefix (``RUN_STATUS_WAITING_APPROVAL`` is ``"waiting_approval"``),
both ways, one table per enum built from the enum itself
(services.shared.enums.EnumNames), so a value added to a .proto is named
here at once and bodies, responses and the API docs agree. UNSPECIFIED's
name and ``json_name`` are services.shared.api_json's."""

from __future__ import annotations

from typing import Any

from services.shared.api_json import RUN_STATUSES as RUN_STATUSES
from services.shared.api_json import SKILL_INVOCATIONS as SKILL_INVOCATIONS
from services.shared.api_json import STEP_STATUSES as STEP_STATUSES
from services.shared.api_json import UNSPECIFIED as UNSPECIFIED
from services.shared.api_json import json_name as json_name
from services.shared.enums import EnumNames
from switchboard.engine.v1 import engine_pb2, engine_service_pb2
from switchboard.memory.v1 import memory_pb2, pages_pb2, projects_pb2
from switchboard.router.v1 import router_pb2, router_service_pb2
from switchboard.threads.v1 import threads_pb2

# Engine (run and step statuses, skill invocations: services.shared.api_json,
# which the engine's run events share).
SURFACES = EnumNames(engine_pb2.Surface)
# Who started a run: a person (user) or the engine's scheduler (autonomous).
RUN_REGIMES = EnumNames(engine_pb2.RunRegime)
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


def documented(names: EnumNames[Any]) -> str:
    """What the API docs say of such a field."""
    return "lower case without its prefix, one of: " + ", ".join((UNSPECIFIED, *names.names))
