"""RouterService: proto <-> domain, nothing else."""

from __future__ import annotations

from typing import TypeAlias

import grpc

from services.router.domain import Branch, Decision, RouterDomain
from services.router.model_routing import ModelOption
from services.router.models import Skill
from switchboard.router.v1 import router_pb2, router_service_pb2, router_service_pb2_grpc

Context: TypeAlias = grpc.aio.ServicerContext

_BRANCHES = {
    Branch.FORCED: router_pb2.ROUTE_BRANCH_FORCED,
    Branch.HIGH: router_pb2.ROUTE_BRANCH_HIGH,
    Branch.GREY_LLM: router_pb2.ROUTE_BRANCH_GREY_LLM,
    Branch.GREY_DETERMINISTIC: router_pb2.ROUTE_BRANCH_GREY_DETERMINISTIC,
    Branch.NONE: router_pb2.ROUTE_BRANCH_NONE,
}
_PROFILES = {
    "fast": router_pb2.MODEL_PROFILE_FAST,
    "balanced": router_pb2.MODEL_PROFILE_BALANCED,
    "strong": router_pb2.MODEL_PROFILE_STRONG,
}


def skill_to_proto(skill: Skill) -> router_pb2.Skill:
    return router_pb2.Skill(
        id=skill.id,
        name=skill.name,
        description=skill.description,
        body=skill.body,
        builtin=skill.builtin,
        auto_use=skill.auto_use,
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
            )
            for c in decision.candidates
        ],
        high_threshold=decision.high_threshold,
        low_threshold=decision.low_threshold,
        branch=_BRANCHES[decision.branch],
        arbiter=decision.arbiter,
        arbiter_answer=decision.arbiter_answer,
    )


def model_to_proto(option: ModelOption) -> router_pb2.ModelOption:
    return router_pb2.ModelOption(
        id=option.id,
        provider=option.provider,
        model=option.model,
        profile=_PROFILES[option.profile],
        web_only=option.web_only,
        expensive=option.expensive,
    )


class RouterServicer(router_service_pb2_grpc.RouterServiceServicer):
    def __init__(self, domain: RouterDomain) -> None:
        self._domain = domain

    async def ListSkills(
        self, request: router_service_pb2.ListSkillsRequest, context: Context
    ) -> router_service_pb2.ListSkillsResponse:
        skills, token = await self._domain.list_skills(request.page_size, request.page_token)
        return router_service_pb2.ListSkillsResponse(
            skills=[skill_to_proto(s) for s in skills], next_page_token=token
        )

    async def RouteSkills(
        self, request: router_service_pb2.RouteSkillsRequest, context: Context
    ) -> router_service_pb2.RouteSkillsResponse:
        # request.offline changes nothing yet: the grey zone is always decided
        # deterministically until LLM arbitration exists (seed 002 P2-T12).
        route = await self._domain.route_skills(request.text, list(request.forced_skills))
        return router_service_pb2.RouteSkillsResponse(
            skills=[
                router_pb2.ChosenSkill(skill_id=s.skill_id, name=s.name, forced=s.forced, body=s.body)
                for s in route.skills
            ],
            decision=decision_to_proto(route.decision),
        )

    async def RouteModel(
        self, request: router_service_pb2.RouteModelRequest, context: Context
    ) -> router_service_pb2.RouteModelResponse:
        route = self._domain.route_model(request.text, request.requested_model, request.default_model)
        return router_service_pb2.RouteModelResponse(
            model=model_to_proto(route.model), reason=route.reason, routed=route.routed
        )
