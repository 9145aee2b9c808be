"""RouterService: proto <-> domain, nothing else."""

from __future__ import annotations

from typing import Any, TypeAlias, cast

import grpc

from services.router.domain import AutoUseChange, RouterDomain, SkillRoute, SkillView
from services.router.model_routing import ModelOption, ModelRoute
from services.router.models import SkillFeedback
from services.router.skill_router import Decision
from services.shared.audit import Actor
from services.shared.embeddings import TextEmbedding
from services.shared.enums import EnumNames
from services.shared.identity import caller_role, caller_user
from services.shared.time import to_timestamp
from switchboard.router.v1 import router_pb2, router_service_pb2, router_service_pb2_grpc

Context: TypeAlias = grpc.aio.ServicerContext

_BRANCHES = EnumNames(router_pb2.RouteBranch, separator="-")
_PROFILES = EnumNames(router_pb2.ModelProfile)
# UNSPECIFIED keeps the user's auto-use choice as it is.
_AUTO_USE = EnumNames(router_service_pb2.AutoUseOverride)


def actor(context: Context) -> Actor:
    return Actor(caller_user(context), caller_role(context))


def skill_to_proto(view: SkillView) -> router_pb2.Skill:
    skill = view.skill
    return router_pb2.Skill(
        id=skill.id,
        name=skill.name,
        description=skill.description,
        body=skill.body,
        builtin=skill.builtin,
        auto_use=skill.auto_use,
        enabled=view.enabled,
        effective_auto_use=view.effective_auto_use,
        create_time=to_timestamp(skill.create_time),
        update_time=to_timestamp(skill.update_time),
    )


def decision_to_proto(decision: Decision) -> router_pb2.SkillDecision:
    return router_pb2.SkillDecision(
        candidates=[
            router_pb2.SkillCandidate(
                skill_id=c.skill_id,
                name=c.name,
                lexical_score=c.lexical_score,
                embedding_score=c.embedding_score,
                fused_score=c.fused_score,
                lexical_rank=c.lexical_rank,
                embedding_rank=c.embedding_rank,
            )
            for c in decision.candidates
        ],
        high_threshold=decision.high_threshold,
        low_threshold=decision.low_threshold,
        branch=_BRANCHES.number(decision.branch),
        arbiter=decision.arbiter,
        arbiter_answer=decision.arbiter_answer,
        arbiter_error=decision.arbiter_error,
        embedder=decision.embedder,
        max_auto_skills=decision.max_auto_skills,
        arbitration_allowed=decision.arbitration_allowed,
        explanation=decision.explanation,
        excluded_count=decision.excluded_count,
        arbiter_instructions=decision.arbiter_instructions,
        arbiter_question=decision.arbiter_question,
        arbiter_justification=decision.arbiter_justification,
        builtin_task=decision.builtin_task,
        matched_text=decision.matched_text,
    )


def model_to_proto(option: ModelOption) -> router_pb2.ModelOption:
    return router_pb2.ModelOption(
        id=option.id,
        provider=option.provider,
        model=option.model,
        profile=_PROFILES.number(option.profile),
        web_only=option.web_only,
        expensive=option.expensive,
        context_window=option.context_window,
        web_search=option.web_search,
    )


def _skill_route_fields(route: SkillRoute) -> dict[str, Any]:
    return {
        "skills": [
            router_pb2.ChosenSkill(skill_id=s.skill_id, name=s.name, forced=s.forced, body=s.body)
            for s in route.skills
        ],
        "decision": decision_to_proto(route.decision),
    }


def _model_route_fields(route: ModelRoute) -> dict[str, Any]:
    return {
        "model": model_to_proto(route.model),
        "reason": route.reason,
        "routed": route.routed,
        "request_profile": _PROFILES.number(route.request_profile or ""),
        "web_only": route.model.web_only,
        "notices": route.notices,
        "needs_web": route.needs_web,
    }


def feedback_to_proto(feedback: SkillFeedback) -> router_pb2.SkillFeedback:
    return router_pb2.SkillFeedback(
        id=feedback.id,
        skill_id=feedback.skill_id,
        skill_name=feedback.skill_name,
        request_text=feedback.request_text,
        run_id=feedback.run_id,
        create_time=to_timestamp(feedback.create_time),
    )


class RouterServicer(router_service_pb2_grpc.RouterServiceServicer):
    def __init__(self, domain: RouterDomain) -> None:
        self._domain = domain

    async def ListSkills(
        self, request: router_service_pb2.ListSkillsRequest, context: Context
    ) -> router_service_pb2.ListSkillsResponse:
        views, token = await self._domain.list_skills(
            caller_user(context), request.page_size, request.page_token
        )
        return router_service_pb2.ListSkillsResponse(
            skills=[skill_to_proto(v) for v in views], next_page_token=token
        )

    async def GetSkill(
        self, request: router_service_pb2.GetSkillRequest, context: Context
    ) -> router_service_pb2.GetSkillResponse:
        view = await self._domain.get_skill(caller_user(context), request.skill)
        return router_service_pb2.GetSkillResponse(skill=skill_to_proto(view))

    async def CreateSkill(
        self, request: router_service_pb2.CreateSkillRequest, context: Context
    ) -> router_service_pb2.CreateSkillResponse:
        s = request.skill
        view = await self._domain.create_skill(
            actor(context), request.request_id, s.name, s.description, s.body, s.auto_use
        )
        return router_service_pb2.CreateSkillResponse(skill=skill_to_proto(view))

    async def UpdateSkill(
        self, request: router_service_pb2.UpdateSkillRequest, context: Context
    ) -> router_service_pb2.UpdateSkillResponse:
        s = request.skill
        values = {"name": s.name, "description": s.description, "body": s.body, "auto_use": s.auto_use}
        view = await self._domain.update_skill(actor(context), s.id, values, list(request.update_mask.paths))
        return router_service_pb2.UpdateSkillResponse(skill=skill_to_proto(view))

    async def DeleteSkill(
        self, request: router_service_pb2.DeleteSkillRequest, context: Context
    ) -> router_service_pb2.DeleteSkillResponse:
        await self._domain.delete_skill(actor(context), request.skill_id)
        return router_service_pb2.DeleteSkillResponse()

    async def ListAuditEvents(
        self, request: router_service_pb2.ListAuditEventsRequest, context: Context
    ) -> router_service_pb2.ListAuditEventsResponse:
        events, token = await self._domain.list_audit(
            actor(context),
            request.page_size,
            request.page_token,
            request.before if request.HasField("before") else None,
        )
        return router_service_pb2.ListAuditEventsResponse(events=events, next_page_token=token)

    async def SetSkillEnablement(
        self, request: router_service_pb2.SetSkillEnablementRequest, context: Context
    ) -> router_service_pb2.SetSkillEnablementResponse:
        view = await self._domain.set_enablement(
            caller_user(context),
            request.skill_id,
            request.enabled,
            cast(AutoUseChange, _AUTO_USE.name(request.auto_use, "keep")),
        )
        return router_service_pb2.SetSkillEnablementResponse(skill=skill_to_proto(view))

    async def RouteSkills(
        self, request: router_service_pb2.RouteSkillsRequest, context: Context
    ) -> router_service_pb2.RouteSkillsResponse:
        route = await self._domain.route_skills(
            caller_user(context),
            request.text,
            list(request.forced_skills),
            request.offline,
            TextEmbedding.from_proto(request.text_embedding),
        )
        return router_service_pb2.RouteSkillsResponse(**_skill_route_fields(route))

    async def CreateSkillFeedback(
        self, request: router_service_pb2.CreateSkillFeedbackRequest, context: Context
    ) -> router_service_pb2.CreateSkillFeedbackResponse:
        feedback, offer = await self._domain.create_feedback(
            caller_user(context), request.request_id, request.skill_id, request.request_text, request.run_id
        )
        return router_service_pb2.CreateSkillFeedbackResponse(
            feedback=feedback_to_proto(feedback), offer_disable_auto_use=offer
        )

    async def ListSkillFeedback(
        self, request: router_service_pb2.ListSkillFeedbackRequest, context: Context
    ) -> router_service_pb2.ListSkillFeedbackResponse:
        rows, token = await self._domain.list_feedback(
            caller_user(context), request.page_size, request.page_token
        )
        return router_service_pb2.ListSkillFeedbackResponse(
            feedback=[feedback_to_proto(f) for f in rows], next_page_token=token
        )

    async def ListModels(
        self, request: router_service_pb2.ListModelsRequest, context: Context
    ) -> router_service_pb2.ListModelsResponse:
        models, token = self._domain.list_models(request.page_size, request.page_token)
        return router_service_pb2.ListModelsResponse(
            models=[model_to_proto(m) for m in models], next_page_token=token
        )

    async def RouteModel(
        self, request: router_service_pb2.RouteModelRequest, context: Context
    ) -> router_service_pb2.RouteModelResponse:
        route = self._domain.route_model(
            request.text, request.requested_model, request.default_model, request.offline, request.provider_id
        )
        return router_service_pb2.RouteModelResponse(**_model_route_fields(route))

    async def RouteMessage(
        self, request: router_service_pb2.RouteMessageRequest, context: Context
    ) -> router_service_pb2.RouteMessageResponse:
        skills, model = await self._domain.route_message(
            caller_user(context),
            request.text,
            list(request.forced_skills),
            request.requested_model,
            request.default_model,
            request.offline,
            TextEmbedding.from_proto(request.text_embedding),
        )
        return router_service_pb2.RouteMessageResponse(
            skills=router_pb2.SkillRoute(**_skill_route_fields(skills)),
            model=router_pb2.ModelRoute(**_model_route_fields(model)),
        )
