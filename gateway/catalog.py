"""What a client offers around a message: models (Auto + configured, from the
router), skills and the caller's enablement, the sources a conversation can
allow, and suggested actions for a page (no model call)."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import Query, Request, Response
from google.protobuf.field_mask_pb2 import FieldMask

from gateway import deps, params, responses
from gateway.deps import User, rpc
from gateway.enums import AUTO_USE
from gateway.errors import ApiError
from gateway.events import message_dict
from gateway.params import Id, PageSize, PageToken
from gateway.schemas import CreateSkillBody, EnablementBody, UpdateSkillBody
from gateway.suggestions import suggest
from switchboard.engine.v1 import engine_pb2, engine_service_pb2
from switchboard.router.v1 import router_pb2, router_service_pb2
from switchboard.threads.v1 import threads_service_pb2

router = responses.ApiRouter(prefix="/api/agent")


async def configured_models(request: Request, user: str) -> list[router_pb2.ModelOption]:
    """The router's configured models, in order (every page)."""
    return await deps.every_item(
        request,
        deps.router_stub(request).ListModels,
        lambda token: router_service_pb2.ListModelsRequest(page_size=500, page_token=token),
        lambda page: page.models,
        user,
    )


@router.get("/models", tags=["catalog"])
async def list_models(request: Request, user: User) -> responses.ModelList:
    """`auto` first, then the router's configured models in order, each
    with web_only (gets no workspace context: warn before sending and
    untick workspace sources) and expensive (Auto avoids it unless the
    request is classified strong)."""
    models = [responses.ModelOption.from_proto(m) for m in await configured_models(request, user)]
    # Not a configured model: its fields written out, checked by the model.
    auto = responses.ModelOption.model_validate(
        {
            "id": "auto",
            "label": "Auto",
            "provider": "",
            "model": "",
            "profile": "",
            "web_only": False,
            "expensive": False,
            "web_search": False,
        }
    )
    return responses.ModelList(models=[auto, *models])


@router.get("/skills", tags=["catalog"])
async def list_skills(
    request: Request,
    user: User,
    page_size: PageSize = 100,
    page_token: PageToken = "",
) -> responses.SkillList:
    """The skill catalog by name, with the caller's enabled and effective_auto_use."""
    response = await rpc(
        request,
        deps.router_stub(request).ListSkills,
        router_service_pb2.ListSkillsRequest(page_size=page_size, page_token=page_token),
        user,
    )
    return responses.SkillList(
        skills=[responses.Skill.from_proto(s) for s in response.skills],
        next_page_token=response.next_page_token,
    )


@router.get("/skills/{skill_id}", tags=["catalog"])
async def get_skill(skill_id: Id, request: Request, user: User) -> responses.SkillDefinition:
    """One skill by id or name, with its instructions (`body`, what a run
    applies) and the caller's enabled and effective_auto_use: what a run's
    Sources panel links to. 404 for neither."""
    response = await rpc(
        request,
        deps.router_stub(request).GetSkill,
        router_service_pb2.GetSkillRequest(skill=skill_id),
        user,
    )
    return responses.SkillDefinition.from_proto(response.skill)


@router.post("/skills", status_code=201, tags=["catalog"])
async def create_skill(body: CreateSkillBody, request: Request, user: User) -> responses.Skill:
    """Adds a skill to the workspace catalog (admins only: 403 for a user);
    idempotent on request_id. 409 when the name is taken."""
    response = await rpc(
        request,
        deps.router_stub(request).CreateSkill,
        router_service_pb2.CreateSkillRequest(
            request_id=body.request_id,
            skill=router_pb2.Skill(
                name=body.name, description=body.description, body=body.body, auto_use=body.auto_use
            ),
        ),
        user,
        idempotent=bool(body.request_id),
    )
    return responses.Skill.from_proto(response.skill)


@router.patch("/skills/{skill_id}", tags=["catalog"])
async def update_skill(skill_id: Id, body: UpdateSkillBody, request: Request, user: User) -> responses.Skill:
    """Changes a workspace skill (admins only); only the fields present are
    written. Built-ins cannot be changed (409)."""
    fields = {key: value for key, value in body.model_dump(exclude_unset=True).items() if value is not None}
    if not fields:
        raise ApiError(400, "INVALID_ARGUMENT", "give at least one field to change")
    response = await rpc(
        request,
        deps.router_stub(request).UpdateSkill,
        router_service_pb2.UpdateSkillRequest(
            skill=router_pb2.Skill(id=skill_id, **fields), update_mask=FieldMask(paths=sorted(fields))
        ),
        user,
    )
    return responses.Skill.from_proto(response.skill)


@router.delete("/skills/{skill_id}", status_code=204, tags=["catalog"])
async def delete_skill(skill_id: Id, request: Request, user: User) -> Response:
    """Deletes a workspace skill (admins only). Built-ins cannot be deleted (409)."""
    await rpc(
        request,
        deps.router_stub(request).DeleteSkill,
        router_service_pb2.DeleteSkillRequest(skill_id=skill_id),
        user,
    )
    return Response(status_code=204)


@router.put("/skills/{skill_id}/enablement", tags=["catalog"])
async def set_skill_enablement(
    skill_id: Id, body: EnablementBody, request: Request, user: User
) -> responses.Skill:
    """The caller's enablement of a skill and their "Use automatically"
    override (`auto_use: "off"` after "this skill was not relevant")."""
    response = await rpc(
        request,
        deps.router_stub(request).SetSkillEnablement,
        router_service_pb2.SetSkillEnablementRequest(
            skill_id=skill_id, enabled=body.enabled, auto_use=AUTO_USE.number(body.auto_use or "")
        ),
        user,
    )
    return responses.Skill.from_proto(response.skill)


# The engine's sources change only when it restarts with other settings, and
# the popover reads them each time it opens: one read serves this long.
SOURCES_TTL_SECONDS = 10.0


class EngineSources:
    """The sources catalogue the engine honours (ListSources, every page),
    read again once older than ``ttl`` seconds. The same for every caller;
    a failed read is not kept."""

    def __init__(self, ttl: float = SOURCES_TTL_SECONDS) -> None:
        self._ttl = ttl
        self._read: tuple[float, list[engine_pb2.Source]] | None = None

    async def get(self, request: Request, user: str) -> list[engine_pb2.Source]:
        now = time.monotonic()
        if self._read is None or now - self._read[0] >= self._ttl:
            self._read = (now, await self._read_all(request, user))
        return self._read[1]

    @staticmethod
    async def _read_all(request: Request, user: str) -> list[engine_pb2.Source]:
        return await deps.every_item(
            request,
            deps.engine(request).ListSources,
            lambda token: engine_service_pb2.ListSourcesRequest(page_size=500, page_token=token),
            lambda page: page.sources,
            user,
        )


@router.get("/sources", tags=["catalog"])
async def list_sources(
    request: Request,
    user: User,
    conversation_id: Annotated[str, params.optional_id(description="mark what it allows")] = "",
) -> responses.SourceList:
    """What the All-sources popover offers: the workspace (always), the
    connectors and the MCP servers the engine is configured with (what its
    runs honour). With conversation_id, each carries `checked`: whether that
    conversation allows it."""
    sources: EngineSources = request.app.state.sources
    configured_sources = await sources.get(request, user)
    allowed: dict[str, Any] | None = None
    if conversation_id:
        response = await rpc(
            request,
            deps.threads(request).GetConversation,
            threads_service_pb2.GetConversationRequest(conversation_id=conversation_id),
            user,
        )
        allowed = message_dict(response.conversation.allowed_sources)

    def entry(kind: str, name: str, title: str, checked: bool) -> responses.SourceEntry:
        source = responses.SourceEntry(kind=kind, name=name, title=title)
        # `checked` only with a conversation: left out otherwise.
        if allowed is not None:
            source.checked = checked
        return source

    def configured(
        kind: str, key: str, source_kind: engine_pb2.SourceKind.ValueType
    ) -> list[responses.SourceEntry]:
        return [
            entry(kind, s.name, s.title, allowed is not None and s.name in allowed.get(key, []))
            for s in configured_sources
            if s.kind == source_kind
        ]

    workspace = allowed is not None and bool(allowed.get("workspace", False))
    return responses.SourceList(
        workspace=entry("workspace", "workspace", "Workspace", workspace),
        connectors=configured("connector", "connectors", engine_pb2.SOURCE_KIND_CONNECTOR),
        mcp_servers=configured("mcp", "mcp_servers", engine_pb2.SOURCE_KIND_MCP_SERVER),
    )


@router.get("/suggested-actions", tags=["catalog"])
async def suggested_actions(
    user: User,
    page_type: Annotated[str, params.text(50)] = "page",
    selection: Annotated[str, params.text(4000)] = "",
    language: Annotated[str, Query(pattern="^(en|fr)$")] = "en",
) -> responses.SuggestedActions:
    """2 to 4 prompt starters for the current page, computed without any
    model call, in English or French. A click prefills the composer; it
    never starts a run."""
    return responses.SuggestedActions(
        actions=[responses.SuggestedAction(**s.__dict__) for s in suggest(page_type, selection, language)]
    )
