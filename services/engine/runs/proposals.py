"""A "remember that…" request: the run proposes adding the fact to the
user's active instruction page and ends waiting for approval. Nothing is
written to the page here: the user's accept writes it."""

from __future__ import annotations

from services.engine.collaborators import Collaborators
from services.engine.remember import with_fact
from services.engine.runs.context import EntryMaker
from services.engine.runs.scope import RunScope
from services.engine.tools import SourceRead
from services.shared.errors import FailedPrecondition, QuotaExceeded
from switchboard.engine.v1 import engine_pb2
from switchboard.memory.v1 import pages_pb2
from switchboard.threads.v1 import threads_pb2


async def propose_to_remember(
    collab: Collaborators, scope: RunScope, fact: str, page: pages_pb2.ActiveInstructions, entry: EntryMaker
) -> engine_pb2.Final:
    """Proposes adding ``fact`` to the active instruction page (created from
    the template of the run's language first if the user has none), and
    answers with what would change, in the run's language."""
    run, user, rec, language = scope.run, scope.user, scope.rec, scope.language
    async with rec.step("proposal", rec.text("step.proposal")):
        if page.state == pages_pb2.INSTRUCTION_PAGE_STATE_UNREADABLE:
            raise FailedPrecondition(rec.text("remember.unreadable"))
        page_id, title, body = page.page_id, page.title, page.body
        try:
            if page.state != pages_pb2.INSTRUCTION_PAGE_STATE_READABLE:
                created = await collab.create_instruction_page(user, f"{run.id}:instruction-page", language)
                page_id, title, body = created.id, created.title, created.body
            proposal = await collab.create_proposal(
                user,
                f"{run.id}:proposal",
                page_id,
                with_fact(body, fact, language),
                rec.text("remember.reason", fact=fact),
                run_id=run.id,
            )
        except QuotaExceeded as exc:
            return await _refused_by_quota(collab, scope, fact, exc, entry)
    rec.emit(
        proposal=engine_pb2.ProposalMade(
            proposal_id=proposal.id,
            page_id=page_id,
            page_title=title,
            summary=fact,
            unified_diff=proposal.diff.unified,
        )
    )
    text = rec.text("remember.answer", title=title, fact=fact)
    await collab.append_entries(
        user,
        scope.thread,
        f"{run.id}:assistant",
        [entry(threads_pb2.ROLE_ASSISTANT, text, "engine")],
    )
    rec.outcome.only_read([SourceRead("page", page_id, title)])
    return engine_pb2.Final(text=text, status=engine_pb2.RUN_STATUS_WAITING_APPROVAL)


async def _refused_by_quota(
    collab: Collaborators, scope: RunScope, fact: str, exc: QuotaExceeded, entry: EntryMaker
) -> engine_pb2.Final:
    """Memory is up but full (too many pending proposals, too many
    instruction pages): the run says which quota and ends done, with nothing
    proposed. Not "memory is unavailable": the user can free room."""
    rec = scope.rec
    rec.say("QUOTA_EXCEEDED", "proposal_refused", cause=exc.message)
    text = rec.text("remember.refused", fact=fact, cause=exc.message)
    await collab.append_entries(
        scope.user,
        scope.thread,
        f"{scope.run_id}:assistant",
        [entry(threads_pb2.ROLE_ASSISTANT, text, "engine")],
    )
    return engine_pb2.Final(text=text, status=engine_pb2.RUN_STATUS_DONE)
