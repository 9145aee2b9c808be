"""The catalog: models, skills, sources, suggested actions."""

from __future__ import annotations

from pydantic import Field

from gateway import enums
from gateway.responses.base import NEXT_PAGE, Body
from gateway.responses.views import (
    ProtoView,
    computed,
    optional,
    short,
)
from switchboard.router.v1 import router_pb2


# Catalog: models, skills, sources, suggested actions.
class ModelOption(ProtoView, proto=router_pb2.ModelOption):
    profile: str = short(enums.MODEL_PROFILES, enums.documented(enums.MODEL_PROFILES) + '; "" for auto')
    label: str = computed("what a menu shows", lambda model: model.id)
    context_window: int = optional("absent for auto")


class ModelList(Body):
    """What a model selector offers: auto first, then the configured models in order."""

    models: list[ModelOption] = Field(description="auto, then the configured models")


class Skill(ProtoView, proto=router_pb2.Skill, drop=("body",)):
    pass


# One skill's definition: with its instructions (what a run applies).
class SkillDefinition(ProtoView, proto=router_pb2.Skill):
    pass


class SkillList(Body):
    """A page of the skill catalog, by name, with the caller's enablement."""

    skills: list[Skill] = Field(description="the skills of this page (without their body)")
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
    connectors: list[SourceEntry] = Field(description="the connectors the engine is configured with")
    mcp_servers: list[SourceEntry] = Field(description="the MCP servers the engine is configured with")


class SuggestedAction(Body):
    """A prompt starter."""

    id: str = Field(description="stable id of the suggestion")
    label: str = Field(description="what the button shows, in the requested language")
    prompt: str = Field(description="what a click puts in the composer")


class SuggestedActions(Body):
    """Prompt starters for the page being edited, computed without a model call."""

    actions: list[SuggestedAction] = Field(description="2 to 4 suggestions")
