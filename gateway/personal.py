"""Personal settings, instruction pages, pages (read) and proposals,
backed by the memory service (MemoryService and PagesService), which checks
every ownership itself."""

from __future__ import annotations

import logging
from typing import Annotated

import grpc
from fastapi import Query, Request

from gateway import deps, params, responses
from gateway.catalog import configured_models
from gateway.deps import User, rpc
from gateway.enums import CHAT_MODES, PROPOSAL_STATES
from gateway.errors import ApiError
from gateway.params import Id, PageSize, PageToken
from gateway.schemas import ActivePageBody, DecisionBody, InstructionPageBody, PersonalSettingsBody
from switchboard.engine.v1 import engine_pb2, engine_service_pb2
from switchboard.memory.v1 import memory_pb2, memory_service_pb2, pages_pb2, pages_service_pb2

log = logging.getLogger(__name__)
router = responses.ApiRouter(prefix="/api/agent")


@router.get("/personal-settings", tags=["personal"])
async def get_personal_settings(request: Request, user: User) -> responses.PersonalSettings:
    """The caller's settings; defaults when they never saved any."""
    response = await rpc(
        request,
        deps.memory(request).GetPersonalSettings,
        memory_service_pb2.GetPersonalSettingsRequest(),
        user,
    )
    return responses.PersonalSettings.from_proto(
        response.settings, instruction_page_notice=response.shared_page_notice
    )


async def _check_model(request: Request, user: str, model: str) -> None:
    """A default model must be Auto or a configured model."""
    if model in ("", "auto"):
        return
    if not any(m.id == model for m in await configured_models(request, user)):
        raise ApiError(400, "INVALID_ARGUMENT", f"default_model: {model!r} is not a configured model")


@router.put("/personal-settings", tags=["personal"])
async def update_personal_settings(
    body: PersonalSettingsBody, request: Request, user: User
) -> responses.PersonalSettings:
    """Writes the fields present (display_name, avatar, chat_mode,
    default_model); the others keep their value."""
    fields = {k: v for k, v in body.model_dump(exclude_unset=True).items() if v is not None}
    if not fields:
        raise ApiError(400, "INVALID_ARGUMENT", "nothing to update: give at least one field")
    values = memory_pb2.PersonalSettings()
    paths = []
    if body.display_name is not None:
        values.display_name = body.display_name
        paths.append("display_name")
    if body.avatar is not None:
        values.avatar.update(body.avatar)
        paths.append("avatar")
    if body.chat_mode is not None:
        values.chat_mode = CHAT_MODES.number(body.chat_mode)
        paths.append("chat_mode")
    if body.default_model is not None:
        model = body.default_model.strip()
        await _check_model(request, user, model)
        values.default_model = "" if model == "auto" else model
        paths.append("default_model")
    message = memory_service_pb2.UpdatePersonalSettingsRequest(settings=values)
    message.update_mask.paths.extend(paths)
    response = await rpc(request, deps.memory(request).UpdatePersonalSettings, message, user)
    return responses.PersonalSettings.from_proto(
        response.settings, instruction_page_notice=response.shared_page_notice
    )


def _instruction_state(
    response: pages_service_pb2.AddInstructionPageResponse
    | pages_service_pb2.CreateInstructionPageResponse
    | pages_service_pb2.SetActiveInstructionPageResponse
    | pages_service_pb2.RemoveInstructionPageResponse,
) -> responses.InstructionPageState:
    return responses.InstructionPageState(
        instruction_page_ids=list(response.instruction_page_ids),
        active_instruction_page_id=response.active_instruction_page_id,
    )


@router.post(
    "/personal-settings/instructions-page",
    status_code=201,
    tags=["personal"],
)
async def add_instructions_page(
    body: InstructionPageBody, request: Request, user: User
) -> responses.InstructionPageAdded:
    """Creates the caller's private instruction page from a template ("My
    Switchboard AI" by default) and makes it active, or adds an existing page
    the caller can read (page_id). Idempotent on request_id for a new page."""
    pages = deps.pages(request)
    if body.page_id:
        added = await rpc(
            request,
            pages.AddInstructionPage,
            pages_service_pb2.AddInstructionPageRequest(page_id=body.page_id, make_active=body.make_active),
            user,
        )
        page = await rpc(request, pages.GetPage, pages_service_pb2.GetPageRequest(page_id=body.page_id), user)
        return responses.InstructionPageAdded(
            page=responses.ProtoPage.from_proto(page.page), **_instruction_state(added).model_dump()
        )
    created = await rpc(
        request,
        pages.CreateInstructionPage,
        pages_service_pb2.CreateInstructionPageRequest(
            request_id=body.request_id, template_id=body.template_id, title=body.title
        ),
        user,
        idempotent=bool(body.request_id),
    )
    return responses.InstructionPageAdded(
        page=responses.ProtoPage.from_proto(created.page),
        **_instruction_state(created).model_dump(),
        notice=created.shared_page_notice,
    )


@router.get("/personal-settings/instruction-pages", tags=["personal"])
async def list_instruction_pages(
    request: Request,
    user: User,
    page_size: PageSize = 50,
    page_token: PageToken = "",
) -> responses.InstructionPageList:
    """The caller's instruction pages, each readable or not, and the active one."""
    response = await rpc(
        request,
        deps.pages(request).ListInstructionPages,
        pages_service_pb2.ListInstructionPagesRequest(page_size=page_size, page_token=page_token),
        user,
    )
    return responses.InstructionPageList(
        pages=[responses.InstructionPage.from_proto(page) for page in response.pages],
        active_instruction_page_id=response.active_instruction_page_id,
        next_page_token=response.next_page_token,
        notice=response.shared_page_notice,
    )


@router.put(
    "/personal-settings/instructions-page/active",
    tags=["personal"],
)
async def set_active_instructions_page(
    body: ActivePageBody, request: Request, user: User
) -> responses.InstructionPageState:
    """Switches the active instruction page to one of the caller's pages."""
    response = await rpc(
        request,
        deps.pages(request).SetActiveInstructionPage,
        pages_service_pb2.SetActiveInstructionPageRequest(page_id=body.page_id),
        user,
    )
    return _instruction_state(response)


@router.delete(
    "/personal-settings/instruction-pages/{page_id}",
    tags=["personal"],
)
async def remove_instructions_page(
    page_id: Id, request: Request, user: User
) -> responses.InstructionPageState:
    """Removes a page from the caller's instruction pages (the page itself stays)."""
    response = await rpc(
        request,
        deps.pages(request).RemoveInstructionPage,
        pages_service_pb2.RemoveInstructionPageRequest(page_id=page_id),
        user,
    )
    return _instruction_state(response)


@router.get("/instruction-templates", tags=["personal"])
async def list_instruction_templates(request: Request, user: User) -> responses.InstructionTemplates:
    response = await rpc(
        request,
        deps.pages(request).ListInstructionTemplates,
        pages_service_pb2.ListInstructionTemplatesRequest(page_size=500),
        user,
    )
    return responses.InstructionTemplates(
        templates=[responses.InstructionTemplate.from_proto(t) for t in response.templates]
    )


@router.get("/pages/{page_id}", tags=["pages"])
async def get_page(page_id: Id, request: Request, user: User) -> responses.Page:
    """A page the caller can read (another user's private page is 404)."""
    response = await rpc(
        request, deps.pages(request).GetPage, pages_service_pb2.GetPageRequest(page_id=page_id), user
    )
    return responses.Page.from_proto(response.page)


@router.get("/pages/{page_id}/versions", tags=["pages"])
async def list_page_versions(
    page_id: Id,
    request: Request,
    user: User,
    page_size: PageSize = 50,
    page_token: PageToken = "",
) -> responses.PageVersionList:
    """The page's versions, newest first."""
    response = await rpc(
        request,
        deps.pages(request).ListPageVersions,
        pages_service_pb2.ListPageVersionsRequest(
            page_id=page_id, page_size=page_size, page_token=page_token
        ),
        user,
    )
    return responses.PageVersionList(
        versions=[responses.PageVersion.from_proto(v) for v in response.versions],
        next_page_token=response.next_page_token,
    )


@router.get("/proposals", tags=["proposals"])
async def list_proposals(
    request: Request,
    user: User,
    state: Annotated[str, Query(pattern="^(|pending|accepted|refused)$")] = "",
    page_id: Annotated[str, params.optional_id()] = "",
    page_size: PageSize = 50,
    page_token: PageToken = "",
) -> responses.ProposalList:
    """Proposals the caller can see (their pages', or made for them), newest first."""
    response = await rpc(
        request,
        deps.pages(request).ListProposals,
        pages_service_pb2.ListProposalsRequest(
            page_id=page_id, state=PROPOSAL_STATES.number(state), page_size=page_size, page_token=page_token
        ),
        user,
    )
    return responses.ProposalList(
        proposals=[responses.Proposal.from_proto(p) for p in response.proposals],
        next_page_token=response.next_page_token,
    )


@router.get("/proposals/{proposal_id}", tags=["proposals"])
async def get_proposal(proposal_id: Id, request: Request, user: User) -> responses.Proposal:
    """The proposal with its diff; while pending on a page that has moved
    since, also what changed (base_to_current) and what accepting now would
    change (current_to_proposed)."""
    response = await rpc(
        request,
        deps.pages(request).GetProposal,
        pages_service_pb2.GetProposalRequest(proposal_id=proposal_id),
        user,
    )
    if not response.current_version:
        return responses.Proposal.from_proto(response.proposal)
    return responses.Proposal.from_proto(
        response.proposal,
        current_version=int(response.current_version),
        base_to_current=responses.TextDiff.proto_dict(response.base_to_current),
        current_to_proposed=responses.TextDiff.proto_dict(response.current_to_proposed),
    )


@router.post("/proposals/{proposal_id}/accept", tags=["proposals"])
async def accept_proposal(
    proposal_id: Id, request: Request, user: User, body: DecisionBody | None = None
) -> responses.ProposalDecided:
    """Writes the proposed text as a new page version (the ordinary edit
    path). 409 when the proposal is decided already or the page changed."""
    response = await rpc(
        request,
        deps.pages(request).AcceptProposal,
        pages_service_pb2.AcceptProposalRequest(
            proposal_id=proposal_id, decision_reason=body.reason if body else ""
        ),
        user,
        idempotent=False,
    )
    await settle_waiting_run(request, user, response.proposal, engine_pb2.APPROVAL_DECISION_ACCEPTED)
    return responses.ProposalDecided(
        proposal=responses.Proposal.from_proto(response.proposal),
        page=responses.Page.from_proto(response.page),
    )


@router.post("/proposals/{proposal_id}/refuse", tags=["proposals"])
async def refuse_proposal(
    proposal_id: Id, request: Request, user: User, body: DecisionBody | None = None
) -> responses.ProposalDecided:
    """Nothing is written to the page. 409 when decided already."""
    response = await rpc(
        request,
        deps.pages(request).RefuseProposal,
        pages_service_pb2.RefuseProposalRequest(
            proposal_id=proposal_id, decision_reason=body.reason if body else ""
        ),
        user,
        idempotent=False,
    )
    await settle_waiting_run(request, user, response.proposal, engine_pb2.APPROVAL_DECISION_REFUSED)
    return responses.ProposalDecided(proposal=responses.Proposal.from_proto(response.proposal))


async def settle_waiting_run(
    request: Request, user: str, proposal: pages_pb2.Proposal, decision: engine_pb2.ApprovalDecision.ValueType
) -> None:
    """The run that made the proposal waited for this decision: it is done
    now, with the decision. The decision itself is made whatever happens
    here; a failure leaves the run waiting_approval, and is logged."""
    if not proposal.run_id:
        return
    try:
        await rpc(
            request,
            deps.engine(request).RecordApprovalDecision,
            engine_service_pb2.RecordApprovalDecisionRequest(run_id=proposal.run_id, decision=decision),
            user,
        )
    except grpc.aio.AioRpcError as exc:
        log.warning("run %s keeps waiting: %s %s", proposal.run_id, exc.code().name, exc.details())
