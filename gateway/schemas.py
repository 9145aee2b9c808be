"""Request bodies, validated before any RPC (a bad body never reaches a service)."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from services.shared import run_context
from services.shared.language import MAX_TAG_CHARS, TAG
from services.shared.projects import MAX_PROJECT_ID_CHARS, PROJECT_ID

# A project's id as bodies take it (services.shared.projects): letters,
# digits, ".", "_" and "-", 1 to 128 characters.
PROJECT_ID_PATTERN = PROJECT_ID.pattern
# A BCP 47 language tag ("en", "fr", "fr-CA"), or "".
LANGUAGE_TAG_PATTERN = f"^$|{TAG.pattern}"


def _finite(value: Any) -> bool:
    """Whether every number in a JSON value is finite (NaN and infinity, which
    Python's JSON reader accepts, are no JSON numbers and no Struct values)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(item) for item in value.values())
    if isinstance(value, list):
        return all(_finite(item) for item in value)
    return True


class AllowedSourcesBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workspace: bool = True
    connectors: list[str] = Field(default_factory=list, max_length=100)
    mcp_servers: list[str] = Field(default_factory=list, max_length=100)
    # Durable memory recall for this conversation's runs.
    memory: bool = True


class SourcesUpdateBody(BaseModel):
    """Only the fields present are written; the others keep their value
    (turning a connector on keeps memory off)."""

    model_config = ConfigDict(extra="forbid")

    workspace: bool | None = None
    connectors: list[str] | None = Field(default=None, max_length=100)
    mcp_servers: list[str] | None = Field(default=None, max_length=100)
    # Durable memory recall for this conversation's runs.
    memory: bool | None = None


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


class CurrentPageBody(BaseModel):
    """The page the user is on, as the page names it."""

    model_config = ConfigDict(extra="forbid")

    id: Annotated[str, Field(max_length=run_context.MAX_PAGE_ID_CHARS), AfterValidator(_not_blank)]
    title: str = Field(default="", max_length=run_context.MAX_PAGE_TITLE_CHARS)
    # "chat", "page", "meeting_notes", "database", "email", "skill", ...
    type: str = Field(pattern=run_context.PAGE_TYPE.pattern)


class SelectedBlockBody(BaseModel):
    """One block of text the user selected on the page."""

    model_config = ConfigDict(extra="forbid")

    text: Annotated[str, Field(max_length=run_context.MAX_SELECTION_CHARS), AfterValidator(_not_blank)]
    block_id: str = Field(default="", max_length=run_context.MAX_BLOCK_ID_CHARS)


class RunContextBody(BaseModel):
    """What the user is working on: sent to the model as a layer of its own,
    the selected text as content to work on, never as instructions."""

    model_config = ConfigDict(extra="forbid")

    page: CurrentPageBody | None = None
    selections: list[SelectedBlockBody] = Field(default_factory=list, max_length=run_context.MAX_SELECTIONS)

    @model_validator(mode="after")
    def _selections_within_their_total(self) -> RunContextBody:
        total = sum(len(block.text) for block in self.selections)
        if total > run_context.MAX_SELECTIONS_TOTAL_CHARS:
            raise ValueError(
                f"the selections hold {total} characters; at most "
                f"{run_context.MAX_SELECTIONS_TOTAL_CHARS} in all"
            )
        return self


class CreateConversationBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(default="", max_length=200)
    allowed_sources: AllowedSourcesBody | None = None
    request_id: str = Field(default="", max_length=128)


class UpdateConversationBody(BaseModel):
    """Only the fields present are changed. Renaming makes the title manual:
    automatic titling never overwrites it afterwards."""

    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(default=None, min_length=1, max_length=200)
    pinned: bool | None = None


class MessageBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Length is checked by the route (413 rather than 400 beyond the limit).
    message: str = Field(min_length=1)
    # "" = the user's default model (personal settings; Auto when unset),
    # "auto" = let the model router choose, otherwise a configured model id.
    model: str = Field(default="", max_length=100)
    forced_skills: list[str] = Field(default_factory=list, max_length=10)
    # Idempotency key: a retried POST streams the same run.
    request_id: str = Field(default="", max_length=128)
    # When a run is already active on the conversation: wait for it (queue),
    # refuse with 409 (reject), or cancel it (interrupt).
    busy_policy: Literal["queue", "reject", "interrupt"] = "queue"
    # Where the run's record is POSTed once it ends (signed, retried; see
    # docs/operations.md, "Webhooks"); "" = none. The engine checks it.
    webhook_url: str = Field(default="", max_length=2048)
    # Do not stream: answer 202 with the run's id at once; the run goes on
    # and is followed with GET /runs/{id}, its events route or the webhook.
    background: bool = False
    # The project whose durable notes, context and live state the run reads;
    # "" = the user's personal project. 404 when the user is not a member.
    project_id: str = Field(default="", max_length=MAX_PROJECT_ID_CHARS, pattern=f"^$|{PROJECT_ID_PATTERN}")
    # The page the user is on and the blocks they selected; the run's
    # regime is always `user` (a person sent this message).
    context: RunContextBody | None = None
    # The language of the texts the run writes (notices, proposals, refusals,
    # the title): a BCP 47 tag, "en" or "fr" (the page sends its own). ""
    # = the request's Accept-Language, else the language of the message.
    language: str = Field(default="", max_length=MAX_TAG_CHARS, pattern=LANGUAGE_TAG_PATTERN)


class WebhookDefaultBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # The default webhook of a conversation's or agent's runs; "" removes it.
    webhook_url: str = Field(max_length=2048)


class PersonalSettingsBody(BaseModel):
    """Only the fields present are written; the others keep their value."""

    model_config = ConfigDict(extra="forbid")

    display_name: str | None = Field(default=None, max_length=100)
    # Avatar and accessories, a JSON object of the page's own shape.
    avatar: dict[str, Any] | None = None
    chat_mode: Literal["sidebar", "floating"] | None = None
    # "" or "auto" = Auto; otherwise a configured model id (GET /models).
    default_model: str | None = Field(default=None, max_length=100)

    @field_validator("avatar")
    @classmethod
    def _avatar_numbers_are_finite(cls, avatar: dict[str, Any] | None) -> dict[str, Any] | None:
        if avatar is not None and not _finite(avatar):
            raise ValueError("the avatar's numbers must be finite (no NaN or Infinity)")
        return avatar


class InstructionPageBody(BaseModel):
    """Either page_id (an existing page the caller can read) or a template
    (template_id, "" = the default one) for a new private page."""

    model_config = ConfigDict(extra="forbid")

    page_id: str = Field(default="", max_length=128)
    template_id: str = Field(default="", max_length=128)
    title: str = Field(default="", max_length=200)
    make_active: bool = True
    request_id: str = Field(default="", max_length=128)

    @model_validator(mode="after")
    def _one_source(self) -> InstructionPageBody:
        if self.page_id and (self.template_id or self.title):
            raise ValueError("give page_id, or template_id/title for a new page, not both")
        return self


class ActivePageBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    page_id: str = Field(min_length=1, max_length=128)


class DecisionBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(default="", max_length=1000)


class FeedbackBody(BaseModel):
    """ "This skill was not relevant" for one skill the run applied."""

    model_config = ConfigDict(extra="forbid")

    skill_id: str = Field(min_length=1, max_length=128)
    request_id: str = Field(default="", max_length=128)


class CreateSkillBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # The router checks the slug and sizes (400 or 413 with the field).
    name: str = Field(min_length=1, max_length=64)
    description: str = ""
    body: str = Field(min_length=1)
    auto_use: bool = False
    request_id: str = Field(default="", max_length=128)


class UpdateSkillBody(BaseModel):
    """Only the fields present are changed."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=64)
    description: str | None = None
    body: str | None = Field(default=None, min_length=1)
    auto_use: bool | None = None


class EnablementBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    # None keeps the caller's current override; "off" turns "Use
    # automatically" off for the caller only.
    auto_use: Literal["inherit", "on", "off"] | None = None


# How a CLI provider receives an agent's context; "unspecified" is the
# provider's own strategy (what a response shows when none is set).
InjectionStrategyName = Literal["unspecified", "convention_file", "flag", "stdin", "env"]


class CreateAgentBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9-]*$")
    display_name: str = Field(default="", max_length=200)
    persona: str = Field(default="", max_length=20_000)
    # Pins the agent to that provider ("" = none): a provider of the
    # configured models, and the model's own when both are given.
    provider_id: str = Field(default="", max_length=64)
    model: str = Field(default="", max_length=100)
    injection_strategy: InjectionStrategyName = "unspecified"


class RegisterRemoteAgentBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9-]*$")
    # The URL of the remote agent's A2A agent card; threads fetches and checks it.
    card_url: str = Field(min_length=1, max_length=2048)
    # "" = the card's name.
    display_name: str = Field(default="", max_length=200)


class AskBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Length is checked by the route (413 rather than 400 beyond the limit).
    message: str = Field(min_length=1)
    # Who asks: an agent id, or "user".
    requester: str = Field(default="user", min_length=1, max_length=64)
    # Ties the answer to the question; "" = the run's id.
    correlation_id: str = Field(default="", max_length=128)
    request_id: str = Field(default="", max_length=128)
    busy_policy: Literal["queue", "reject", "interrupt"] = "queue"


class UpdateAgentBody(BaseModel):
    """Only the fields present are changed. A model of another provider is a
    provider swap: the agent's next run starts from its handoff summary."""

    model_config = ConfigDict(extra="forbid")

    display_name: str | None = Field(default=None, max_length=200)
    persona: str | None = Field(default=None, max_length=20_000)
    # "" unpins the agent.
    provider_id: str | None = Field(default=None, max_length=64)
    model: str | None = Field(default=None, max_length=100)
    injection_strategy: InjectionStrategyName | None = None


class ThreadFileBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(min_length=1, max_length=300)
    content: str = Field(max_length=5_000_000)


class ImportThreadBody(BaseModel):
    """An exported agent thread: its files in the project folder's layout
    (agents/<id>/log.jsonl, log.N.jsonl, handoff.md, providers.json)."""

    model_config = ConfigDict(extra="forbid")

    files: list[ThreadFileBody] = Field(min_length=1, max_length=1000)


class ProjectContextBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    body: str = Field(max_length=200_000)


class ProjectFileBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Relative to the project folder: ".ideai/CONTEXT.md", ".ideai/memory/x.md".
    path: str = Field(min_length=1, max_length=300)
    content: str = Field(max_length=1_000_000)


class ImportProjectBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    files: list[ProjectFileBody] = Field(min_length=1, max_length=500)


class LiveStateBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    activity: str = Field(min_length=1, max_length=200)
    detail: str = Field(default="", max_length=2000)
    # Lifetime in seconds; omitted: the memory service's default.
    ttl_seconds: float | None = Field(default=None, gt=0, le=86_400)


class UpdatePageBody(BaseModel):
    """An edit: each save writes a new version. `expected_version` (from the
    version the editor started from) makes a concurrent edit a 409."""

    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(default=None, min_length=1, max_length=200)
    body: str | None = Field(default=None, max_length=200_000)
    expected_version: int = Field(default=0, ge=0)


class RestoreBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    expected_version: int = Field(default=0, ge=0)


# A user id in a page's ACL: one line of text, as member ids are.
AclUserId = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f\x7f]+$")]
AclProjectId = Annotated[
    str, StringConstraints(min_length=1, max_length=MAX_PROJECT_ID_CHARS, pattern=PROJECT_ID_PATTERN)
]


class PageAclBody(BaseModel):
    """A page's whole ACL (owner only): each list replaces the current one;
    an omitted list is emptied. A project must be one the caller is a member
    of (404 otherwise); its members read the page, its editors and owners
    edit it when it is listed as editor."""

    model_config = ConfigDict(extra="forbid")

    reader_user_ids: list[AclUserId] = Field(default_factory=list, max_length=100)
    editor_user_ids: list[AclUserId] = Field(default_factory=list, max_length=100)
    reader_project_ids: list[AclProjectId] = Field(default_factory=list, max_length=100)
    editor_project_ids: list[AclProjectId] = Field(default_factory=list, max_length=100)


NoteKindName = Literal["decision", "feature_summary", "preference", "fact"]


class NoteBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: NoteKindName = "fact"
    title: str = Field(min_length=1, max_length=200)
    body: str = Field(default="", max_length=20_000)
    tags: list[str] = Field(default_factory=list, max_length=20)
    request_id: str = Field(default="", max_length=128)


class UpdateNoteBody(BaseModel):
    """Only the fields present are written."""

    model_config = ConfigDict(extra="forbid")

    kind: NoteKindName | None = None
    title: str | None = Field(default=None, min_length=1, max_length=200)
    body: str | None = Field(default=None, max_length=20_000)
    tags: list[str] | None = Field(default=None, max_length=20)


NotePolicyName = Literal["review", "auto"]
ProjectRoleName = Literal["viewer", "editor", "owner"]


class CreateProjectBody(BaseModel):
    """A project the caller creates and owns."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=MAX_PROJECT_ID_CHARS, pattern=PROJECT_ID_PATTERN)
    display_name: str = Field(min_length=1, max_length=200)
    # Omitted: review (an agent's unrequested note becomes a proposal).
    note_policy: NotePolicyName | None = None


class UpdateProjectBody(BaseModel):
    """Only the fields present are written (owners only)."""

    model_config = ConfigDict(extra="forbid")

    display_name: str | None = Field(default=None, min_length=1, max_length=200)
    note_policy: NotePolicyName | None = None


class ProjectMemberBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: ProjectRoleName
