"""Proposals: a change to a page that its owner accepts or refuses. A
proposal is against the version it was made on; accepting writes it through
:meth:`Pages.write` only while the page is still at that version, and
otherwise says what changed since, as diffs."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from services.memory.pages.access import MAX_ID_CHARS, PageAccess
from services.memory.pages.diffs import TextDiff, diff_texts
from services.memory.pages.models import PROPOSAL_PENDING, PROPOSAL_REFUSED, Page, Proposal
from services.memory.pages.pages import Pages, PageView, by_time, version_label
from services.memory.pages.repository import PagesRepository, ProposalDecided, VersionWrite
from services.shared.errors import FailedPrecondition, InvalidArgument, NotFound, QuotaExceeded, TooLarge
from services.shared.pagination import page_of, page_request
from services.shared.time import utcnow

MAX_RUN_ID_CHARS = 64
MAX_REASON_CHARS = 1000
# Each diff carried in a FAILED_PRECONDITION's ErrorInfo is cut to this many
# characters: gRPC clients refuse trailers above 8 KiB. GetProposal has them whole.
ERROR_DIFF_CHARS = 2000


@dataclass(frozen=True)
class ProposalView:
    proposal: Proposal
    diff: TextDiff
    # Set while pending when the page has moved past the base version and the
    # caller can still read it.
    current_version: int = 0
    base_to_current: TextDiff | None = None
    current_to_proposed: TextDiff | None = None


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Proposals:
    def __init__(
        self, repository: PagesRepository, access: PageAccess, pages: Pages, max_pending_proposals: int
    ) -> None:
        self._repo = repository
        self._access = access
        self._pages = pages
        self._max_pending_proposals = max_pending_proposals

    async def create_proposal(
        self,
        user_id: str,
        request_id: str,
        page_id: str,
        proposed_body: str,
        reason: str,
        agent_id: str,
        run_id: str = "",
    ) -> ProposalView:
        proposed_body = self._pages.check_body(proposed_body, "proposed_body")
        reason = reason.strip()
        if len(reason) > MAX_REASON_CHARS:
            raise TooLarge(f"reason is longer than {MAX_REASON_CHARS} characters", field="reason")
        if len(agent_id) > MAX_ID_CHARS:
            raise InvalidArgument(
                f"proposer_agent_id is longer than {MAX_ID_CHARS} characters", field="proposer_agent_id"
            )
        if len(run_id) > MAX_RUN_ID_CHARS:
            raise InvalidArgument(f"run_id is longer than {MAX_RUN_ID_CHARS} characters", field="run_id")
        page, _ = await self._access.readable(user_id, page_id)
        if proposed_body == page.body:
            raise InvalidArgument(
                f"the proposal changes nothing: it equals version {page.version} of the page",
                field="proposed_body",
            )
        if await self._repo.pending_proposals(page.id) >= self._max_pending_proposals:
            raise QuotaExceeded(
                f"page {page.id!r} has {self._max_pending_proposals} pending proposals already; "
                "decide some first",
                page_id=page.id,
            )
        proposal = await self._repo.insert_proposal(
            Proposal(
                id=str(uuid.uuid4()),
                page_id=page.id,
                page_owner_user_id=page.owner_user_id,
                proposer_user_id=user_id,
                proposer_agent_id=agent_id.strip(),
                run_id=run_id.strip(),
                base_version=page.version,
                proposed_body=proposed_body,
                reason=reason,
                state=PROPOSAL_PENDING,
                request_id=request_id.strip() or None,
                create_time=utcnow(),
            )
        )
        return ProposalView(proposal, diff_texts(page.body, proposal.proposed_body, *self._labels(proposal)))

    @staticmethod
    def _labels(proposal: Proposal) -> tuple[str, str]:
        return version_label(proposal.page_id, proposal.base_version), f"proposal {proposal.id}"

    async def _visible_proposal(self, user_id: str, proposal_id: str) -> Proposal:
        """The page's owner sees it; its proposer too, while they may read the page."""
        proposal = await self._repo.get_proposal(proposal_id) if proposal_id else None
        visible = proposal is not None and (
            proposal.page_owner_user_id == user_id
            or (
                proposal.proposer_user_id == user_id
                and await self._access.readable_or_none(user_id, proposal.page_id) is not None
            )
        )
        if proposal is None or not visible:
            raise NotFound(f"proposal {proposal_id!r} not found", proposal_id=proposal_id)
        return proposal

    async def _base_body(self, proposal: Proposal) -> str:
        base = await self._repo.get_version(proposal.page_id, proposal.base_version)
        return base.body if base is not None else ""

    async def get_proposal(self, user_id: str, proposal_id: str) -> ProposalView:
        proposal = await self._visible_proposal(user_id, proposal_id)
        base_body = await self._base_body(proposal)
        view = ProposalView(proposal, diff_texts(base_body, proposal.proposed_body, *self._labels(proposal)))
        if proposal.state != PROPOSAL_PENDING:
            return view
        page = await self._access.readable_or_none(user_id, proposal.page_id)
        if page is None or page.version == proposal.base_version:
            return view
        base_to_current, current_to_proposed = self._drift(proposal, base_body, page)
        return ProposalView(view.proposal, view.diff, page.version, base_to_current, current_to_proposed)

    @staticmethod
    def _drift(proposal: Proposal, base_body: str, page: Page) -> tuple[TextDiff, TextDiff]:
        current = version_label(page.id, page.version)
        return (
            diff_texts(base_body, page.body, version_label(page.id, proposal.base_version), current),
            diff_texts(page.body, proposal.proposed_body, current, f"proposal {proposal.id}"),
        )

    async def list_proposals(
        self, user_id: str, page_id: str, state: int, requested_size: int, token: str
    ) -> tuple[list[ProposalView], str]:
        if state not in (0, 1, 2, 3):
            raise InvalidArgument(f"state {state} is not a proposal state", field="state")
        size, after = page_request(requested_size, token, by_time)
        fetched = await self._repo.visible_proposals(user_id, page_id.strip(), state, after, size + 1)
        rows, next_token = page_of(
            fetched, size, lambda last: {"time": last.create_time.isoformat(), "id": last.id}
        )
        bases = await self._repo.get_versions([(p.page_id, p.base_version) for p in rows])
        views = []
        for proposal in rows:
            base = bases.get((proposal.page_id, proposal.base_version))
            diff = diff_texts(base.body if base else "", proposal.proposed_body, *self._labels(proposal))
            views.append(ProposalView(proposal, diff))
        return views, next_token

    async def _decidable(self, user_id: str, proposal_id: str) -> Proposal:
        proposal = await self._visible_proposal(user_id, proposal_id)
        if proposal.page_owner_user_id != user_id:
            raise FailedPrecondition(
                f"only the owner of page {proposal.page_id!r} can decide proposal {proposal_id!r}",
                proposal_id=proposal_id,
            )
        if proposal.state != PROPOSAL_PENDING:
            raise self._decided(proposal)
        return proposal

    @staticmethod
    def _decided(proposal: Proposal) -> FailedPrecondition:
        state = "accepted" if proposal.state != PROPOSAL_REFUSED else "refused"
        return FailedPrecondition(
            f"proposal {proposal.id!r} was {state} already; a decided proposal cannot be decided again",
            proposal_id=proposal.id,
            state=state,
        )

    async def accept_proposal(self, user_id: str, proposal_id: str, reason: str) -> tuple[Proposal, PageView]:
        """Writes the proposed body as a new version through :meth:`Pages.write`
        (the path of every edit), only if the page is still at the base version."""
        reason = self._check_reason(reason)
        proposal = await self._decidable(user_id, proposal_id)
        page, role = await self._access.readable(user_id, proposal.page_id)
        if page.version != proposal.base_version:
            raise await self._not_acceptable(user_id, proposal)
        try:
            write = VersionWrite(
                author_user_id=user_id,
                body=proposal.proposed_body,
                proposal_id=proposal.id,
                decision_reason=reason,
            )
            saved = await self._pages.write(page, proposal.base_version, write)
        except ProposalDecided:
            raise self._decided(await self._visible_proposal(user_id, proposal_id)) from None
        except FailedPrecondition:
            raise await self._not_acceptable(user_id, proposal) from None
        decided = await self._visible_proposal(user_id, proposal_id)
        return decided, await self._pages.view(saved, role)

    async def _not_acceptable(self, user_id: str, proposal: Proposal) -> FailedPrecondition:
        """Why a proposal whose page has moved cannot be accepted: a concurrent
        accept of this very proposal moved it (decided), or another edit did (stale)."""
        latest = await self._visible_proposal(user_id, proposal.id)
        if latest.state != PROPOSAL_PENDING:
            return self._decided(latest)
        page, _ = await self._access.readable(user_id, proposal.page_id)
        return self._stale(proposal, await self._base_body(proposal), page)

    def _stale(self, proposal: Proposal, base_body: str, page: Page) -> FailedPrecondition:
        base_to_current, current_to_proposed = self._drift(proposal, base_body, page)
        return FailedPrecondition(
            f"page {page.id!r} changed since proposal {proposal.id!r} was made: the proposal is against "
            f"version {proposal.base_version}, the page is at version {page.version}. Nothing was written. "
            "The error details carry base_to_current (what changed since, "
            f"{version_label(page.id, proposal.base_version)} -> {version_label(page.id, page.version)}) and "
            f"current_to_proposed (what accepting would change now, {version_label(page.id, page.version)} "
            "-> proposal); GetProposal returns both whole.",
            proposal_id=proposal.id,
            page_id=page.id,
            base_version=str(proposal.base_version),
            current_version=str(page.version),
            base_to_current=_clip(base_to_current.unified, ERROR_DIFF_CHARS),
            current_to_proposed=_clip(current_to_proposed.unified, ERROR_DIFF_CHARS),
        )

    async def refuse_proposal(self, user_id: str, proposal_id: str, reason: str) -> Proposal:
        """Writes nothing but the proposal's state."""
        reason = self._check_reason(reason)
        proposal = await self._decidable(user_id, proposal_id)
        decided = await self._repo.decide_proposal(proposal.id, PROPOSAL_REFUSED, reason)
        if decided is None:
            raise self._decided(await self._visible_proposal(user_id, proposal_id))
        return decided

    @staticmethod
    def _check_reason(reason: str) -> str:
        reason = reason.strip()
        if len(reason) > MAX_REASON_CHARS:
            raise TooLarge(
                f"decision_reason is longer than {MAX_REASON_CHARS} characters", field="decision_reason"
            )
        return reason
