"""ask_agent: asks another agent a question, as a nested AskAgent run, and
returns its answer. Only an agent the user's message names, with a question
in the user's words: the question is recorded in that agent's thread."""

from __future__ import annotations

from pydantic import Field

from services.engine.tools.builtin import Args, Builtin, ToolServices
from services.engine.tools.context import ToolContext
from services.engine.tools.policy import authorise
from services.shared.write_guard import names_agent


class AskAgentArgs(Args):
    agent: str = Field(min_length=1, max_length=64, description="The id of the agent to ask.")
    message: str = Field(min_length=1, max_length=4000, description="The question.")


async def ask_agent(
    tools: ToolServices, args: AskAgentArgs, context: ToolContext, call_id: str
) -> tuple[str, None]:
    authorise(
        "ask_agent",
        context,
        asked=names_agent(context.request, args.agent),
        texts=[args.message],
        what="ask another agent",
    )
    reply = await tools.backend.ask_agent(
        context.user,
        f"{context.run_id}:{call_id}",
        args.agent,
        args.message,
        parent_run_id=context.run_id,
        requester=context.agent,
        chain=context.ask_chain or (context.agent,),
        correlation_id=context.correlation_id,
    )
    context.record("agent", reply.agent_id, reply.agent_name)
    return f"{reply.agent_name} answered:\n{reply.text}", None


TOOL = Builtin(
    "ask_agent",
    "agents",
    "Asks another agent a question and returns its answer. Only an agent the user "
    "named, with a question in the user's own words (it is recorded in the agent's thread).",
    AskAgentArgs,
    ask_agent,
    lambda context, _: not context.web_only,
    writes=True,  # the question is recorded in the agent's thread and handoff log
)
