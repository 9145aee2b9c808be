"""PagesService: proto <-> domain (services.memory.pages), nothing else."""

from __future__ import annotations

from typing import Any, TypeVar

import grpc

from services.memory.pages import templates
from services.memory.pages.diffs import TextDiff
from services.memory.pages.domain import PagesDomain
from services.memory.pages.instructions import ActiveInstructions, InstructionList
from services.memory.pages.models import PageVersion, Proposal
from services.memory.pages.pages import PageView
from services.memory.pages.proposals import ProposalView
from services.memory.projects.servicer import actor_of
from services.shared.identity import caller_user
from services.shared.time import to_timestamp
from switchboard.memory.v1 import pages_pb2, pages_service_pb2, pages_service_pb2_grpc

pb = pages_service_pb2


def page_to_proto(view: PageView) -> pages_pb2.Page:
    page = view.page
    return pages_pb2.Page(
        id=page.id,
        owner_user_id=page.owner_user_id,
        title=page.title,
        body=page.body,
        version=page.version,
        reader_user_ids=view.readers,
        editor_user_ids=view.editors,
        reader_project_ids=view.reader_projects,
        editor_project_ids=view.editor_projects,
        create_time=to_timestamp(page.create_time),
        update_time=to_timestamp(page.update_time),
    )


def _active_fields(active: ActiveInstructions) -> dict[str, Any]:
    page = active.page
    return {
        "state": active.state,
        "page_id": active.page_id,
        "title": page.title if page else "",
        "body": page.body if page else "",
        "version": page.version if page else 0,
        "notice": active.notice,
    }


def active_instructions_to_proto(active: ActiveInstructions) -> pages_pb2.ActiveInstructions:
    return pages_pb2.ActiveInstructions(**_active_fields(active))


def version_to_proto(version: PageVersion) -> pages_pb2.PageVersion:
    return pages_pb2.PageVersion(
        page_id=version.page_id,
        version=version.version,
        title=version.title,
        body=version.body,
        author_user_id=version.author_user_id,
        restored_from_version=version.restored_from_version,
        proposal_id=version.proposal_id,
        create_time=to_timestamp(version.create_time),
    )


def diff_to_proto(diff: TextDiff | None) -> pages_pb2.TextDiff | None:
    if diff is None:
        return None
    return pages_pb2.TextDiff(
        old_label=diff.old_label,
        new_label=diff.new_label,
        unified=diff.unified,
        hunks=[
            pages_pb2.DiffHunk(
                old_start=hunk.old_start,
                old_lines=hunk.old_lines,
                new_start=hunk.new_start,
                new_lines=hunk.new_lines,
                lines=[pages_pb2.DiffLine(kind=int(kind), text=text) for kind, text in hunk.lines],  # type: ignore[arg-type]
            )
            for hunk in diff.hunks
        ],
        added_lines=diff.added_lines,
        removed_lines=diff.removed_lines,
    )


def proposal_to_proto(proposal: Proposal, diff: TextDiff | None = None) -> pages_pb2.Proposal:
    return pages_pb2.Proposal(
        id=proposal.id,
        page_id=proposal.page_id,
        proposer_user_id=proposal.proposer_user_id,
        proposer_agent_id=proposal.proposer_agent_id,
        run_id=proposal.run_id,
        base_version=proposal.base_version,
        proposed_body=proposal.proposed_body,
        reason=proposal.reason,
        state=proposal.state,  # type: ignore[arg-type]
        diff=diff_to_proto(diff),
        accepted_version=proposal.accepted_version,
        decision_reason=proposal.decision_reason,
        create_time=to_timestamp(proposal.create_time),
        decide_time=to_timestamp(proposal.decide_time),
    )


def view_to_proto(view: ProposalView) -> pages_pb2.Proposal:
    return proposal_to_proto(view.proposal, view.diff)


# The responses that end with the caller's instruction pages and the active one.
WithInstructionList = TypeVar(
    "WithInstructionList",
    pb.CreateInstructionPageResponse,
    pb.AddInstructionPageResponse,
    pb.RemoveInstructionPageResponse,
    pb.SetActiveInstructionPageResponse,
)


def with_instruction_list(response: WithInstructionList, ids: InstructionList) -> WithInstructionList:
    """``response`` with the caller's instruction page ids and active page set."""
    response.instruction_page_ids.extend(ids.page_ids)
    response.active_instruction_page_id = ids.active_page_id
    return response


class PagesServicer(pages_service_pb2_grpc.PagesServiceServicer):
    def __init__(self, domain: PagesDomain) -> None:
        self._pages = domain.pages
        self._instructions = domain.instructions
        self._proposals = domain.proposals

    # Pages

    async def CreatePage(
        self, request: pb.CreatePageRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreatePageResponse:
        p = request.page
        actor = actor_of(context)
        view = await self._pages.create_page(
            actor.user,
            request.request_id,
            p.title,
            p.body,
            list(p.reader_user_ids),
            list(p.editor_user_ids),
            list(p.reader_project_ids),
            list(p.editor_project_ids),
            actor=actor,
        )
        return pb.CreatePageResponse(page=page_to_proto(view))

    async def GetPage(
        self, request: pb.GetPageRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetPageResponse:
        view = await self._pages.get_page(caller_user(context), request.page_id)
        return pb.GetPageResponse(page=page_to_proto(view))

    async def ListPages(
        self, request: pb.ListPagesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListPagesResponse:
        views, token = await self._pages.list_pages(
            caller_user(context), request.page_size, request.page_token
        )
        return pb.ListPagesResponse(pages=[page_to_proto(v) for v in views], next_page_token=token)

    async def UpdatePage(
        self, request: pb.UpdatePageRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpdatePageResponse:
        p = request.page
        view = await self._pages.update_page(
            caller_user(context),
            p.id,
            p.title,
            p.body,
            list(request.update_mask.paths),
            request.expected_version,
        )
        return pb.UpdatePageResponse(page=page_to_proto(view))

    async def DeletePage(
        self, request: pb.DeletePageRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeletePageResponse:
        await self._pages.delete_page(caller_user(context), request.page_id)
        return pb.DeletePageResponse()

    async def SetPageAcl(
        self, request: pb.SetPageAclRequest, context: grpc.aio.ServicerContext
    ) -> pb.SetPageAclResponse:
        view = await self._pages.set_acl(
            actor_of(context),
            request.page_id,
            list(request.reader_user_ids),
            list(request.editor_user_ids),
            list(request.reader_project_ids),
            list(request.editor_project_ids),
        )
        return pb.SetPageAclResponse(page=page_to_proto(view))

    async def ListPageVersions(
        self, request: pb.ListPageVersionsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListPageVersionsResponse:
        versions, token = await self._pages.list_versions(
            caller_user(context), request.page_id, request.page_size, request.page_token
        )
        return pb.ListPageVersionsResponse(
            versions=[version_to_proto(v) for v in versions], next_page_token=token
        )

    async def GetPageVersion(
        self, request: pb.GetPageVersionRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetPageVersionResponse:
        version = await self._pages.get_version(caller_user(context), request.page_id, request.version)
        return pb.GetPageVersionResponse(version=version_to_proto(version))

    async def RestorePageVersion(
        self, request: pb.RestorePageVersionRequest, context: grpc.aio.ServicerContext
    ) -> pb.RestorePageVersionResponse:
        view = await self._pages.restore_version(
            caller_user(context), request.page_id, request.version, request.expected_version
        )
        return pb.RestorePageVersionResponse(page=page_to_proto(view))

    # Instruction pages

    async def ListInstructionTemplates(
        self, request: pb.ListInstructionTemplatesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListInstructionTemplatesResponse:
        caller_user(context)
        found, token = templates.list_templates(request.page_size, request.page_token)
        return pb.ListInstructionTemplatesResponse(
            templates=[
                pages_pb2.InstructionTemplate(
                    id=t.id, title=t.title, body=t.body, description=t.description, language=t.language
                )
                for t in found
            ],
            next_page_token=token,
        )

    async def CreateInstructionPage(
        self, request: pb.CreateInstructionPageRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateInstructionPageResponse:
        view, ids = await self._instructions.create_instruction_page(
            caller_user(context), request.request_id, request.template_id, request.title, request.language
        )
        response = pb.CreateInstructionPageResponse(
            page=page_to_proto(view), shared_page_notice=templates.shared_page_notice(request.language)
        )
        return with_instruction_list(response, ids)

    async def AddInstructionPage(
        self, request: pb.AddInstructionPageRequest, context: grpc.aio.ServicerContext
    ) -> pb.AddInstructionPageResponse:
        ids = await self._instructions.add_instruction_page(
            caller_user(context), request.page_id, request.make_active
        )
        return with_instruction_list(pb.AddInstructionPageResponse(), ids)

    async def RemoveInstructionPage(
        self, request: pb.RemoveInstructionPageRequest, context: grpc.aio.ServicerContext
    ) -> pb.RemoveInstructionPageResponse:
        ids = await self._instructions.remove_instruction_page(caller_user(context), request.page_id)
        return with_instruction_list(pb.RemoveInstructionPageResponse(), ids)

    async def SetActiveInstructionPage(
        self, request: pb.SetActiveInstructionPageRequest, context: grpc.aio.ServicerContext
    ) -> pb.SetActiveInstructionPageResponse:
        ids = await self._instructions.set_active_instruction_page(caller_user(context), request.page_id)
        return with_instruction_list(pb.SetActiveInstructionPageResponse(), ids)

    async def ListInstructionPages(
        self, request: pb.ListInstructionPagesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListInstructionPagesResponse:
        infos, token, active = await self._instructions.list_instruction_pages(
            caller_user(context), request.page_size, request.page_token
        )
        return pb.ListInstructionPagesResponse(
            pages=[
                pages_pb2.InstructionPage(
                    page_id=info.page_id,
                    state=info.state,  # type: ignore[arg-type]
                    active=info.active,
                    title=info.page.title if info.page else "",
                    version=info.page.version if info.page else 0,
                )
                for info in infos
            ],
            next_page_token=token,
            active_instruction_page_id=active,
            shared_page_notice=templates.shared_page_notice(),
        )

    async def GetActiveInstructions(
        self, request: pb.GetActiveInstructionsRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetActiveInstructionsResponse:
        active = await self._instructions.active_instructions(caller_user(context))
        return pb.GetActiveInstructionsResponse(**_active_fields(active))

    # Proposals

    async def CreateProposal(
        self, request: pb.CreateProposalRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateProposalResponse:
        view = await self._proposals.create_proposal(
            caller_user(context),
            request.request_id,
            request.page_id,
            request.proposed_body,
            request.reason,
            request.proposer_agent_id,
            request.run_id,
        )
        return pb.CreateProposalResponse(proposal=view_to_proto(view))

    async def GetProposal(
        self, request: pb.GetProposalRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetProposalResponse:
        view = await self._proposals.get_proposal(caller_user(context), request.proposal_id)
        return pb.GetProposalResponse(
            proposal=view_to_proto(view),
            current_version=view.current_version,
            base_to_current=diff_to_proto(view.base_to_current),
            current_to_proposed=diff_to_proto(view.current_to_proposed),
        )

    async def ListProposals(
        self, request: pb.ListProposalsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListProposalsResponse:
        views, token = await self._proposals.list_proposals(
            caller_user(context), request.page_id, request.state, request.page_size, request.page_token
        )
        return pb.ListProposalsResponse(proposals=[view_to_proto(v) for v in views], next_page_token=token)

    async def AcceptProposal(
        self, request: pb.AcceptProposalRequest, context: grpc.aio.ServicerContext
    ) -> pb.AcceptProposalResponse:
        proposal, view = await self._proposals.accept_proposal(
            caller_user(context), request.proposal_id, request.decision_reason
        )
        return pb.AcceptProposalResponse(proposal=proposal_to_proto(proposal), page=page_to_proto(view))

    async def RefuseProposal(
        self, request: pb.RefuseProposalRequest, context: grpc.aio.ServicerContext
    ) -> pb.RefuseProposalResponse:
        proposal = await self._proposals.refuse_proposal(
            caller_user(context), request.proposal_id, request.decision_reason
        )
        return pb.RefuseProposalResponse(proposal=proposal_to_proto(proposal))
