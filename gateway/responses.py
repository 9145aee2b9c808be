"""Response bodies: one pydantic model per route's JSON, so /openapi.json
describes every answer.

Most bodies are a proto message as `events.message_dict` prints it (proto
JSON with the proto field names; int64 as strings, enums by name, a
Timestamp as RFC 3339 text, an unset message or `optional` field absent),
then reshaped by the route (an enum shortened to `done`, a count turned
into a number, a JSON string parsed). `proto_model` derives the model from
the message's descriptor, so a field added to a proto appears here without
a copy; the reshaped fields are overridden by name.

The models are strict and forbid unknown fields: a body that strays from
its model is a 500 and a failing test, never a silent drop. Routes return
the body as a dict and declare `response_model`; the router drops the
fields a body left unset (`exclude_unset`), so an absent field stays absent
and the JSON clients receive is the dict the route built."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from pydantic import BaseModel, ConfigDict, Field, create_model
from sse_starlette import EventSourceResponse

from gateway import enums
from services.shared.enums import EnumNames
from switchboard.comments import COMMENTS
from switchboard.common.v1 import common_pb2
from switchboard.engine.v1 import engine_pb2, engine_service_pb2
from switchboard.memory.v1 import memory_pb2, pages_pb2, projects_pb2
from switchboard.router.v1 import router_pb2
from switchboard.threads.v1 import threads_pb2

STRICT = ConfigDict(strict=True, extra="forbid")


class Body(BaseModel):
    """A response body written here by hand (not derived from a proto)."""

    model_config = STRICT


class ErrorProblem(Body):
    """One problem of a request that failed validation."""

    field: str = Field(description="the query, path or body field, dotted; empty for the whole body")
    problem: str = Field(description="what is wrong with it, in English")


class ErrorDetail(Body):
    """What went wrong."""

    code: str = Field(
        description="the gRPC status name (NOT_FOUND, INVALID_ARGUMENT, FAILED_PRECONDITION...) "
        "or an HTTP-level one (PAYLOAD_TOO_LARGE, METHOD_NOT_ALLOWED)"
    )
    message: str = Field(description="for a person; a 5xx says no more than internal error")
    reason: str = Field(description='the service\'s ErrorInfo reason (ERROR_REASON_...), or ""')
    details: list[ErrorProblem] | None = Field(
        default=None, description="a request that failed validation (400): every problem"
    )
    retry_after_seconds: int | None = Field(
        default=None,
        description="a quota's refusal (429) that waiting lifts: "
        "whole seconds to wait, as the Retry-After header",
    )


class ErrorResponse(Body):
    """Every error body (gateway.errors)."""

    error: ErrorDetail = Field(description="the error")


def error_responses(model: type[BaseModel], shape: str) -> dict[int | str, dict[str, Any]]:
    """The 4XX and 5XX answers of a route whose errors are `model`."""
    return {
        "4XX": {"model": model, "description": f"The request cannot be served ({shape})"},
        "5XX": {"model": model, "description": f"A service or the run failed ({shape})"},
    }


ERROR_RESPONSES = error_responses(ErrorResponse, "docs/api.md, Errors")


class ApiRouter(APIRouter):
    """The router every module's routes hang on: a body keeps exactly the
    fields its route set (see the module's docstring), and every route
    documents the error body (instead of FastAPI's 422, which this API
    never sends: a request that fails validation is a 400)."""

    def add_api_route(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        kwargs["response_model_exclude_unset"] = True
        kwargs["responses"] = {**ERROR_RESPONSES, **(kwargs.get("responses") or {})}
        super().add_api_route(path, endpoint, **kwargs)


RUN_EVENTS = (
    "The run's events as Server-Sent Events (`id:` the event's sequence, `event:` its kind, "
    "`data:` one JSON object): run_started, step, skill_used, reasoning, action, delta, notice, "
    "proposal, final, error"
)


def event_stream(description: str, others: dict[int | str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The arguments of a route that answers Server-Sent Events: a 200
    `text/event-stream`, and the `others` statuses."""
    stream = {"schema": {"type": "string", "format": "event-stream"}}
    answers: dict[int | str, dict[str, Any]] = {
        200: {"content": {"text/event-stream": stream}, "description": description},
        **(others or {}),
    }
    return {"responses": answers, "response_model": None, "response_class": EventSourceResponse}


_SCALARS: dict[int, Any] = {
    FieldDescriptor.TYPE_DOUBLE: float,
    FieldDescriptor.TYPE_FLOAT: float,
    FieldDescriptor.TYPE_BOOL: bool,
    FieldDescriptor.TYPE_STRING: str,
    FieldDescriptor.TYPE_BYTES: str,  # base64
    FieldDescriptor.TYPE_ENUM: str,  # the value's name (RUN_STATUS_DONE)
    FieldDescriptor.TYPE_INT32: int,
    FieldDescriptor.TYPE_SINT32: int,
    FieldDescriptor.TYPE_SFIXED32: int,
    FieldDescriptor.TYPE_UINT32: int,
    FieldDescriptor.TYPE_FIXED32: int,
    # 64-bit integers are strings in proto JSON.
    FieldDescriptor.TYPE_INT64: str,
    FieldDescriptor.TYPE_SINT64: str,
    FieldDescriptor.TYPE_SFIXED64: str,
    FieldDescriptor.TYPE_UINT64: str,
    FieldDescriptor.TYPE_FIXED64: str,
}
_WELL_KNOWN: dict[str, tuple[Any, str]] = {
    "google.protobuf.Timestamp": (str, "RFC 3339 time, UTC (2026-01-31T12:00:00Z)"),
    "google.protobuf.Duration": (str, 'seconds with an "s" suffix ("90s", "1.500s")'),
    "google.protobuf.FieldMask": (str, "comma-separated field paths"),
    "google.protobuf.Struct": (dict[str, Any], "a JSON object"),
}
_DERIVED: dict[str, type[BaseModel]] = {}


def _described(*parts: str | None) -> str | None:
    """The parts that say something, joined: a proto comment, then what the
    HTTP body does differently."""
    text = " — ".join(part for part in parts if part)
    return text[:1].upper() + text[1:] or None


def _field_type(field: FieldDescriptor) -> tuple[Any, str]:
    if field.message_type is None:
        return _SCALARS[field.type], ""
    if field.message_type.GetOptions().map_entry:
        value_type, _ = _field_type(field.message_type.fields_by_name["value"])
        return dict[str, value_type], ""  # type: ignore[valid-type]
    if field.message_type.full_name in _WELL_KNOWN:
        return _WELL_KNOWN[field.message_type.full_name]
    return proto_model(field.message_type), ""


def proto_model(
    descriptor: Descriptor,
    name: str | None = None,
    *,
    drop: tuple[str, ...] = (),
    **overrides: Any,
) -> type[BaseModel]:
    """The model of `descriptor`'s message as message_dict prints it. A field
    without presence is required (message_dict always prints it); a message,
    oneof member or `optional` field is absent when unset. `drop` removes
    fields the route pops; each override is `name=(type, FieldInfo)` and
    replaces or adds a field. Without arguments the model is shared, named
    after the message."""
    shared = name is None and not drop and not overrides
    if shared and descriptor.full_name in _DERIVED:
        return _DERIVED[descriptor.full_name]
    fields: dict[str, Any] = {}
    for field in descriptor.fields:
        if field.name in drop:
            continue
        kind, note = _field_type(field)
        is_map = field.message_type is not None and field.message_type.GetOptions().map_entry
        if field.is_repeated and not is_map:
            kind = list[kind]  # type: ignore[valid-type]
        description = _described(COMMENTS.get(field.full_name), note)
        if field.has_presence:
            fields[field.name] = (kind, Field(default=None, description=description))
        else:
            fields[field.name] = (kind, Field(description=description))
    for field_name, (kind, info) in overrides.items():
        proto_field = descriptor.fields_by_name.get(field_name)
        comment = COMMENTS.get(proto_field.full_name) if proto_field is not None else None
        fields[field_name] = (
            kind,
            Field(default=info.default, description=_described(comment, info.description)),
        )
    model = create_model(
        name or descriptor.name, __config__=STRICT, __doc__=COMMENTS.get(descriptor.full_name), **fields
    )
    if shared:
        _DERIVED[descriptor.full_name] = model
    return model


def required(kind: Any, description: str) -> Any:
    """An override: a field every body of the model has."""
    return (kind, Field(description=description))


def optional(kind: Any, description: str) -> Any:
    """An override: a field some bodies of the model leave out."""
    return (kind, Field(default=None, description=description))


def _short(names: EnumNames[Any]) -> Any:
    """An override: an enum as the routes name it (gateway/enums.py)."""
    return required(str, enums.documented(names))


NEXT_PAGE = "opaque; pass it as page_token for the next page, empty on the last page"
NUMBER = "a JSON number (an int64 the gateway converts)"


# Conversations and their messages.
Conversation = proto_model(threads_pb2.Conversation.DESCRIPTOR)


class ConversationList(Body):
    """A page of the caller's conversations: pinned first, then the most recently active."""

    conversations: list[Conversation] = Field(description="the conversations of this page")  # type: ignore[valid-type]
    next_page_token: str = Field(description=NEXT_PAGE)


Entry = proto_model(
    threads_pb2.Entry.DESCRIPTOR,
    "Entry",
    role=_short(enums.ROLES),
    sequence=required(int, NUMBER),
)


class EntryPage(Body):
    """A page of a conversation's entries, in order."""

    entries: list[Entry] = Field(description="the entries of this page")  # type: ignore[valid-type]
    next_page_token: str = Field(description=NEXT_PAGE)
    previous_page_token: str = Field(description="opaque; the page before this one, empty on the first")


class AgentEntryPage(EntryPage):
    """A page of a view of an agent's live thread."""

    thread_id: str = Field(description='the agent\'s live thread; "" before its first ask')
    partial_view: bool = Field(description="the thread holds entries this view leaves out")


# Runs.
SkillUse = proto_model(
    engine_pb2.SkillUse.DESCRIPTOR,
    "RunSkillUse",
    invocation=_short(enums.SKILL_INVOCATIONS),
)
InstructionLayer = proto_model(
    engine_pb2.InstructionLayer.DESCRIPTOR,
    "RunInstructionLayer",
    size_chars=required(int, NUMBER),
    size_tokens=required(int, NUMBER),
)
RunContext = proto_model(
    engine_pb2.RunContext.DESCRIPTOR,
    "RunContext",
    regime=_short(enums.RUN_REGIMES),
)
Run = proto_model(
    engine_pb2.Run.DESCRIPTOR,
    "Run",
    drop=("usage",),
    status=_short(enums.RUN_STATUSES),
    surface=_short(enums.SURFACES),
    approval=required(str, 'lower case without its prefix: "accepted", "refused", or "" while undecided'),
    skills=required(list[SkillUse], ""),  # type: ignore[valid-type]
    layers=required(list[InstructionLayer], ""),  # type: ignore[valid-type]
    tokens_in=required(int, "input tokens the run's model calls used"),
    tokens_out=required(int, "output tokens the run's model calls produced"),
    router_decision=required(
        dict[str, Any], "the skill router's full decision record (SkillDecision); {} when none, as for an ask"
    ),
    model_decision=required(
        dict[str, Any],
        "the model router's choice (ModelDecision): model, reason, routed, fallback; {} before routing",
    ),
    trigger_payload=required(dict[str, Any], "{} for a run no trigger started"),
    context=required(RunContext, ""),
)


class RunList(Body):
    """A page of a conversation's runs, newest first."""

    runs: list[Run] = Field(description="the runs of this page")  # type: ignore[valid-type]
    next_page_token: str = Field(description=NEXT_PAGE)


class BackgroundRun(Body):
    """A run started without a stream (`"background": true`)."""

    run_id: str = Field(description="the run's id: GET /api/agent/runs/{run_id} follows it")
    status: str = Field(description='"running"')
    events: str = Field(description="the run's events route (Server-Sent Events, resumable)")


WebhookDelivery = proto_model(
    engine_service_pb2.WebhookDelivery.DESCRIPTOR,
    "WebhookDelivery",
    duration_ms=required(int, NUMBER),
)


class WebhookDeliveries(Body):
    """A run's webhook and every delivery attempt, oldest first."""

    webhook_url: str = Field(description='the webhook the run names; "" when none')
    webhook_id: str = Field(description='the `webhook-id` header of every attempt; "" before the run ends')
    state: str = Field(
        description='"pending" (attempts go on), "delivered", "failed" (retry time over), '
        'or "" (no webhook, or the run has not ended)'
    )
    deliveries: list[WebhookDelivery] = Field(description="the attempts, oldest first")  # type: ignore[valid-type]


class WebhookDefault(Body):
    """A conversation's or agent's default webhook."""

    webhook_url: str = Field(description='used by its runs that name none; "" when none')


class DisableAutoUseAction(Body):
    """The request that turns "Use automatically" off for the caller."""

    method: str = Field(description="PUT")
    path: str = Field(description="/api/agent/skills/{skill_id}/enablement")
    body: dict[str, Any] = Field(description='{"enabled": true, "auto_use": "off"}')


SkillFeedback = proto_model(router_pb2.SkillFeedback.DESCRIPTOR)


class SkillFeedbackResult(Body):
    """The recorded "this skill was not relevant", and what the page may offer next."""

    feedback: SkillFeedback = Field(description="the recorded feedback")  # type: ignore[valid-type]
    offer_disable_auto_use: bool = Field(description="the skill is still used automatically for the caller")
    disable_auto_use: DisableAutoUseAction | None = Field(
        default=None, description="present when offer_disable_auto_use is true"
    )


# Agents and their threads.
Agent = proto_model(
    threads_pb2.Agent.DESCRIPTOR,
    "Agent",
    injection_strategy=_short(enums.INJECTION_STRATEGIES),
)


class AgentList(Body):
    """A page of the registry's agents, by id."""

    agents: list[Agent] = Field(description="the agents of this page")  # type: ignore[valid-type]
    next_page_token: str = Field(description=NEXT_PAGE)


Segment = proto_model(
    threads_pb2.Segment.DESCRIPTOR,
    "Segment",
    first_sequence=required(int, NUMBER),
    last_sequence=required(int, NUMBER),
    entry_count=required(int, NUMBER),
    char_count=required(int, NUMBER),
    state=_short(enums.SEGMENT_STATES),
    handoff_state=_short(enums.HANDOFF_STATES),
)


class SegmentPage(Body):
    """A page of the segments of an agent's live thread, oldest first."""

    segments: list[Segment] = Field(description="the segments of this page")  # type: ignore[valid-type]
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


ImportedAgentThread = proto_model(
    threads_pb2.AgentThread.DESCRIPTOR,
    "ImportedAgentThread",
    last_sequence=required(int, NUMBER),
)


class AgentThreadImport(Body):
    """The imported thread."""

    thread: ImportedAgentThread = Field(description="the live thread, now holding the entries")  # type: ignore[valid-type]


# Catalog: models, skills, sources, suggested actions.
ModelOption = proto_model(
    router_pb2.ModelOption.DESCRIPTOR,
    "ModelOption",
    profile=required(str, _short(enums.MODEL_PROFILES)[1].description + '; "" for auto'),
    label=required(str, "what a menu shows"),
    context_window=optional(int, "absent for auto"),
)


class ModelList(Body):
    """What a model selector offers: auto first, then the configured models in order."""

    models: list[ModelOption] = Field(description="auto, then the configured models")  # type: ignore[valid-type]


Skill = proto_model(router_pb2.Skill.DESCRIPTOR, "Skill", drop=("body",))
# One skill's definition: with its instructions (what a run applies).
SkillDefinition = proto_model(router_pb2.Skill.DESCRIPTOR, "SkillDefinition")


class SkillList(Body):
    """A page of the skill catalog, by name, with the caller's enablement."""

    skills: list[Skill] = Field(description="the skills of this page (without their body)")  # type: ignore[valid-type]
    next_page_token: str = Field(description=NEXT_PAGE)


class SourceEntry(Body):
    """A source a conversation can allow."""

    kind: str = Field(description="workspace, connector or mcp")
    name: str = Field(description="its name in allowed_sources (workspace: workspace)")
    title: str = Field(description="what to show; the name when none is configured")
    checked: bool | None = Field(
        default=None, description="whether the conversation allows it; only with conversation_id"
    )


class SourceList(Body):
    """What the All-sources popover offers."""

    workspace: SourceEntry = Field(description="the workspace, always offered")
    connectors: list[SourceEntry] = Field(description="the connectors configured for the gateway")
    mcp_servers: list[SourceEntry] = Field(description="the MCP servers configured for the gateway")


class SuggestedAction(Body):
    """A prompt starter."""

    id: str = Field(description="stable id of the suggestion")
    label: str = Field(description="what the button shows, in the requested language")
    prompt: str = Field(description="what a click puts in the composer")


class SuggestedActions(Body):
    """Prompt starters for the page being edited, computed without a model call."""

    actions: list[SuggestedAction] = Field(description="2 to 4 suggestions")


# Notes.
Note = proto_model(
    memory_pb2.Note.DESCRIPTOR,
    "Note",
    kind=_short(enums.NOTE_KINDS),
    score=optional(float, "with q only: the recall score, higher is closer"),
)


class NoteList(Body):
    """A page of the caller's notes, newest first; with q, the recalled notes, best first."""

    notes: list[Note] = Field(description="the notes of this page")  # type: ignore[valid-type]
    next_page_token: str = Field(description=NEXT_PAGE)


class NoteSaved(Body):
    """The saved note."""

    note: Note = Field(description="the note written, or the one it was merged into")  # type: ignore[valid-type]
    outcome: str = Field(description="created, or merged (into a note it repeated)")


# Personal settings and instruction pages.
PersonalSettings = proto_model(
    memory_pb2.PersonalSettings.DESCRIPTOR,
    "PersonalSettings",
    chat_mode=required(str, "sidebar or floating (never saved: sidebar)"),
    avatar=required(dict[str, Any], "{} when unset"),
    default_model=required(str, 'a configured model id, or "auto" for Auto'),
    instruction_page_notice=required(str, "the warning the page shows next to the instruction page switch"),
)


class InstructionPageState(Body):
    """The caller's instruction pages and the active one."""

    instruction_page_ids: list[str] = Field(description="the caller's instruction pages, in order")
    active_instruction_page_id: str = Field(description='the one runs read; "" when none')


# Printed straight from the proto, unlike PageDetail: version is a string here.
ProtoPage = proto_model(pages_pb2.Page.DESCRIPTOR)


class InstructionPageAdded(InstructionPageState):
    """The page added to (or created in) the caller's instruction pages."""

    page: ProtoPage = Field(description="the page")  # type: ignore[valid-type]
    notice: str | None = Field(default=None, description="with a new page: the shared-page warning")


InstructionPage = proto_model(
    pages_pb2.InstructionPage.DESCRIPTOR,
    "InstructionPage",
    state=_short(enums.INSTRUCTION_PAGE_STATES),
    version=required(int, NUMBER),
)


class InstructionPageList(Body):
    """A page of the caller's instruction pages, each readable or not."""

    pages: list[InstructionPage] = Field(description="the instruction pages of this page of results")  # type: ignore[valid-type]
    active_instruction_page_id: str = Field(description='the one runs read; "" when none')
    next_page_token: str = Field(description=NEXT_PAGE)
    notice: str = Field(description="the shared-page warning")


InstructionTemplate = proto_model(pages_pb2.InstructionTemplate.DESCRIPTOR)


class InstructionTemplates(Body):
    """Templates for a new instruction page."""

    templates: list[InstructionTemplate] = Field(description="every template")  # type: ignore[valid-type]


# Pages and proposals.
_VERSIONS = {
    "version": optional(int, NUMBER),
    "restored_from_version": optional(int, NUMBER),
}
Page = proto_model(pages_pb2.Page.DESCRIPTOR, "PageDetail", **_VERSIONS)
PageVersion = proto_model(pages_pb2.PageVersion.DESCRIPTOR, "PageVersionDetail", **_VERSIONS)


class PageList(Body):
    """A page of the pages the caller can read, most recently updated first."""

    pages: list[Page] = Field(description="the pages of this page of results")  # type: ignore[valid-type]
    next_page_token: str = Field(description=NEXT_PAGE)


class PageVersionList(Body):
    """A page of a page's versions, newest first."""

    versions: list[PageVersion] = Field(description="the versions of this page of results")  # type: ignore[valid-type]
    next_page_token: str = Field(description=NEXT_PAGE)


DiffLine = proto_model(
    pages_pb2.DiffLine.DESCRIPTOR,
    "DiffLine",
    kind=_short(enums.DIFF_LINE_KINDS),
)
DiffHunk = proto_model(
    pages_pb2.DiffHunk.DESCRIPTOR,
    "DiffHunk",
    old_start=required(int, NUMBER),
    old_lines=required(int, NUMBER),
    new_start=required(int, NUMBER),
    new_lines=required(int, NUMBER),
    lines=required(list[DiffLine], ""),  # type: ignore[valid-type]
)
TextDiff = proto_model(
    pages_pb2.TextDiff.DESCRIPTOR,
    "TextDiff",
    added_lines=required(int, NUMBER),
    removed_lines=required(int, NUMBER),
    hunks=required(list[DiffHunk], ""),  # type: ignore[valid-type]
)
Proposal = proto_model(
    pages_pb2.Proposal.DESCRIPTOR,
    "Proposal",
    state=_short(enums.PROPOSAL_STATES),
    base_version=required(int, NUMBER),
    accepted_version=required(int, NUMBER),
    diff=required(TextDiff, ""),
    current_version=optional(int, "only while pending on a page that moved on: its version now"),
    base_to_current=optional(TextDiff, "with current_version: what changed since the base"),
    current_to_proposed=optional(TextDiff, "with current_version: what accepting now would change"),
)


class ProposalList(Body):
    """A page of the proposals the caller can see, newest first."""

    proposals: list[Proposal] = Field(description="the proposals of this page of results")  # type: ignore[valid-type]
    next_page_token: str = Field(description=NEXT_PAGE)


class ProposalDecided(Body):
    """A proposal after its owner's decision."""

    proposal: Proposal = Field(description="the proposal, accepted or refused")  # type: ignore[valid-type]
    page: Page | None = Field(default=None, description="after accept: the page with its new version")  # type: ignore[valid-type]


# Note proposals: an agent's note for a project's memory, for a member to review.
NoteProposal = proto_model(
    memory_pb2.NoteProposal.DESCRIPTOR,
    "NoteProposal",
    note=required(Note, "as the notes routes render a note; no id until accepted"),
    target_note=required(Note | None, "null for a new note"),
    diff=required(TextDiff, ""),
    state=_short(enums.NOTE_PROPOSAL_STATES),
)


class NoteProposalList(Body):
    """A page of a project's note proposals, newest first."""

    proposals: list[NoteProposal] = Field(description="the proposals of this page of results")  # type: ignore[valid-type]
    next_page_token: str = Field(description=NEXT_PAGE)


class NoteProposalDecided(Body):
    """A note proposal after a member's decision."""

    proposal: NoteProposal = Field(description="the proposal, accepted or refused")  # type: ignore[valid-type]
    note: Note | None = Field(  # type: ignore[valid-type]
        default=None, description="after accept: the note written, or the target note updated"
    )


# The project: context, import, live state.
ProjectContext = proto_model(memory_pb2.ProjectContext.DESCRIPTOR)
ImportItem = proto_model(
    memory_pb2.ImportItem.DESCRIPTOR,
    "ImportItem",
    outcome=_short(enums.IMPORT_OUTCOMES),
)


class ProjectImport(Body):
    """What the import did with each file."""

    items: list[ImportItem] = Field(description="one per file sent, in the order sent")  # type: ignore[valid-type]


LiveStateEntry = proto_model(memory_pb2.LiveStateEntry.DESCRIPTOR)


class LiveStateList(Body):
    """A page of the project's unexpired live state, by agent id."""

    entries: list[LiveStateEntry] = Field(description="the entries of this page")  # type: ignore[valid-type]
    next_page_token: str = Field(description=NEXT_PAGE)


# Projects and their members.
Project = proto_model(
    projects_pb2.Project.DESCRIPTOR,
    "Project",
    drop=("caller_role",),
    note_policy=_short(enums.NOTE_POLICIES),
    role=required(str, "the caller's role in it (caller_role): " + enums.documented(enums.PROJECT_ROLES)),
)


class ProjectList(Body):
    """A page of the caller's projects: the personal one first, then by id."""

    projects: list[Project] = Field(description="the projects of this page, each with the caller's role")  # type: ignore[valid-type]
    next_page_token: str = Field(description=NEXT_PAGE)


ProjectMember = proto_model(
    projects_pb2.ProjectMember.DESCRIPTOR,
    "ProjectMember",
    role=_short(enums.PROJECT_ROLES),
)


class ProjectMemberList(Body):
    """A page of a project's members, by user id."""

    members: list[ProjectMember] = Field(description="the members of this page")  # type: ignore[valid-type]
    next_page_token: str = Field(description=NEXT_PAGE)


# OpenAI-compatible routes (gateway.openai_compat): OpenAI's own shapes.
class OpenAIErrorDetail(Body):
    """What went wrong, as OpenAI's API says it."""

    message: str = Field(description="for a person")
    type: str = Field(
        description="invalid_request_error, authentication_error, not_found_error, server_error..."
    )
    param: str | None = Field(description="the request field at fault (messages, model...), or null")
    code: str | None = Field(description="a stable code (unknown_model, payload_too_large...), or null")


class OpenAIErrorResponse(Body):
    """Every error body of the /v1 routes, with this API's status codes."""

    error: OpenAIErrorDetail = Field(description="the error")


OPENAI_ERROR_RESPONSES = error_responses(OpenAIErrorResponse, "OpenAI's shape")


class OpenAIModel(Body):
    """A model a chat-completions request may name."""

    id: str = Field(description='"auto", a configured model id, or agent:<id> to ask an agent')
    object: str = Field(description='"model"')
    created: int = Field(description="always 0")
    owned_by: str = Field(description='the model\'s provider, or "switchboard"')


class OpenAIModelList(Body):
    """The models of GET /v1/models: auto, the configured ones, then one per agent."""

    object: str = Field(description='"list"')
    data: list[OpenAIModel] = Field(description="the models")


class CompletionUsage(Body):
    """The run's tokens (its final event)."""

    prompt_tokens: int = Field(description="input tokens of the run's model calls")
    completion_tokens: int = Field(description="output tokens of the run's model calls")
    total_tokens: int = Field(description="their sum")


class ChatCompletionMessage(Body):
    """The answer."""

    role: str = Field(description='"assistant"')
    content: str = Field(description="the whole answer")
    refusal: str | None = Field(description="always null")


class ChatCompletionChoice(Body):
    """The one choice (n is 1)."""

    index: int = Field(description="0")
    message: ChatCompletionMessage = Field(description="the answer")
    finish_reason: str = Field(description='"stop"')
    logprobs: dict[str, Any] | None = Field(description="always null")


class ChatCompletion(Body):
    """A run's answer as one chat.completion (stream false)."""

    id: str = Field(description="chatcmpl-<run id>")
    object: str = Field(description='"chat.completion"')
    created: int = Field(description="Unix seconds")
    model: str = Field(description="the model as requested")
    choices: list[ChatCompletionChoice] = Field(description="one choice")
    usage: CompletionUsage = Field(description="the run's tokens")


class ChatCompletionChunkChoice(Body):
    """The one choice of a chunk."""

    index: int = Field(description="0")
    delta: dict[str, str] = Field(
        description="role (first chunk), content (a piece of the answer) or reasoning_content; {} on the last"
    )
    finish_reason: str | None = Field(description='"stop" on the last chunk, else null')
    logprobs: dict[str, Any] | None = Field(description="always null")


class ChatCompletionChunk(Body):
    """One `data:` event of a streamed answer (stream true); the stream ends with `data: [DONE]`."""

    id: str = Field(description="chatcmpl-<run id>")
    object: str = Field(description='"chat.completion.chunk"')
    created: int = Field(description="Unix seconds")
    model: str = Field(description="the model as requested")
    choices: list[ChatCompletionChunkChoice] = Field(description="one choice; none in the usage chunk")
    usage: CompletionUsage | None = Field(
        default=None, description="only in the last chunk, with stream_options.include_usage"
    )


# Roles, agent members and the audit log.
class Me(Body):
    """Who the request's token is."""

    user: str = Field(description="the user the token acts for")
    role: str = Field(description="admin or user: admins write the skill catalog and any agent")


class AgentMembers(Body):
    """Who may ask an agent and read its thread."""

    agent_id: str = Field(description="the agent")
    owner: str = Field(description="its owner (a member, who cannot be removed)")
    members: list[str] = Field(description="every member's user id, the owner first")


AuditEvent = proto_model(common_pb2.AuditEvent.DESCRIPTOR, "AuditEvent")


class AuditPage(Body):
    """A page of the audit log, newest first: the skill catalog's, the
    agent registry's and the tokens file's events together."""

    events: list[AuditEvent] = Field(description="the events of this page, newest first")  # type: ignore[valid-type]
    next_page_token: str = Field(description=NEXT_PAGE)
