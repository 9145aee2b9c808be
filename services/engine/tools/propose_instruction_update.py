"""propose_instruction_update: a line for the user's instruction page, as a
proposal the user accepts or refuses; nothing is written before. Offered
only when the user's own message asks to remember something or to change
the instructions."""

from __future__ import annotations

from pydantic import Field

from services.engine.tools.backend import InstructionProposal
from services.engine.tools.builtin import Args, Builtin, ToolServices
from services.engine.tools.context import ToolContext
from services.engine.tools.policy import authorise


class ProposeInstructionUpdateArgs(Args):
    addition: str = Field(
        min_length=1, max_length=500, description="The line to add to the user's instruction page."
    )
    reason: str = Field(default="", max_length=500, description="Why, in the user's words.")


async def propose_instruction_update(
    tools: ToolServices, args: ProposeInstructionUpdateArgs, context: ToolContext, call_id: str
) -> tuple[str, InstructionProposal]:
    authorise(
        "propose_instruction_update",
        context,
        asked=context.allow_instruction_update,
        texts=[args.addition, args.reason],
        what="remember anything or change the instructions",
    )
    proposal = await tools.backend.propose_instruction_update(
        context.user,
        f"{context.run_id}:{call_id}",
        args.addition,
        args.reason,
        run_id=context.run_id,
        language=context.language,
    )
    # The proposal's diff shows the page's text: the page was read.
    context.record("page", proposal.page_id, proposal.page_title)
    return (
        f"Proposal {proposal.proposal_id} for {proposal.page_title!r} awaits the user's decision; "
        "nothing changes until they accept it.",
        proposal,
    )


TOOL = Builtin(
    "propose_instruction_update",
    "instructions",
    "Proposes adding a line to the user's instruction page; the user accepts or "
    "refuses the change, nothing is written before. The line in the user's own words.",
    ProposeInstructionUpdateArgs,
    propose_instruction_update,
    lambda context, _: context.allow_instruction_update and not context.web_only,
    writes=True,
)
